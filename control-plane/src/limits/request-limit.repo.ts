// The rows spec 8's request limit counts (requested grants and collect requests) and the
// per-organisation advisory lock the count is taken under, so two replicas cannot both take the
// 30th place. Read-only over grants and need_requests; their own repos write them.
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import { inAdvisoryLock } from "../db/transaction.ts";

export interface RequestUsage {
  count: number;
  /** The oldest counted request, or null when none is counted. */
  oldest: Date | null;
}

/** Runs `fn` in one transaction holding the organisation's request lock. */
export function withOrganisationRequestLock<T>(
  db: Kysely<Database>,
  organisationId: string,
  fn: (trx: Kysely<Database>) => Promise<T>,
): Promise<T> {
  return inAdvisoryLock(db, `requests:${organisationId}`, fn);
}

/** Approval and collect requests made since `since`. Call under the lock, on its transaction. */
export async function findRequestUsageSince(
  trx: Kysely<Database>,
  organisationId: string,
  since: Date,
): Promise<RequestUsage> {
  const grants = await trx
    .selectFrom("grants")
    .select((eb) => [eb.fn.countAll<string>().as("n"), eb.fn.min("created_at").as("oldest")])
    .where("organisation_id", "=", organisationId)
    .where("created_at", ">", since)
    .where("requested", "=", true)
    .executeTakeFirstOrThrow();
  const needs = await trx
    .selectFrom("need_requests")
    .select((eb) => [eb.fn.countAll<string>().as("n"), eb.fn.min("created_at").as("oldest")])
    .where("organisation_id", "=", organisationId)
    .where("created_at", ">", since)
    .executeTakeFirstOrThrow();
  const oldest = [grants.oldest, needs.oldest]
    .filter((d): d is Date => d instanceof Date)
    .reduce<Date | null>((a, b) => (a === null || b < a ? b : a), null);
  return { count: Number(grants.n) + Number(needs.n), oldest };
}
