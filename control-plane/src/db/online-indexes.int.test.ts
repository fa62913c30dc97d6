// The indexes built while serving (online-indexes.ts): built when missing, built again when a killed
// build left one invalid, skipped by a replica while another builds; plainly on PGlite.
import { sql } from "kysely";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { isPostgresRun, testDatabase } from "../../test/database.ts";
import { buildOnlineIndexes, ONLINE_INDEXES } from "./online-indexes.ts";

async function validity(db: Awaited<ReturnType<typeof testDatabase>>["db"]) {
  const rows = await sql<{ name: string; valid: boolean }>`
    select c.relname as name, i.indisvalid as valid from pg_catalog.pg_index i
    join pg_catalog.pg_class c on c.oid = i.indexrelid
    where c.relname in (${sql.join(ONLINE_INDEXES.map((index) => index.name))})
    order by c.relname`.execute(db);
  return Object.fromEntries(rows.rows.map((row) => [row.name, row.valid]));
}

const allValid = Object.fromEntries(
  ONLINE_INDEXES.map((index) => [index.name, true]).sort(([a], [b]) => String(a).localeCompare(String(b))),
);

describe("indexes built while serving", () => {
  it("exist once a start has looked", async () => {
    const { db } = await testDatabase();
    await buildOnlineIndexes(db, isPostgresRun());
    expect(await validity(db)).toEqual(allValid);
  });

  it.runIf(isPostgresRun())(
    "are built again when a killed build left one invalid, by one replica at a time",
    async () => {
      const { db } = await testDatabase();
      await buildOnlineIndexes(db, true);
      // What a replica killed during CREATE INDEX CONCURRENTLY leaves: the index, marked invalid.
      await sql`update pg_catalog.pg_index set indisvalid = false
      where indexrelid = to_regclass('need_requests_pending')`.execute(db);
      // Another replica is building: this one leaves it to that one.
      const other = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await other.connect();
      try {
        await other.query("select pg_advisory_lock(hashtextextended('latch:online-indexes', 0))");
        expect(await buildOnlineIndexes(db, true)).toEqual([]);
        await other.query("select pg_advisory_unlock(hashtextextended('latch:online-indexes', 0))");
      } finally {
        await other.end();
      }
      expect(await buildOnlineIndexes(db, true)).toEqual(["need_requests_pending"]);
      expect(await validity(db)).toEqual(allValid);
    },
  );
});
