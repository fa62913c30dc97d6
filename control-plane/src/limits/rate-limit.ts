// The per-IP, per-host and per-browser limits of spec 8 (OAuth registration, device code attempts,
// client metadata document fetches). A full window is 429 `rate_limited` with retry_after seconds.
import { AppError } from "@latch/shared/errors";
import { addressKey } from "./address-key.ts";
import type { RateLimitRepo } from "./rate-limit.repo.ts";

export interface RateLimit {
  /** The bucket's family, e.g. "oauth_register:ip". */
  name: string;
  limit: number;
  windowMs: number;
  /** What the sentence says is limited, e.g. "client registrations from one address". */
  what: string;
}

/**
 * No limit counts further back than this (every RateLimit's `windowMs`, here and in auth/, sso/ and
 * policies/, is an hour at most; the limiter refuses a longer one): the table-wide prune of
 * counted attempts (prune-rounds.ts) keeps rows this long, and a day more for replica clocks.
 */
export const LONGEST_WINDOW_MS = 3_600_000;

export const OAUTH_REGISTER_PER_IP: RateLimit = {
  name: "oauth_register:ip",
  limit: 20,
  windowMs: 3_600_000,
  what: "client registrations from one address",
};
export const DEVICE_ATTEMPTS_PER_IP: RateLimit = {
  name: "device_code:ip",
  limit: 10,
  windowMs: 15 * 60_000,
  what: "device code attempts from one address",
};
export const DEVICE_ATTEMPTS_PER_BROWSER: RateLimit = {
  name: "device_code:browser",
  limit: 10,
  windowMs: 15 * 60_000,
  what: "device code attempts from one browser",
};
/**
 * A code one browser typed, counted as an attempt, for as long as attempts are counted: answering
 * its confirmation (confirm or abort) is not another attempt. Any other code is.
 */
export const DEVICE_CODE_TYPED: RateLimit = {
  name: "device_code:typed",
  limit: 1,
  windowMs: DEVICE_ATTEMPTS_PER_BROWSER.windowMs,
  what: "typings of one device code",
};
export const CIMD_FETCHES_PER_HOST: RateLimit = {
  name: "cimd:host",
  limit: 30,
  windowMs: 3_600_000,
  what: "client metadata document fetches from one host",
};
export const CIMD_FETCHES_PER_IP: RateLimit = {
  name: "cimd:ip",
  limit: 10,
  windowMs: 3_600_000,
  what: "client metadata document fetches asked for by one address",
};

/** The bucket of `key` under `limit`, whose window the prune must never cut into. */
function bucketOf(limit: RateLimit, key: string): string {
  if (limit.windowMs > LONGEST_WINDOW_MS) {
    throw new Error(`the window of ${limit.name} is longer than LONGEST_WINDOW_MS, which the prune keeps`);
  }
  return `${limit.name}:${key}`;
}

export function createRateLimiter(repo: RateLimitRepo, now: () => Date) {
  const limiter = {
    /**
     * Takes a place for the caller at `address` (as Fastify judged it, TRUST_PROXY included) under
     * `limit`: one key per caller however the address is spelled (address-key.ts).
     */
    takeForAddress(limit: RateLimit, address: string): Promise<void> {
      return limiter.take(limit, addressKey(address));
    },
    /** Takes a place for `key` under `limit`, or throws 429 with the seconds until one frees up. */
    async take(limit: RateLimit, key: string): Promise<void> {
      const at = now();
      const result = await repo.takePlace(
        bucketOf(limit, key),
        limit.limit,
        new Date(at.getTime() - limit.windowMs),
        at,
      );
      refuseWhenFull(limit, result, at);
    },
    /** Whether `key` holds a place under `limit` now (a mark, for a limit of 1), taking none. */
    async holds(limit: RateLimit, key: string): Promise<boolean> {
      const at = now();
      const result = await repo.findFullness(
        bucketOf(limit, key),
        1,
        new Date(at.getTime() - limit.windowMs),
      );
      return result.full;
    },
    /** Throws the same 429 as `take` when `key` has no place left, without taking one. */
    async check(limit: RateLimit, key: string): Promise<void> {
      const at = now();
      const result = await repo.findFullness(
        bucketOf(limit, key),
        limit.limit,
        new Date(at.getTime() - limit.windowMs),
      );
      refuseWhenFull(limit, result, at);
    },
  };
  return limiter;
}

function refuseWhenFull(
  limit: RateLimit,
  result: { full: false } | { full: true; oldest: Date },
  at: Date,
): void {
  if (!result.full) return;
  const retryAfter = Math.max(1, Math.ceil((result.oldest.getTime() + limit.windowMs - at.getTime()) / 1000));
  const window =
    limit.windowMs === 60_000
      ? "minute"
      : limit.windowMs >= 3_600_000
        ? "hour"
        : `${limit.windowMs / 60_000} minutes`;
  throw new AppError("rate_limited", `too many ${limit.what}: at most ${limit.limit} per ${window}`, {
    extra: { retry_after: retryAfter },
  });
}

export type RateLimiter = ReturnType<typeof createRateLimiter>;
