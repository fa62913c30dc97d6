// Spec 8: new approval requests plus new collect requests, 30 per hour per organisation, across
// every replica. Counted from the rows themselves inside a transaction that holds the
// organisation's advisory lock, so two replicas cannot both take the 30th place.
import { AppError } from "@latch/shared/errors";
import { type Kysely, sql } from "kysely";
import type { Database } from "../db/schema.ts";

export const MAX_REQUESTS_PER_HOUR = 30;
const HOUR_MS = 60 * 60 * 1000;

export const RATE_LIMIT_GUIDANCE =
  "Tell the operator that Latch's approval limit for this organisation is reached, and stop retrying for the hour; repeated request_grant calls for one credential do not help.";

/** Runs `fn` in one transaction holding the organisation's request lock. */
export function withOrganisationLock<T>(
  db: Kysely<Database>,
  organisationId: string,
  fn: (trx: Kysely<Database>) => Promise<T>,
): Promise<T> {
  return db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(hashtextextended(${`requests:${organisationId}`}, 0))`.execute(
      trx,
    );
    return fn(trx);
  });
}

/** Throws 429 when the organisation already made 30 requests in the last hour. Call under the lock. */
export async function checkRequestLimit(
  trx: Kysely<Database>,
  organisationId: string,
  now: Date,
): Promise<void> {
  const since = new Date(now.getTime() - HOUR_MS);
  // Hosted approval requests always carry a code, so coded grants are exactly the requests.
  const grants = await trx
    .selectFrom("grants")
    .select((eb) => [eb.fn.countAll<string>().as("n"), eb.fn.min("created_at").as("oldest")])
    .where("organisation_id", "=", organisationId)
    .where("created_at", ">", since)
    .where("approval_code_expires_at", "is not", null)
    .executeTakeFirstOrThrow();
  const needs = await trx
    .selectFrom("need_requests")
    .select((eb) => [eb.fn.countAll<string>().as("n"), eb.fn.min("created_at").as("oldest")])
    .where("organisation_id", "=", organisationId)
    .where("created_at", ">", since)
    .executeTakeFirstOrThrow();
  const count = Number(grants.n) + Number(needs.n);
  if (count < MAX_REQUESTS_PER_HOUR) return;
  const oldest = [grants.oldest, needs.oldest]
    .filter((d): d is Date => d instanceof Date)
    .reduce((a, b) => (a < b ? a : b), now);
  const retryAfter = Math.max(Math.ceil((oldest.getTime() + HOUR_MS - now.getTime()) / 1000), 1);
  throw new AppError(
    "rate_limited",
    "30 approval and collect requests per hour for this organisation; try again later",
    {
      extra: { retry_after: retryAfter, for_model: RATE_LIMIT_GUIDANCE },
    },
  );
}
