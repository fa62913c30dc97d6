// Counted limits of spec 8 keyed by something other than an organisation (an IP address, a client
// metadata document's host, a browser session): one row per counted attempt, counted and taken
// under an advisory lock on the bucket, so two replicas cannot both take the last place.
import type { Kysely } from "kysely";
import { deleteRowsBefore } from "../db/delete-batch.ts";
import type { Database } from "../db/schema.ts";
import { inAdvisoryLock } from "../db/transaction.ts";

export interface RateLimitRepo {
  /**
   * Takes one place in `bucket` if fewer than `limit` were taken since `since`; answers the oldest
   * counted attempt when full (the window reopens when it leaves), else undefined.
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

export function createRateLimitRepo(db: Kysely<Database>): RateLimitRepo {
  return {
    async findFullness(bucket, limit, since) {
      const row = await db
        .selectFrom("rate_limit_hits")
        .select((eb) => [eb.fn.countAll<string>().as("n"), eb.fn.min("at").as("oldest")])
        .where("bucket", "=", bucket)
        .where("at", ">", since)
        .executeTakeFirstOrThrow();
      if (Number(row.n) >= limit) return { full: true as const, oldest: new Date(row.oldest as Date) };
      return { full: false as const };
    },
    takePlace: (bucket, limit, since, now) =>
      inAdvisoryLock(db, `rate:${bucket}`, async (trx) => {
        const row = await trx
          .selectFrom("rate_limit_hits")
          .select((eb) => [eb.fn.countAll<string>().as("n"), eb.fn.min("at").as("oldest")])
          .where("bucket", "=", bucket)
          .where("at", ">", since)
          .executeTakeFirstOrThrow();
        if (Number(row.n) >= limit) return { full: true as const, oldest: new Date(row.oldest as Date) };
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
