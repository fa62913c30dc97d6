// One bounded DELETE of the rows a prune no longer needs, for the tables whose rows are an `id` and
// an `at`: at most `limit` rows from before `before`, skipping rows another transaction holds (two
// replicas prune side by side). Answers how many went; the caller repeats while a batch is full.
import { type Kysely, sql } from "kysely";
import type { Database } from "./schema.ts";

export async function deleteRowsBefore(
  db: Kysely<Database>,
  table: "rate_limit_hits" | "approval_code_failures",
  before: Date,
  limit: number,
): Promise<number> {
  const result = await sql`
    delete from ${sql.table(table)} where id in (
      select id from ${sql.table(table)} where at < ${before} limit ${limit} for update skip locked
    )`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}
