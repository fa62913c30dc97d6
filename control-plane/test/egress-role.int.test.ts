// The egress tier holds only its own table (DECISIONS "Faults and isolation in deployments"): the
// control plane's migrations make egress_spent_tickets, the proxy runs no DDL, it serves calls with
// a role that may only SELECT, INSERT and DELETE that table, and in production it refuses to start
// with a role that can read anything else, naming a table it could read. On PostgreSQL only.
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ReplayStore, Ticket } from "@latch/proto/egress";
import { EXIT_START_REFUSED } from "@latch/shared/process";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../src/db/database.ts";
import { createSpentTicketsRepo } from "../src/egress/spent-tickets.repo.ts";
import { loadOrCreateTicketKey } from "../src/egress/ticket-key.ts";
import { type EgressHarness, startEgressHarness } from "./egress-harness.ts";
import { runUntilReady } from "./production-start.ts";

const PROXY_MAIN = new URL("../../egress-proxy/src/main.ts", import.meta.url).pathname;
const databaseUrl = process.env.DATABASE_URL ?? "";

/** The URL of the same database as another role (the test servers trust loopback). */
function asRole(role: string): string {
  const url = new URL(databaseUrl);
  url.username = role;
  url.password = "";
  return url.toString();
}

/** Starts the proxy process; resolves with how it ended or that it came up, and what it said. */
function startProxyProcess(env: Record<string, string>) {
  const dataDir = mkdtempSync(join(tmpdir(), "latch-role-"));
  loadOrCreateTicketKey(dataDir);
  return runUntilReady(
    PROXY_MAIN,
    { PATH: process.env.PATH, DATA_DIR: dataDir, EGRESS_LISTEN: "127.0.0.1:0", ...env },
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
  let admin: pg.Client;
  let h: EgressHarness;

  beforeAll(async () => {
    // The table comes from the control plane's migrations (global-setup ran them).
    admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    for (const name of [role, partialRole, writerRole]) await admin.query(`CREATE ROLE ${name} LOGIN`);
    // A member that does not inherit its owner role's rights can still SET ROLE to it.
    await admin.query(`CREATE ROLE ${memberRole} LOGIN NOINHERIT`);
    await admin.query(`CREATE ROLE ${ownerRole} NOLOGIN`);
    await admin.query(`CREATE TABLE ${ownerRole}_table (id int)`);
    await admin.query(`ALTER TABLE ${ownerRole}_table OWNER TO ${ownerRole}`);
    await admin.query(`GRANT ${ownerRole} TO ${memberRole}`);
    // README "Deployment": a role made after the migration is granted its three privileges by hand.
    for (const name of [role, writerRole, memberRole]) {
      await admin.query(`GRANT SELECT, INSERT, DELETE ON egress_spent_tickets TO ${name}`);
    }
    await admin.query(`GRANT INSERT ON items TO ${writerRole}`);
    await admin.query(`GRANT SELECT, INSERT ON egress_spent_tickets TO ${partialRole}`);
    h = await startEgressHarness({ replayDatabaseUrl: asRole(role) });
  }, 60_000);

  afterAll(async () => {
    await h?.close();
    await admin.query(`DROP TABLE IF EXISTS ${ownerRole}_table`).catch(() => {});
    for (const name of [role, partialRole, writerRole, memberRole, ownerRole]) {
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

  it("refuses, in production, a role that can read more than its table, naming a table it could read", async () => {
    const refused = await startProxyProcess({
      NODE_ENV: "production",
      EGRESS_REPLAY_DATABASE_URL: databaseUrl,
    });
    expect(refused.outcome).toBe(EXIT_START_REFUSED);
    expect(refused.stderr.trim()).toBe(
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

  it("refuses a role missing one of its three privileges, naming the privilege, in any mode", async () => {
    const refused = await startProxyProcess({
      NODE_ENV: "test",
      EGRESS_REPLAY_DATABASE_URL: asRole(partialRole),
    });
    expect(refused.outcome).toBe(EXIT_START_REFUSED);
    expect(refused.stderr).toContain("its role may not DELETE on egress_spent_tickets");
  }, 30_000);
});
