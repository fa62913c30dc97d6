// The control plane judges its database role before it migrates: a production start refused for its
// role writes nothing, so no table is left owned by the role it refused (switching to the right
// role afterwards would find a database it owns and tables it does not). On PostgreSQL only; the
// control plane starts as production starts it, with a proxy of its own at EGRESS_URL.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ProductionProxy,
  startControlPlaneInProduction,
  startProductionProxy,
} from "./production-start.ts";

const databaseUrl = process.env.DATABASE_URL ?? "";

describe.runIf(databaseUrl)("the control plane's role check, before its migrations", () => {
  const prefix = `latch_premigrate_t${randomBytes(4).toString("hex")}`;
  const password = randomBytes(12).toString("hex");
  /** A fresh database the superuser starts on. */
  const superuserDatabase = `${prefix}_s`;
  /** A login role that owns its fresh database and can SET ROLE to a superuser role. */
  const member = `${prefix}_m`;
  const superRole = `${prefix}_su`;
  let proxy: ProductionProxy;
  let admin: pg.Client;

  /** `databaseUrl` on `database`, as `role` when one is given. */
  function urlOf(database: string, role?: string): string {
    const url = new URL(databaseUrl);
    url.pathname = `/${database}`;
    if (role) {
      url.username = role;
      url.password = password;
    }
    return url.toString();
  }

  /** What the database holds of its own: tables, sequences, views and functions outside pg_*. */
  async function objectsIn(database: string): Promise<{ relations: number; functions: number }> {
    const client = new pg.Client({ connectionString: urlOf(database) });
    await client.connect();
    try {
      const { rows } = await client.query<{ relations: number; functions: number }>(
        `SELECT (SELECT count(*)::int FROM pg_catalog.pg_class c
                   JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                  WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%') AS relations,
                (SELECT count(*)::int FROM pg_catalog.pg_proc p
                   JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
                  WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%') AS functions`,
      );
      return rows[0]!;
    } finally {
      await client.end();
    }
  }

  beforeAll(async () => {
    proxy = await startProductionProxy();
    admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${superuserDatabase}`);
    await admin.query(`CREATE ROLE ${superRole} NOLOGIN SUPERUSER`);
    await admin.query(`CREATE ROLE ${member} LOGIN NOSUPERUSER PASSWORD '${password}'`);
    await admin.query(`GRANT ${superRole} TO ${member}`);
    await admin.query(`CREATE DATABASE ${member} OWNER ${member}`);
  }, 60_000);

  afterAll(async () => {
    for (const database of [superuserDatabase, member]) {
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => {});
    }
    await admin.query(`DROP ROLE IF EXISTS ${member}`).catch(() => {});
    await admin.query(`DROP ROLE IF EXISTS ${superRole}`).catch(() => {});
    await admin?.end();
    await proxy?.stop();
  });

  function startInProduction(url: string) {
    return startControlPlaneInProduction({
      DATABASE_URL: url,
      EGRESS_URL: proxy.address,
      TICKET_SIGNING_KEY_FILE: proxy.ticketKeyFile,
    });
  }

  it("refuses a superuser and leaves its database empty: no table, no migration record", async () => {
    const refused = await startInProduction(urlOf(superuserDatabase));
    expect(refused.outcome, refused.stdout).toBe(1);
    expect(refused.stderr).toContain("DATABASE_URL connects as a superuser");
    expect(await objectsIn(superuserDatabase)).toEqual({ relations: 0, functions: 0 });
  }, 120_000);

  it("refuses a role that can SET ROLE to a superuser and leaves the database it owns empty", async () => {
    const refused = await startInProduction(urlOf(member, member));
    expect(refused.outcome, refused.stdout).toBe(1);
    expect(refused.stderr).toContain(`membership of the superuser role ${superRole}`);
    expect(refused.stderr).not.toContain(password);
    expect(await objectsIn(member)).toEqual({ relations: 0, functions: 0 });
  }, 120_000);
});
