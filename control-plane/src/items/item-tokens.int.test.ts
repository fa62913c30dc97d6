// The item token lock (item-tokens.repo.ts): calls of one connected item take turns, and a call
// waiting its turn holds no database connection, so that calls on one item cannot take a replica's
// whole pool from every other call. On PostgreSQL only (PGlite has one connection anyway).
import { sql } from "kysely";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { isPostgresRun } from "../../test/database.ts";
import { openDatabase } from "../db/database.ts";
import { createItemTokensRepo } from "./item-tokens.repo.ts";

describe.runIf(isPostgresRun())("the item token lock", () => {
  it("keeps waiting calls off the pool, and lets each in, one at a time, once it is free", async () => {
    const database = await openDatabase({ databaseUrl: process.env.DATABASE_URL!, dataDir: "" });
    const holder = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await holder.connect();
    try {
      const itemId = `itm_lock_${Date.now()}`;
      // Another replica's call holds the lock, as an exchange does for the whole of its call.
      await holder.query("begin");
      await holder.query("select pg_advisory_xact_lock(hashtextextended($1, 0))", [`item-token:${itemId}`]);
      let inside = 0;
      let mostInside = 0;
      const repo = createItemTokensRepo(database.db);
      // More waiting calls than the pool has connections (10).
      const waiting = Array.from({ length: 12 }, () =>
        repo.inItemTokenLock(itemId, async () => {
          inside += 1;
          mostInside = Math.max(mostInside, inside);
          await new Promise((resolve) => setTimeout(resolve, 20));
          inside -= 1;
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Everyone else's statements still get a connection at once.
      const answered = sql`select 1`.execute(database.db).then(() => "answered");
      const waited = new Promise((resolve) => setTimeout(() => resolve("no connection"), 5_000));
      expect(await Promise.race([answered, waited])).toBe("answered");
      expect(mostInside).toBe(0);
      await holder.query("commit");
      await Promise.all(waiting);
      expect(mostInside).toBe(1);
    } finally {
      await holder.end();
      await database.close();
    }
  }, 60_000);
});
