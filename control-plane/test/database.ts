// The test database: PostgreSQL when DATABASE_URL is set, else one PGlite per test worker copied
// from the migrated template. Each test makes its own organisation, so order never matters.
import { cpSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { newId } from "@latch/shared/ids";
import { sql } from "kysely";
import { inject } from "vitest";
import { type OpenDatabase, openDatabase } from "../src/db/database.ts";

let shared: Promise<OpenDatabase> | undefined;

/** The worker's database, opened on first use and left open until the worker exits. */
export function testDatabase(): Promise<OpenDatabase> {
  shared ??= openTestDatabase();
  return shared;
}

async function openTestDatabase(): Promise<OpenDatabase> {
  const databaseUrl = process.env.DATABASE_URL;
  if (databaseUrl) return openDatabase({ databaseUrl, dataDir: tmpdir(), migrate: false });
  const dir = mkdtempSync(join(tmpdir(), "latch-pglite-"));
  cpSync(inject("pgliteTemplate"), join(dir, "pgdata"), { recursive: true });
  const pglite = new PGlite(join(dir, "pgdata"));
  // Leak tests search the database's files on disk.
  process.env.LATCH_TEST_PGDATA = join(dir, "pgdata");
  return openDatabase({ dataDir: dir, pglite, migrate: false });
}

/** A fresh organisation for one test. */
export async function newTestOrganisation(database: OpenDatabase, name = "Test org"): Promise<string> {
  const id = newId("org");
  await database.db.insertInto("organisations").values({ id, name }).execute();
  return id;
}

/** A credential row written straight to the database (a staging bearer secret unless told otherwise). */
export async function newTestItem(
  database: OpenDatabase,
  organisationId: string,
  fields: { name: string; hosts?: string[]; sealed?: Uint8Array; keyId?: string; folderId?: string | null },
): Promise<string> {
  const id = newId("itm");
  await database.db
    .insertInto("items")
    .values({
      id,
      organisation_id: organisationId,
      environment: "staging",
      name: fields.name,
      kind: "secret",
      sealed_value: fields.sealed ?? Buffer.from(`sealed ${fields.name}`),
      sealing_key_id: fields.keyId ?? "sk_test",
      last4: "",
      allowed_hosts: fields.hosts ?? ["api.latch.test"],
      inject: "bearer",
      username: null,
      folder_id: fields.folderId ?? null,
    })
    .execute();
  return id;
}

export function isPostgresRun(): boolean {
  return Boolean(process.env.DATABASE_URL);
}

let refusals = 0;

/**
 * Makes the database refuse (raise) every audit row of `action` in `organisationId` until the
 * returned function is called: a real failure of the audit append, at the last statement of the
 * work it records, for the tests that prove the work and its row commit together.
 *
 * @example
 * const restore = await refuseAuditRows(h.plane.database, orgId, "member_role_changed");
 * try { ... } finally { await restore(); }
 */
export async function refuseAuditRows(
  database: OpenDatabase,
  organisationId: string,
  action: string,
): Promise<() => Promise<void>> {
  const name = `test_refuse_audit_${process.pid}_${++refusals}`;
  const quoted = (text: string) => `'${text.replaceAll("'", "''")}'`;
  await sql
    .raw(
      `create function ${name}() returns trigger language plpgsql as $$
       begin
         if new.organisation_id = ${quoted(organisationId)} and new.action = ${quoted(action)} then
           raise exception 'the test refuses this audit row';
         end if;
         return new;
       end $$`,
    )
    .execute(database.db);
  await sql
    .raw(`create trigger ${name} before insert on audit_events for each row execute function ${name}()`)
    .execute(database.db);
  return async () => {
    await sql.raw(`drop trigger if exists ${name} on audit_events`).execute(database.db);
    await sql.raw(`drop function if exists ${name}()`).execute(database.db);
  };
}
