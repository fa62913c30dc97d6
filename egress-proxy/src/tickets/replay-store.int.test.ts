import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { createMemoryReplayStore, createPostgresReplayStore } from "./replay-store.ts";

describe("memory replay store", () => {
  it("spends an id once", async () => {
    const store = createMemoryReplayStore();
    expect(await store.spend("a".repeat(22), Date.now() + 1000)).toBe(true);
    expect(await store.spend("a".repeat(22), Date.now() + 1000)).toBe(false);
  });
});

// Two proxy replicas sharing one PostgreSQL: the ticket is spent exactly once between them.
describe.runIf(process.env.DATABASE_URL)("PostgreSQL replay store across replicas", () => {
  it("lets exactly one of two replicas spend a ticket presented to both at once", async () => {
    const url = process.env.DATABASE_URL!;
    const [a, b] = await Promise.all([
      createPostgresReplayStore(url, { isProduction: false }),
      createPostgresReplayStore(url, { isProduction: false }),
    ]);
    try {
      for (let i = 0; i < 20; i++) {
        const id = randomBytes(16).toString("base64url");
        const results = await Promise.all([
          a.spend(id, Date.now() + 60_000),
          b.spend(id, Date.now() + 60_000),
        ]);
        expect(results.filter(Boolean)).toHaveLength(1);
      }
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("fails a spend the table holds back within seconds, instead of waiting for it", async () => {
    const url = process.env.DATABASE_URL!;
    const store = await createPostgresReplayStore(url, { isProduction: false });
    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    try {
      // Another session holds the table: every insert waits behind it (a stalled database).
      await locker.query("BEGIN");
      await locker.query("LOCK TABLE egress_spent_tickets IN ACCESS EXCLUSIVE MODE");
      const started = Date.now();
      await expect(store.spend(randomBytes(16).toString("base64url"), Date.now() + 60_000)).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(4_000);
    } finally {
      await locker.query("ROLLBACK").catch(() => {});
      await locker.end();
      await store.close();
    }
  });
});
