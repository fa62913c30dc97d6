// The timer of the background rounds (audit checkpoints, SSO domain re-check, abandoned calls).
import { expect, it } from "vitest";
import { startRounds } from "./rounds.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

it("never joins a round still running, logs a failed round by its code alone and goes on", async () => {
  let started = 0;
  let release: () => void = () => undefined;
  const errors: unknown[][] = [];
  const stop = startRounds({
    everyMs: 10,
    logger: { error: (...args: unknown[]) => errors.push(args) } as never,
    failure: "not swept",
    round: async () => {
      started++;
      if (started === 1) await new Promise<void>((resolve) => (release = resolve));
      if (started === 2) throw Object.assign(new Error("raw text with sk_live_x"), { code: "57P01" });
    },
  });
  await sleep(80);
  expect(started).toBe(1);
  release();
  await expect.poll(() => started).toBeGreaterThanOrEqual(3);
  expect(errors[0]).toEqual([{ code: "57P01" }, "not swept"]);
  expect(JSON.stringify(errors)).not.toContain("sk_live_x");
  stop();
  const after = started;
  await sleep(50);
  expect(started).toBe(after);
});

it("runs a first round after firstAfterMs, and none before everyMs without it", async () => {
  let early = 0;
  let late = 0;
  const logger = { error: () => undefined };
  const stopEarly = startRounds({
    everyMs: 60_000,
    firstAfterMs: 5,
    logger,
    failure: "x",
    round: async () => void early++,
  });
  const stopLate = startRounds({ everyMs: 60_000, logger, failure: "x", round: async () => void late++ });
  await expect.poll(() => early).toBe(1);
  await sleep(30);
  expect(late).toBe(0);
  stopEarly();
  stopLate();
});
