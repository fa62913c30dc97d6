// The control plane's own database role holds no more than it needs (the guide's least privilege):
// in production it refuses to start as a superuser, or as a role that can reach the server's files
// or programs, make roles, bypass row security, replicate or read every database, in one sentence
// that never names the URL (a role it can SET ROLE to counts as its own: a member of a superuser
// role is refused as surely as the superuser); a
// role that only owns its database runs every migration and starts. On PostgreSQL only; the
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
let proxy: ProductionProxy;

/** Starts main.ts in production on `url`; resolves with how it ended (or that it came up) and what it said. */
function startInProduction(url: string) {
  return startControlPlaneInProduction({
    DATABASE_URL: url,
    EGRESS_URL: proxy.address,
    TICKET_SIGNING_KEY_FILE: proxy.ticketKeyFile,
  });
}

describe.runIf(databaseUrl)("the control plane's database role", () => {
  const role = `latch_control_t${randomBytes(4).toString("hex")}`;
  const password = randomBytes(12).toString("hex");
  let admin: pg.Client;

  beforeAll(async () => {
    proxy = await startProductionProxy();
    admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    await admin.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER PASSWORD '${password}'`);
    await admin.query(`CREATE DATABASE ${role} OWNER ${role}`);
    // A role that owns its database and can also read the server's files and make roles.
    await admin.query(`CREATE ROLE ${role}_x LOGIN NOSUPERUSER CREATEROLE PASSWORD '${password}'`);
    await admin.query(`GRANT pg_read_server_files TO ${role}_x`);
    await admin.query(`CREATE DATABASE ${role}_x OWNER ${role}_x`);
    // A role with no attribute of its own that may SET ROLE to a superuser (superuser is never
    // inherited: rolsuper is false for it, yet one SET ROLE makes it a superuser).
    await admin.query(`CREATE ROLE ${role}_su NOLOGIN SUPERUSER`);
    await admin.query(`CREATE ROLE ${role}_m LOGIN NOSUPERUSER PASSWORD '${password}'`);
    await admin.query(`GRANT ${role}_su TO ${role}_m`);
    await admin.query(`CREATE DATABASE ${role}_m OWNER ${role}_m`);
    // One that reads every database of the server, and replicates through a group it belongs to.
    await admin.query(`CREATE ROLE ${role}_g NOLOGIN REPLICATION`);
    await admin.query(`CREATE ROLE ${role}_r LOGIN NOSUPERUSER PASSWORD '${password}'`);
    await admin.query(`GRANT ${role}_g, pg_read_all_data TO ${role}_r`);
    await admin.query(`CREATE DATABASE ${role}_r OWNER ${role}_r`);
  }, 60_000);

  afterAll(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${role} WITH (FORCE)`).catch(() => {});
    await admin.query(`DROP DATABASE IF EXISTS ${role}_x WITH (FORCE)`).catch(() => {});
    await admin.query(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
    await admin.query(`DROP ROLE IF EXISTS ${role}_x`).catch(() => {});
    for (const suffix of ["_m", "_r"]) {
      await admin.query(`DROP DATABASE IF EXISTS ${role}${suffix} WITH (FORCE)`).catch(() => {});
      await admin.query(`DROP ROLE IF EXISTS ${role}${suffix}`).catch(() => {});
    }
    await admin.query(`DROP ROLE IF EXISTS ${role}_su`).catch(() => {});
    await admin.query(`DROP ROLE IF EXISTS ${role}_g`).catch(() => {});
    await admin?.end();
    await proxy?.stop();
  });

  it("refuses, in production, to start as a superuser, in one sentence without the URL", async () => {
    const refused = await startInProduction(databaseUrl);
    expect(refused.outcome).toBe(1);
    expect(refused.stderr.trim()).toBe(
      'Latch cannot start: DATABASE_URL connects as a superuser, which can run programs on the database server and turn the audit ledger\'s guards off; give the control plane a role that owns the latch database and nothing more (README "Deployment").',
    );
    expect(refused.stderr).not.toContain(new URL(databaseUrl).host);
  }, 120_000);

  /** DATABASE_URL as `name`, on the database of the same name. */
  function asRole(name: string): string {
    const url = new URL(databaseUrl);
    url.username = name;
    url.password = password;
    url.pathname = `/${name}`;
    return url.toString();
  }

  it("refuses, in production, a role that reads the server's files or makes roles, naming both", async () => {
    const refused = await startInProduction(asRole(`${role}_x`));
    expect(refused.outcome).toBe(1);
    expect(refused.stderr.trim()).toBe(
      'Latch cannot start: DATABASE_URL connects as a role with membership of pg_read_server_files (reads any file on the database server), CREATEROLE (makes roles and grants them); give the control plane a role that owns the latch database and nothing more (README "Deployment").',
    );
    expect(refused.stderr).not.toContain(password);
  }, 120_000);

  it("refuses, in production, a role that can SET ROLE to a superuser, naming that role", async () => {
    const refused = await startInProduction(asRole(`${role}_m`));
    expect(refused.outcome, refused.stdout).toBe(1);
    expect(refused.stderr.trim(), refused.stdout).toBe(
      `Latch cannot start: DATABASE_URL connects as a role with membership of the superuser role ${role}_su (SET ROLE makes it a superuser); give the control plane a role that owns the latch database and nothing more (README "Deployment").`,
    );
    expect(refused.stderr).not.toContain(password);
  }, 120_000);

  it("refuses, in production, a role that reads every database or replicates through a group", async () => {
    const refused = await startInProduction(asRole(`${role}_r`));
    expect(refused.outcome).toBe(1);
    expect(refused.stderr.trim()).toBe(
      `Latch cannot start: DATABASE_URL connects as a role with membership of pg_read_all_data (reads every table of every database on the server), REPLICATION (streams every database's rows) through membership of ${role}_g; give the control plane a role that owns the latch database and nothing more (README "Deployment").`,
    );
  }, 120_000);

  it("starts in production as a role that only owns its database, migrations and all", async () => {
    const started = await startInProduction(asRole(role));
    expect(started.outcome, started.stderr).toBe("ready");
    expect(started.stderr).not.toContain("superuser");
  }, 120_000);
});
