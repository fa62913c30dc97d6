// The embedded database's files are owner-only: a fresh data dir, after writes that add relation
// files and WAL segments, and after a restart (which rewrites pg_internal.init).
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { newId } from "@latch/shared/ids";
import { sql } from "kysely";
import { afterAll, describe, expect, it } from "vitest";
import { openDatabase } from "./database.ts";

const dataDir = mkdtempSync(join(tmpdir(), "latch-pgdata-mode-"));
const pgdata = join(dataDir, "pgdata");

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** Every path under `dir` whose mode lets group or other in, as "0644 base/5/1249". */
function openToOthers(dir: string): string[] {
  const found: string[] = [];
  const walk = (current: string) => {
    const mode = statSync(current).mode & 0o777;
    if (mode & 0o077) found.push(`0${mode.toString(8)} ${relative(pgdata, current) || "."}`);
    if (statSync(current).isDirectory()) {
      for (const name of readdirSync(current)) walk(join(current, name));
    }
  };
  walk(dir);
  return found;
}

function walSegments(): string[] {
  return readdirSync(join(pgdata, "pg_wal")).filter((name) => /^[0-9A-F]{24}$/.test(name));
}

describe("PGlite data files", () => {
  it("are 0600 in 0700 directories, also after writes and a restart", { timeout: 120_000 }, async () => {
    const database = await openDatabase({ dataDir });
    expect(statSync(pgdata).mode & 0o777).toBe(0o700);
    expect(openToOthers(pgdata)).toEqual([]);

    // New relation files, a WAL switch and a checkpoint: files PostgreSQL creates while running.
    const segmentsBefore = walSegments();
    await sql`create table mode_probe (id text primary key, body text)`.execute(database.db);
    await sql`insert into mode_probe select g::text, repeat('x', 2000) from generate_series(1, 3000) g`.execute(
      database.db,
    );
    await database.db
      .insertInto("organisations")
      .values({ id: newId("org"), name: "mode" })
      .execute();
    await sql`select pg_switch_wal()`.execute(database.db);
    await sql`checkpoint`.execute(database.db);
    expect(walSegments()).not.toEqual(segmentsBefore);
    expect(openToOthers(pgdata)).toEqual([]);
    await database.close();
    expect(openToOthers(pgdata)).toEqual([]);

    const reopened = await openDatabase({ dataDir });
    await sql`insert into mode_probe values ('again', 'y')`.execute(reopened.db);
    expect(openToOthers(pgdata)).toEqual([]);
    await reopened.close();
  });
});
