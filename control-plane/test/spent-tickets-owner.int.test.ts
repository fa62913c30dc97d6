// A spent-ticket table a proxy of an earlier release made itself belongs to the proxies' role
// (migration 2026-11-26T0100 keeps it: IF NOT EXISTS). The control plane cannot put its keep
// trigger on it (migration 2026-11-27T0100): its migrations still run to the end, and the recovery
// of abandoned calls then concludes nothing from that table (is_remembered is false), so those
// one-call approvals stay spent rather than be given back on a table that may have forgotten.
// On PostgreSQL only.
import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../src/db/database.ts";
import { createGrantsRepo } from "../src/grants/grants.repo.ts";

const databaseUrl = process.env.DATABASE_URL ?? "";

describe.runIf(databaseUrl)("a spent-ticket table the proxies' role made", () => {
  const name = `latch_owner_t${randomBytes(4).toString("hex")}`;
  const password = randomBytes(12).toString("hex");
  let admin: pg.Client;
  /** `DATABASE_URL` as `role` on the test's own database. */
  const asRole = (role: string) => {
    const url = new URL(databaseUrl);
    url.username = role;
    url.password = password;
    url.pathname = `/${name}`;
    return url.toString();
  };

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    await admin.query(`CREATE ROLE ${name} LOGIN NOSUPERUSER PASSWORD '${password}'`);
    await admin.query(`CREATE ROLE ${name}_egress LOGIN NOSUPERUSER PASSWORD '${password}'`);
    await admin.query(`CREATE DATABASE ${name} OWNER ${name}`);
    const onDatabase = new pg.Client({ connectionString: asRole(name) });
    await onDatabase.connect();
    await onDatabase.query(`GRANT CREATE ON SCHEMA public TO ${name}_egress`);
    await onDatabase.end();
    // The proxy of an earlier release: its own table, the control plane granted what it used.
    const proxy = new pg.Client({ connectionString: asRole(`${name}_egress`) });
    await proxy.connect();
    await proxy.query(
      "CREATE TABLE egress_spent_tickets (id text PRIMARY KEY, expires_at timestamptz NOT NULL)",
    );
    await proxy.query(`GRANT SELECT, INSERT, DELETE ON egress_spent_tickets TO ${name}`);
    await proxy.end();
  }, 60_000);

  afterAll(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
    await admin.query(`DROP ROLE IF EXISTS ${name}_egress`).catch(() => {});
    await admin.query(`DROP ROLE IF EXISTS ${name}`).catch(() => {});
    await admin?.end();
  });

  it("runs every migration, puts no trigger on it, and lets no abandoned call be concluded from it", async () => {
    const database = await openDatabase({ databaseUrl: asRole(name), dataDir: "" });
    try {
      const triggers = await sql<{ n: string }>`select count(*) as n from pg_catalog.pg_trigger
        where tgname = 'egress_spent_tickets_keep'`.execute(database.db);
      expect(Number(triggers.rows[0]!.n)).toBe(0);
      const at = new Date();
      await sql`insert into organisations (id, name) values ('org_owner', 'Owner')`.execute(database.db);
      await sql`insert into items (id, organisation_id, environment, name, kind, sealed_value, sealing_key_id,
          last4, allowed_hosts, inject)
        values ('itm_owner', 'org_owner', 'production', 'API_KEY', 'secret', '\\x00', 'sk', 'abcd',
          array['api.latch.test'], 'bearer')`.execute(database.db);
      await sql`insert into grants (id, organisation_id, environment, item_id, agent_id, tool_id, policy, status,
          created_at, call_ticket_id, call_ticket_expires_at, call_ticket_shared)
        values ('grt_owner', 'org_owner', 'production', 'itm_owner', 'cli_agent', 'http_request', 'prompt',
          'consumed', ${at}, 't-owner-0000000000', ${new Date(at.getTime() - 60_000)}, true)`.execute(
        database.db,
      );
      const unsettled = await createGrantsRepo(database.db).findUnsettledCalls(
        new Date(at.getTime() + 3_600_000),
        10,
      );
      const call = unsettled.find((row) => row.id === "grt_owner");
      expect(call).toBeDefined();
      expect(call!.is_remembered).toBe(false);
    } finally {
      await database.close();
    }
    // Handed over to the control plane's role, as README "Deployment" says: the next start puts
    // the trigger on, and the table speaks for abandoned calls again.
    const superuserHere = new URL(databaseUrl);
    superuserHere.pathname = `/${name}`;
    const handing = new pg.Client({ connectionString: superuserHere.toString() });
    await handing.connect();
    await handing.query(`ALTER TABLE egress_spent_tickets OWNER TO ${name}`);
    await handing.end();
    const again = await openDatabase({ databaseUrl: asRole(name), dataDir: "" });
    try {
      const triggers = await sql<{ n: string }>`select count(*) as n from pg_catalog.pg_trigger
        where tgname = 'egress_spent_tickets_keep'`.execute(again.db);
      expect(Number(triggers.rows[0]!.n)).toBe(1);
      const unsettled = await createGrantsRepo(again.db).findUnsettledCalls(
        new Date(Date.now() + 3_600_000),
        10,
      );
      expect(unsettled.find((row) => row.id === "grt_owner")?.is_remembered).toBe(true);
    } finally {
      await again.close();
    }
  }, 120_000);
});
