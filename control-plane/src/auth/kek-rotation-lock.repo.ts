// One `vault kek-rotate` at a time on a shared PostgreSQL database. Hosted, each operator or job
// rotates with its own copy of kek.json: two at once would each add their own key to their own
// copy and re-wrap the same rows under it, and whichever copy reached the Secret would lack the
// other's key, so the secrets wrapped under it would never open again. The key file's lock cannot
// see a copy on another machine; the database that both re-wrap can. A session advisory lock held
// on one connection for the whole command: a process killed mid-rotation loses its connection,
// and with it the lock.
import { type Kysely, sql } from "kysely";
import type { Database } from "../db/schema.ts";

/** The advisory lock's key: one per database, whichever organisation or operator. */
const KEK_ROTATION_LOCK = "latch:kek-rotate";

/** Thrown when another `vault kek-rotate` holds the lock: nothing was changed. */
export class KekRotationBusyError extends Error {
  readonly code = "kek_rotation_busy";
}

/**
 * Runs `work` holding the database's KEK rotation lock, or refuses at once with
 * KekRotationBusyError when another process holds it (`work` has then not run).
 */
export async function withKekRotationLock<T>(db: Kysely<Database>, work: () => Promise<T>): Promise<T> {
  return db.connection().execute(async (connection) => {
    const { rows } = await sql<{ locked: boolean }>`
      select pg_try_advisory_lock(hashtextextended(${KEK_ROTATION_LOCK}, 0)) as locked
    `.execute(connection);
    if (!rows[0]?.locked) {
      throw new KekRotationBusyError(
        "another vault kek-rotate is running against this database; nothing was changed: run this again once it has finished",
      );
    }
    try {
      return await work();
    } finally {
      await sql`select pg_advisory_unlock(hashtextextended(${KEK_ROTATION_LOCK}, 0))`.execute(connection);
    }
  });
}
