// One transaction for work that spans features: services.ts builds the repos and services again on
// the transaction's handle, so each feature still writes only through its own repo.
import { type Kysely, sql } from "kysely";
import type { Database } from "./schema.ts";

export function runInTransaction<T>(
  db: Kysely<Database>,
  fn: (trx: Kysely<Database>) => Promise<T>,
): Promise<T> {
  return db.transaction().execute(fn);
}

/**
 * One transaction holding a PostgreSQL advisory lock on `key` until it ends: the way a count or a
 * single-use rule is kept exact across replicas (two replicas asking for the same key wait in turn).
 * Given a transaction's handle, the lock is taken in that transaction and held until it ends, so
 * that the work joins the caller's (its audit row, say) instead of committing apart.
 * @example inAdvisoryLock(db, `email:${address}`, (trx) => countAndSend(trx))
 */
export function inAdvisoryLock<T>(
  db: Kysely<Database>,
  key: string,
  fn: (trx: Kysely<Database>) => Promise<T>,
): Promise<T> {
  const locked = async (trx: Kysely<Database>) => {
    await sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`.execute(trx);
    return fn(trx);
  };
  return db.isTransaction ? locked(db) : db.transaction().execute(locked);
}
