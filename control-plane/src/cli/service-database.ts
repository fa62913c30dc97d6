// The service's database for a command that works on it while the service is stopped (kek-rotate,
// seal-rewrap): the embedded database's lock is taken first, so the command never writes beside a
// running service; a PostgreSQL database has no such lock (its commands are row-safe).
import { resolve } from "node:path";
import type { ControlPlaneConfig } from "../config.ts";
import { type OpenDatabase, openDatabase } from "../db/database.ts";
import { tryLocalLock } from "../local/local-lock.ts";

export async function withServiceDatabase<T>(
  config: ControlPlaneConfig,
  work: (database: OpenDatabase, dataDir: string) => Promise<T>,
): Promise<T> {
  const dataDir = resolve(config.DATA_DIR);
  const lock = config.DATABASE_URL ? undefined : tryLocalLock(dataDir);
  if (lock && "heldBy" in lock) {
    throw new Error(
      `the service (pid ${lock.heldBy}) holds the embedded database in ${dataDir}; stop it first`,
    );
  }
  try {
    const database = await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir });
    try {
      return await work(database, dataDir);
    } finally {
      await database.close();
    }
  } finally {
    lock?.release();
  }
}
