// A counted limit's retry_after on the database (PGlite, or PostgreSQL with DATABASE_URL): when a
// limit was lowered over attempts already counted (a policy rule's rate_limit edited down), the
// answer names the time a place really reopens, not the time the oldest attempt leaves.

import { randomUUID } from "node:crypto";
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import { testDatabase } from "../../test/database.ts";
import { createRateLimitRepo } from "./rate-limit.repo.ts";
import { createRateLimiter, type RateLimit } from "./rate-limit.ts";

const HOUR = 3_600_000;
const MINUTE = 60_000;

/** The retry_after of a refusal, or undefined when `attempt` passes. */
async function retryAfterOf(attempt: Promise<void>): Promise<number | undefined> {
  try {
    await attempt;
    return undefined;
  } catch (error) {
    if (!(error instanceof AppError) || error.code !== "rate_limited") throw error;
    return Number(error.extra.retry_after);
  }
}

describe("a limit lowered over attempts already counted", () => {
  it("answers retry_after for when a place reopens, and a call then passes", async () => {
    const { db } = await testDatabase();
    let now = new Date("2026-11-20T10:00:00Z");
    const limiter = createRateLimiter(createRateLimitRepo(db), () => now);
    const key = randomUUID();
    const five: RateLimit = { name: "policy:test", limit: 5, windowMs: HOUR, what: "calls" };
    // Five calls, a minute apart, under a limit of five an hour.
    for (let i = 0; i < 5; i++) {
      await limiter.take(five, key);
      now = new Date(now.getTime() + MINUTE);
    }
    // The limit is lowered to two: the window holds five, so a place reopens only when the
    // fourth call (taken at 10:03) leaves, at 11:03.
    const two: RateLimit = { ...five, limit: 2 };
    const reopensAt = new Date("2026-11-20T11:03:00Z").getTime();
    const expected = Math.ceil((reopensAt - now.getTime()) / 1000);
    expect(await retryAfterOf(limiter.take(two, key))).toBe(expected);
    expect(await retryAfterOf(limiter.check(two, key))).toBe(expected);
    // Waiting as told, the call passes; a second earlier is still refused.
    now = new Date(reopensAt - 1000);
    expect(await retryAfterOf(limiter.take(two, key))).toBe(1);
    now = new Date(reopensAt + 1);
    expect(await retryAfterOf(limiter.take(two, key))).toBeUndefined();
  });

  it("answers the oldest attempt when the bucket holds exactly its limit", async () => {
    const { db } = await testDatabase();
    let now = new Date("2026-11-20T10:00:00Z");
    const limiter = createRateLimiter(createRateLimitRepo(db), () => now);
    const key = randomUUID();
    const three: RateLimit = { name: "policy:test", limit: 3, windowMs: MINUTE, what: "calls" };
    for (let i = 0; i < 3; i++) {
      await limiter.take(three, key);
      now = new Date(now.getTime() + 10_000);
    }
    // Taken at :00, :10, :20; now :30: the first leaves at 10:01:00.
    expect(await retryAfterOf(limiter.take(three, key))).toBe(30);
  });
});
