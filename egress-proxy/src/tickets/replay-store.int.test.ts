import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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

// In production the proxy's role holds its table's three privileges and nothing that reaches past
// other tables' grants (DECISIONS "Faults and isolation in deployments"): each such privilege,
// alone beside the three, refuses the start, named; outside production it is a warning.
describe.runIf(process.env.DATABASE_URL)("the PostgreSQL replay store's role in production", () => {
  const databaseUrl = process.env.DATABASE_URL ?? "";
  const prefix = `latch_egress_s${randomBytes(4).toString("hex")}`;
  const middleRole = `${prefix}_mid`;
  /** A role nobody logs in as, whose members are one SET ROLE from a superuser. */
  const superRole = `${prefix}_sup`;
  /** A group holding the attributes a member gains by SET ROLE (none inherits). */
  const attributeRole = `${prefix}_att`;
  /** One role per privilege refused: how it is made, and the words the refusal names it with. */
  const cases = [
    { name: "su", make: "SUPERUSER", grant: "", named: "SUPERUSER (reads every table and runs programs" },
    { name: "cr", make: "CREATEROLE", grant: "", named: "CREATEROLE (makes roles and grants them" },
    { name: "rp", make: "REPLICATION", grant: "", named: "REPLICATION (streams every table's rows)" },
    { name: "br", make: "BYPASSRLS", grant: "", named: "BYPASSRLS (reads past row-level security)" },
    ...[
      "pg_execute_server_program",
      "pg_read_server_files",
      "pg_write_server_files",
      "pg_read_all_data",
      "pg_write_all_data",
    ].map((server, i) => ({
      name: `m${i}`,
      make: "",
      grant: `GRANT ${server} TO %s`,
      named: `membership of ${server} (`,
    })),
    // A membership that does not inherit still lets the role SET ROLE to it.
    {
      name: "ni",
      make: "NOINHERIT",
      grant: "GRANT pg_execute_server_program TO %s",
      named: "membership of pg_execute_server_program (",
    },
    // Through another role it is a member of.
    {
      name: "in",
      make: "",
      grant: `GRANT ${middleRole} TO %s`,
      named: "membership of pg_read_server_files (",
    },
    // A superuser through a role it is a member of: rolsuper is false for it, and never inherited,
    // yet SET ROLE makes it a superuser.
    {
      name: "sg",
      make: "",
      grant: `GRANT ${superRole} TO %s`,
      named: `membership of the superuser role ${superRole} (SET ROLE makes it a superuser`,
    },
    {
      name: "ag",
      make: "NOINHERIT",
      grant: `GRANT ${attributeRole} TO %s`,
      named: `CREATEROLE (makes roles and grants them, to itself too) through membership of ${attributeRole}, REPLICATION (streams every table's rows) through membership of ${attributeRole}, BYPASSRLS (reads past row-level security) through membership of ${attributeRole}`,
    },
    {
      name: "cs",
      make: "",
      grant: "GRANT CREATE ON SCHEMA public TO %s",
      named: "CREATE on the schema public (",
    },
    {
      name: "cd",
      make: "",
      grant: "GRANT CREATE ON DATABASE %d TO %s",
      named: "CREATE on the database (makes schemas)",
    },
  ];
  const minimalRole = `${prefix}_min`;
  const roles = [minimalRole, ...cases.map((c) => `${prefix}_${c.name}`)];
  let admin: pg.Client;

  /** The URL of the same database as another role (the test servers trust loopback). */
  function asRole(role: string): string {
    const url = new URL(databaseUrl);
    url.username = role;
    url.password = "";
    return url.toString();
  }

  /** How a start in production with this role ends: "started" or the sentence it refused with. */
  async function verdict(role: string, isProduction = true, warn?: (s: string) => void): Promise<string> {
    try {
      const store = await createPostgresReplayStore(asRole(role), { isProduction, warn });
      await store.close();
      return "started";
    } catch (error) {
      return (error as Error).message;
    }
  }

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    const database = (await admin.query<{ name: string }>("SELECT quote_ident(current_database()) AS name"))
      .rows[0]!.name;
    await admin.query(`CREATE ROLE ${middleRole} NOLOGIN`);
    await admin.query(`CREATE ROLE ${superRole} NOLOGIN SUPERUSER`);
    await admin.query(`CREATE ROLE ${attributeRole} NOLOGIN CREATEROLE REPLICATION BYPASSRLS`);
    await admin.query(`GRANT pg_read_server_files TO ${middleRole}`);
    await admin.query(`CREATE ROLE ${minimalRole} LOGIN`);
    for (const c of cases) {
      const role = `${prefix}_${c.name}`;
      await admin.query(`CREATE ROLE ${role} LOGIN ${c.make}`);
      if (c.grant) await admin.query(c.grant.replace("%d", database).replace("%s", role));
    }
    for (const role of roles) {
      await admin.query(`GRANT SELECT, INSERT, DELETE ON egress_spent_tickets TO ${role}`);
    }
  });

  afterAll(async () => {
    for (const role of [...roles, middleRole, superRole, attributeRole]) {
      await admin.query(`DROP OWNED BY ${role}`).catch(() => {});
      await admin.query(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
    }
    await admin?.end();
  });

  it("starts with a role that holds its table's three privileges and nothing more", async () => {
    expect(await verdict(minimalRole)).toBe("started");
  });

  it("refuses a role with a privilege that reaches past the tables' grants, naming it", async () => {
    expect(await verdict(`${prefix}_m0`)).toBe(
      'EGRESS_REPLAY_DATABASE_URL: its role holds membership of pg_execute_server_program (runs programs on the database server), more than its rights on egress_spent_tickets; give the proxy a role that may only SELECT, INSERT and DELETE egress_spent_tickets (latch_egress, README "Deployment")',
    );
    for (const c of cases) {
      const refused = await verdict(`${prefix}_${c.name}`);
      expect(refused, c.name).toContain(`its role holds ${c.named}`);
      expect(refused, c.name).not.toContain("postgres://");
    }
  });

  it("refuses a role that can SET ROLE to a superuser, naming that role alone", async () => {
    expect(await verdict(`${prefix}_sg`)).toBe(
      `EGRESS_REPLAY_DATABASE_URL: its role holds membership of the superuser role ${superRole} (SET ROLE makes it a superuser, which reads every table and runs programs on the database server), more than its rights on egress_spent_tickets; give the proxy a role that may only SELECT, INSERT and DELETE egress_spent_tickets (latch_egress, README "Deployment")`,
    );
  });

  it("refuses a role that can SET ROLE to the database's owner, naming it", async () => {
    // A database of its own, owned by a role nobody logs in as; the table is the admin's (as a
    // proxy's migration-made table is the control plane's), and the role a member that does not
    // inherit: it holds no CREATE itself, yet SET ROLE makes it the database's owner.
    const database = `${prefix}_db`;
    const owner = `${prefix}_dbo`;
    const member = `${prefix}_dbm`;
    await admin.query(`CREATE ROLE ${owner} NOLOGIN`);
    await admin.query(`CREATE ROLE ${member} LOGIN NOINHERIT`);
    await admin.query(`GRANT ${owner} TO ${member}`);
    await admin.query(`CREATE DATABASE ${database} OWNER ${owner}`);
    const url = new URL(databaseUrl);
    url.pathname = `/${database}`;
    const inside = new pg.Client({ connectionString: url.toString() });
    await inside.connect();
    try {
      await inside.query("REVOKE ALL ON SCHEMA public FROM PUBLIC");
      await inside.query(
        `CREATE TABLE egress_spent_tickets (id text PRIMARY KEY, expires_at timestamptz NOT NULL)`,
      );
      await inside.query(`GRANT SELECT, INSERT, DELETE ON egress_spent_tickets TO ${member}`);
      await inside.query(`GRANT USAGE ON SCHEMA public TO ${member}`);
      url.username = member;
      url.password = "";
      let refused = "started";
      try {
        await (await createPostgresReplayStore(url.toString(), { isProduction: true })).close();
      } catch (error) {
        refused = (error as Error).message;
      }
      expect(refused).toContain(
        `membership of ${owner}, the database's owner (SET ROLE makes it the owner: makes schemas, and grants itself any right on the database)`,
      );
    } finally {
      await inside.end();
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => {});
      await admin.query(`DROP ROLE IF EXISTS ${member}`).catch(() => {});
      await admin.query(`DROP ROLE IF EXISTS ${owner}`).catch(() => {});
    }
  });

  it("only warns outside production", async () => {
    const warnings: string[] = [];
    expect(await verdict(`${prefix}_m0`, false, (s) => warnings.push(s))).toBe("started");
    expect(warnings).toEqual([
      expect.stringContaining("its role holds membership of pg_execute_server_program"),
    ]);
  });
});
