// The egress tier holds only its own table (DECISIONS "Faults and isolation in deployments"): the
// control plane's migrations make egress_spent_tickets, the proxy runs no DDL, it serves calls with
// a role that may only SELECT, INSERT and DELETE that table, and in production it refuses to start
// with a role that can read anything else, naming a table it could read or the privilege that
// reaches past the tables' grants (a superuser, a server role), or a DATA_DIR where it can read the
// control plane's private keys. On PostgreSQL only.
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ReplayStore, Ticket } from "@latch/proto/egress";
import { EXIT_START_REFUSED } from "@latch/shared/process";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../src/db/database.ts";
import { createSpentTicketsRepo } from "../src/egress/spent-tickets.repo.ts";
import { loadOrCreateTicketKey, ticketKeyPaths } from "../src/egress/ticket-key.ts";
import { type EgressHarness, startEgressHarness } from "./egress-harness.ts";
import { proxyMtlsEnv, runUntilReady } from "./production-start.ts";

const PROXY_MAIN = new URL("../../egress-proxy/src/main.ts", import.meta.url).pathname;
const databaseUrl = process.env.DATABASE_URL ?? "";

/** The URL of the same database as another role (the test servers trust loopback). */
function asRole(role: string): string {
  const url = new URL(databaseUrl);
  url.username = role;
  url.password = "";
  return url.toString();
}

/**
 * Starts the proxy process; resolves with how it ended or that it came up, and what it said. The
 * ticket key is the control plane's, in a DATA_DIR of its own: the proxy is given its public half,
 * and its listener's mTLS files (production refuses a plaintext listener).
 */
function startProxyProcess(env: Record<string, string>) {
  const keys = mkdtempSync(join(tmpdir(), "latch-role-keys-"));
  loadOrCreateTicketKey(keys);
  return runUntilReady(
    PROXY_MAIN,
    {
      PATH: process.env.PATH,
      DATA_DIR: mkdtempSync(join(tmpdir(), "latch-role-")),
      EGRESS_LISTEN: "127.0.0.1:0",
      ...proxyMtlsEnv(),
      EGRESS_TICKET_PUBLIC_KEYS: readFileSync(ticketKeyPaths(keys).publicPath, "utf8").trim(),
      ...env,
    },
    "LATCH_EGRESS_READY",
    30_000,
  );
}

