// `vault kek-rotate` against the hosted control plane's database and DATA_DIR (the same
// configuration `npm start` reads). With the embedded database the service must be stopped first:
// one process at a time holds PGlite.
import { resolve } from "node:path";
import { keyringPath } from "../auth/kek.ts";
import { rotateKek } from "../auth/kek-rotate.ts";
import { createOperatorsRepo } from "../auth/operators.repo.ts";
import { loadConfig } from "../config.ts";
import { openDatabase } from "../db/database.ts";
import { tryLocalLock } from "../local/local-lock.ts";

export async function runKekRotate(
  env: NodeJS.ProcessEnv,
  progress: (line: string) => void,
): Promise<number> {
  const config = loadConfig(env);
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
      const path = config.KEK_KEYRING_FILE ?? keyringPath(dataDir);
      progress(`rotating the key-encryption key in ${path}`);
      const report = await rotateKek(createOperatorsRepo(database.db), path, progress);
      progress(`done: ${report.rewrapped} operator(s) now under ${report.keyId}`);
      return report.unknownKeyRows > 0 ? 1 : 0;
    } finally {
      await database.close();
    }
  } finally {
    lock?.release();
  }
}
