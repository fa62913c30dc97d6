// The checkpoint schedule (DECISIONS "Ledger": signed hourly): a first round soon after start, so a
// process that lives less than an hour still signs, and a round that left ledgers unsigned because
// they do not grow from their last checkpoint is an error in the log, not a quiet debug line.
import { describe, expect, it } from "vitest";
import { AuditKeysUnreadableError } from "./audit-keys.ts";
import { startCheckpointSchedule } from "./ledger.service.ts";

describe("the checkpoint schedule", () => {
  it("signs a first round soon after start, then hourly, and logs a round that refused a ledger", async () => {
    let rounds = 0;
    const errors: unknown[][] = [];
    const stop = startCheckpointSchedule(
      {
        checkpointAll: async () => {
          rounds++;
          return { signed: 2, refused: 1 };
        },
      },
      { error: (...args: unknown[]) => errors.push(args), debug: () => undefined } as never,
      60 * 60_000,
      20,
    );
    await expect.poll(() => rounds, { timeout: 2000 }).toBe(1);
    await expect.poll(() => errors.length).toBe(1);
    expect(errors[0]).toEqual([
      { code: "ledger_broken", refused: 1 },
      expect.stringContaining("were not signed"),
    ]);
    stop();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(rounds).toBe(1);
  });

  it("logs a round skipped because the key file cannot be read, naming the file and the cause", async () => {
    const errors: unknown[][] = [];
    const stop = startCheckpointSchedule(
      {
        checkpointAll: async () => {
          throw new AuditKeysUnreadableError("/keys/signing-keys.json", "open failed: EACCES");
        },
      },
      { error: (...args: unknown[]) => errors.push(args), debug: () => undefined } as never,
      60 * 60_000,
      20,
    );
    await expect.poll(() => errors.length, { timeout: 2000 }).toBe(1);
    stop();
    expect(errors[0]).toEqual([
      { code: "audit_keys_unreadable", file: "/keys/signing-keys.json", cause: "open failed: EACCES" },
      expect.stringMatching(/audit checkpoints not signed: .*\/keys\/signing-keys\.json.*EACCES/),
    ]);
  });
});