describe.runIf(databaseUrl)("the egress proxy's database role", () => {
  const role = `latch_egress_t${randomBytes(4).toString("hex")}`;
  const partialRole = `${role}_p`;
  const writerRole = `${role}_w`;
  const memberRole = `${role}_m`;
  const ownerRole = `${role}_o`;
  const readerRole = `${role}_r`;
  const programRole = `${role}_x`;
  let admin: pg.Client;
  let h: EgressHarness;

  beforeAll(async () => {
    // The table comes from the control plane's migrations (global-setup ran them).
    admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    for (const name of [role, partialRole, writerRole, readerRole, programRole]) {
      await admin.query(`CREATE ROLE ${name} LOGIN`);
    }
    // A member that does not inherit its owner role's rights can still SET ROLE to it.
    await admin.query(`CREATE ROLE ${memberRole} LOGIN NOINHERIT`);
    await admin.query(`CREATE ROLE ${ownerRole} NOLOGIN`);
    await admin.query(`CREATE TABLE ${ownerRole}_table (id int)`);
    await admin.query(`ALTER TABLE ${ownerRole}_table OWNER TO ${ownerRole}`);
    await admin.query(`GRANT ${ownerRole} TO ${memberRole}`);
    // README "Deployment": a role made after the migration is granted its three privileges by hand.
    for (const name of [role, writerRole, memberRole, readerRole, programRole]) {
      await admin.query(`GRANT SELECT, INSERT, DELETE ON egress_spent_tickets TO ${name}`);
    }
    await admin.query(`GRANT INSERT ON items TO ${writerRole}`);
    await admin.query(`GRANT SELECT ON items TO ${readerRole}`);
    // COPY ... FROM PROGRAM runs any command as the server, psql reading every table included.
    await admin.query(`GRANT pg_execute_server_program TO ${programRole}`);
    await admin.query(`GRANT SELECT, INSERT ON egress_spent_tickets TO ${partialRole}`);
    h = await startEgressHarness({ replayDatabaseUrl: asRole(role) });
  }, 60_000);

  afterAll(async () => {
    await h?.close();
    await admin.query(`DROP TABLE IF EXISTS ${ownerRole}_table`).catch(() => {});
    for (const name of [role, partialRole, writerRole, memberRole, ownerRole, readerRole, programRole]) {
      await admin.query(`DROP OWNED BY ${name}`).catch(() => {});
      await admin.query(`DROP ROLE IF EXISTS ${name}`).catch(() => {});
    }
    await admin?.end();
  });

  it("serves calls with the least-privilege role, and that role cannot read the items table", async () => {
    const signed = h.minter.mintCallTicket(await h.callSpec("sk_live_role_canary_55e1"));
    const response = await h.client.execute(signed, 10_000);
    expect(response.originStatus).toBe(200);
    await expect(h.client.execute(signed, 10_000)).rejects.toMatchObject({ code: "ticket_replayed" });
    expect(h.logs.text()).not.toContain("can read the table");

    const asEgress = new pg.Client({ connectionString: asRole(role) });
    await asEgress.connect();
    try {
      await expect(asEgress.query("SELECT 1 FROM items LIMIT 1")).rejects.toMatchObject({ code: "42501" });
      await expect(asEgress.query("SELECT 1 FROM grants LIMIT 1")).rejects.toMatchObject({ code: "42501" });
      await expect(asEgress.query("CREATE TABLE egress_scratch (id text)")).rejects.toMatchObject({
        code: "42501",
      });
    } finally {
      await asEgress.end();
    }
  });

  it("reports the control plane's own store, so a fence written there stops the ticket: nothing is sent", async () => {
    const db = await openDatabase({ databaseUrl, dataDir: mkdtempSync(join(tmpdir(), "latch-role-db-")) });
    try {
      const repo = createSpentTicketsRepo(db.db);
      const info = await h.client.getInfo();
      expect(info.replayStore).toBe(ReplayStore.REPLAY_STORE_SHARED);
      expect(info.replayStoreId).toMatch(/^store:/);
      expect(info.replayStoreId).toBe(await repo.findStoreId());

      const signed = h.minter.mintCallTicket(
        await h.callSpec("sk_live_role_canary_55e1", { path: "/v1/fenced" }),
      );
      const ticket = Ticket.decode(signed.payload);
      expect(await repo.insertFence(ticket.id, new Date(ticket.expiresAtMs + 5_000))).toBe(true);
      const before = h.origin.requests.length;
      await expect(h.client.execute(signed, 10_000)).rejects.toMatchObject({ code: "ticket_replayed" });
      expect(h.origin.requests.slice(before).filter((r) => r.url === "/v1/fenced")).toEqual([]);
      // A ticket the proxy ran cannot be fenced afterwards.
      const ran = h.minter.mintCallTicket(await h.callSpec("sk_live_role_canary_55e1"));
      await h.client.execute(ran, 10_000);
      const ranTicket = Ticket.decode(ran.payload);
      expect(await repo.insertFence(ranTicket.id, new Date(ranTicket.expiresAtMs + 5_000))).toBe(false);
    } finally {
      await db.close();
    }
  });

  it("refuses, in production, a role that can read more than its table, naming how", async () => {
    // The test database's role is a superuser: it reads every table, and is told so first.
    const refused = await startProxyProcess({
      NODE_ENV: "production",
      EGRESS_REPLAY_DATABASE_URL: databaseUrl,
    });
    expect(refused.outcome).toBe(EXIT_START_REFUSED);
    expect(refused.stderr.trim()).toBe(
      'Latch\'s egress proxy cannot start: EGRESS_REPLAY_DATABASE_URL: its role holds SUPERUSER (reads every table and runs programs on the database server), more than its rights on egress_spent_tickets; give the proxy a role that may only SELECT, INSERT and DELETE egress_spent_tickets (latch_egress, README "Deployment").',
    );
    // A role granted one other table is told which.
    const reader = await startProxyProcess({
      NODE_ENV: "production",
      EGRESS_REPLAY_DATABASE_URL: asRole(readerRole),
    });
    expect(reader.outcome).toBe(EXIT_START_REFUSED);
    expect(reader.stderr.trim()).toBe(
      'Latch\'s egress proxy cannot start: EGRESS_REPLAY_DATABASE_URL: its role can read the table public.items, not only egress_spent_tickets; give the proxy a role that may only SELECT, INSERT and DELETE egress_spent_tickets (latch_egress, README "Deployment").',
    );
    // The least-privilege role starts in production; the same superuser outside production only warns.
    expect(
      (await startProxyProcess({ NODE_ENV: "production", EGRESS_REPLAY_DATABASE_URL: asRole(role) })).outcome,
    ).toBe("ready");
    const warned = await startProxyProcess({ NODE_ENV: "test", EGRESS_REPLAY_DATABASE_URL: databaseUrl });
    expect(warned.outcome).toBe("ready");
    expect(warned.stdout).toContain("can read the table public.items");
  }, 60_000);

  it("refuses, in production, a role that can write another table or become another table's owner", async () => {
    const writer = await startProxyProcess({
      NODE_ENV: "production",
      EGRESS_REPLAY_DATABASE_URL: asRole(writerRole),
    });
    expect(writer.outcome).toBe(EXIT_START_REFUSED);
    expect(writer.stderr).toContain(
      "its role can write the table public.items, not only egress_spent_tickets",
    );
    const member = await startProxyProcess({
      NODE_ENV: "production",
      EGRESS_REPLAY_DATABASE_URL: asRole(memberRole),
    });
    expect(member.outcome).toBe(EXIT_START_REFUSED);
    expect(member.stderr).toContain(`its role can become the owner of the table public.${ownerRole}_table`);
  }, 60_000);

  it("refuses, in production, a role that may run programs on the database server, naming the privilege", async () => {
    const refused = await startProxyProcess({
      NODE_ENV: "production",
      EGRESS_REPLAY_DATABASE_URL: asRole(programRole),
    });
    expect(refused.outcome).toBe(EXIT_START_REFUSED);
    expect(refused.stderr.trim()).toBe(
      'Latch\'s egress proxy cannot start: EGRESS_REPLAY_DATABASE_URL: its role holds membership of pg_execute_server_program (runs programs on the database server), more than its rights on egress_spent_tickets; give the proxy a role that may only SELECT, INSERT and DELETE egress_spent_tickets (latch_egress, README "Deployment").',
    );
    const warned = await startProxyProcess({
      NODE_ENV: "test",
      EGRESS_REPLAY_DATABASE_URL: asRole(programRole),
    });
    expect(warned.outcome).toBe("ready");
    expect(warned.stdout).toContain("its role holds membership of pg_execute_server_program");
  }, 60_000);

  it("refuses, in production, a DATA_DIR shared with the control plane's private keys", async () => {
    const shared = mkdtempSync(join(tmpdir(), "latch-role-shared-"));
    loadOrCreateTicketKey(shared);
    const refused = await runUntilReady(
      PROXY_MAIN,
      {
        PATH: process.env.PATH,
        NODE_ENV: "production",
        DATA_DIR: shared,
        EGRESS_LISTEN: "127.0.0.1:0",
        ...proxyMtlsEnv(),
        EGRESS_REPLAY_DATABASE_URL: asRole(role),
      },
      "LATCH_EGRESS_READY",
      30_000,
    );
    expect(refused.outcome).toBe(EXIT_START_REFUSED);
    expect(refused.stderr.trim()).toBe(
      "Latch's egress proxy cannot start: DATA_DIR holds the control plane's private keys (control-plane/ticket-signing-key.pem) and this process can read them, but the egress proxy never holds the control plane's keys; give the proxy a DATA_DIR of its own and the ticket keys through EGRESS_TICKET_PUBLIC_KEYS.",
    );
  }, 30_000);

  it("refuses a role missing one of its three privileges, naming the privilege, in any mode", async () => {
    const refused = await startProxyProcess({
      NODE_ENV: "test",
      EGRESS_REPLAY_DATABASE_URL: asRole(partialRole),
    });
    expect(refused.outcome).toBe(EXIT_START_REFUSED);
    expect(refused.stderr).toContain("its role may not DELETE on egress_spent_tickets");
  }, 30_000);
});
