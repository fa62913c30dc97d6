// The limiter refuses a window longer than the hourly prune keeps rows for (LONGEST_WINDOW_MS): such
// a limit would count attempts the prune has already deleted, and let a caller past it.
import { describe, expect, it } from "vitest";
import type { RateLimitRepo } from "./rate-limit.repo.ts";
import { createRateLimiter, LONGEST_WINDOW_MS, type RateLimit } from "./rate-limit.ts";

const untouched: RateLimitRepo = {
  takePlace: () => Promise.reject(new Error("the repo was asked")),
  findFullness: () => Promise.reject(new Error("the repo was asked")),
  deleteHitsBefore: () => Promise.reject(new Error("the repo was asked")),
};

describe("createRateLimiter", () => {
  it("refuses a window longer than the prune keeps, before counting anything", async () => {
    const daily: RateLimit = { name: "daily:ip", limit: 5, windowMs: LONGEST_WINDOW_MS + 1, what: "tries" };
    const limiter = createRateLimiter(untouched, () => new Date());
    for (const attempt of [limiter.take, limiter.check, limiter.holds]) {
      await expect(attempt(daily, "k")).rejects.toThrow("longer than LONGEST_WINDOW_MS");
    }
  });
});
