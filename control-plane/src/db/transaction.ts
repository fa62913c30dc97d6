// One transaction for work that spans features: services.ts builds the repos and services again on
// the transaction's handle, so each feature still writes only through its own repo.
import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";

export function runInTransaction<T>(
  db: Kysely<Database>,
  fn: (trx: Kysely<Database>) => Promise<T>,
): Promise<T> {
  return db.transaction().execute(fn);
}
