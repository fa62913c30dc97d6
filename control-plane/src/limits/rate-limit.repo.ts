// Counted limits of spec 8 keyed by something other than an organisation (an IP address, a client
// metadata document's host, a browser session): one row per counted attempt, counted and taken
// under an advisory lock on the bucket, so two replicas cannot both take the last place.
import type { Kysely } from "kysely";
import { deleteRowsBefore } from "../db/delete-batch.ts";
import type { Database } from "../db/schema.ts";
import { inAdvisoryLock } from "../db/transaction.ts";

export interface RateLimitRepo {
  /**
   * Takes one place in `bucket` if fewer than `limit` were taken since `since`; when full, answers
   * the counted attempt whose leaving the window reopens a place (`findFullnessIn`).
   */
  takePlace(
    bucket: string,
    limit: number,
    since: Date,
    now: Date,
  ): Promise<{ full: false } | { full: true; oldest: Date }>;
  /** The same answer without taking a place (a dry run asks whether a call would pass). */
  findFullness(
    bucket: string,
    limit: number,
    since: Date,
  ): Promise<{ full: false } | { full: true; oldest: Date }>;
  /**
   * Deletes at most `limit` counted attempts of any bucket taken before `before`; answers how many
   * went. Rows another transaction holds are skipped (the next round takes them).
   */
  deleteHitsBefore(before: Date, limit: number): Promise<number>;
}

/**
 * How full `bucket` is under `limit`: when full, the counted attempt whose leaving the window
 * reopens a place. That is the oldest only while the bucket holds `limit` attempts exactly: a limit
 * lowered since (a policy rule's `rate_limit` edited down, or its window shortened) leaves more in
 * the window, and a place reopens only when all but `limit - 1` of them are gone, so `retry_after`
 * names that time and an agent that waits for it is not refused again and again.
 */
async function findFullnessIn(
  db: Kysely<Database>,
  bucket: string,
  limit: number,
  since: Date,
): Promise<{ full: false } | { full: true; oldest: Date }> {
  const row = await db
    .selectFrom("rate_limit_hits")
    .select((eb) => eb.fn.countAll<string>().as("n"))
    .where("bucket", "=", bucket)
    .where("at", ">", since)
    .executeTakeFirstOrThrow();
  const count = Number(row.n);
  if (count < limit) return { full: false as const };
  const reopening = await db
    .selectFrom("rate_limit_hits")
    .select("at")
    .where("bucket", "=", bucket)
    .where("at", ">", since)
    .orderBy("at")
    .orderBy("id")
    .offset(count - limit)
    .limit(1)
    .executeTakeFirstOrThrow();
  return { full: true as const, oldest: new Date(reopening.at) };
}

export function createRateLimitRepo(db: Kysely<Database>): RateLimitRepo {
  return {
    findFullness: (bucket, limit, since) => findFullnessIn(db, bucket, limit, since),
    takePlace: (bucket, limit, since, now) =>
      inAdvisoryLock(db, `rate:${bucket}`, async (trx) => {
        const fullness = await findFullnessIn(trx, bucket, limit, since);
        if (fullness.full) return fullness;
        await trx.insertInto("rate_limit_hits").values({ bucket, at: now }).execute();
        // Rows older than a day count for nothing: the longest window is an hour.
        await trx
          .deleteFrom("rate_limit_hits")
          .where("bucket", "=", bucket)
          .where("at", "<", new Date(now.getTime() - 86_400_000))
          .execute();
        return { full: false as const };
      }),
    // takePlace above prunes only the bucket it counts in; a bucket never used again (a device
    // code typed once, a host or an IPv6 /64 an attacker picks) is only ever pruned here.
    deleteHitsBefore: (before, limit) => deleteRowsBefore(db, "rate_limit_hits", before, limit),
  };
}
