// Provider connect (spec 4.3, 3.4): the agent a connect approves (agent_client_id) is checked again
// at the callback, with its client row held, not only at the start. An agent revoked since the start
// gets no standing approval from the callback; the account the operator connected is stored all the
// same. On PostgreSQL, a revoke landing while the callback runs is waited for, then seen.
import { setTimeout as sleep } from "node:timers/promises";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isPostgresRun } from "./database.ts";
import { FAKE_PROVIDER_HOSTS, FakeProviders } from "./fake-providers.ts";
import { type Browser, type HostedHarness, operatorWithClient, startHosted } from "./hosted.ts";

let h: HostedHarness;
let fakes: FakeProviders;

beforeAll(async () => {
  h = await startHosted({ providerHosts: [...FAKE_PROVIDER_HOSTS] });
  fakes = new FakeProviders();
  h.egress.setHandler(fakes.handler);
}, 60_000);

afterAll(async () => {
  await h?.close();
});

/** An operator with the SPOTIFY app credential in staging and a model client there; a started connect naming it. */
async function startedForAgent() {
  const { op, clientId } = await operatorWithClient(h, {
    secret: fakes.clients.spotify.clientSecret,
    items: [
      {
        name: "SPOTIFY",
        username: fakes.clients.spotify.clientId,
        kind: "client_secret",
        inject: "client_credentials",
        allowed_hosts: ["api.spotify.com", "accounts.spotify.com"],
      },
    ],
    clientName: "music-agent",
  });
  const started = await op.request("POST", "/api/integrations/spotify/start", {
    item_name: "SPOTIFY",
    environment: "staging",
    agent_client_id: clientId,
  });
  expect(started.statusCode, started.body).toBe(200);
  const authorized = fakes.authorize("spotify", started.json().authorize_url);
  const organisationId = (await op.request("GET", "/api/auth/me")).json().organisation.id as string;
  return { op, clientId, organisationId, authorized };
}

function callback(op: Browser, query: { code: string; state: string }) {
  return op.request("GET", `/connect/callback?${new URLSearchParams(query)}`);
}

async function activeGrants(organisationId: string, agentId: string): Promise<string[]> {
  const rows = await h.plane.database.db
    .selectFrom("grants")
    .innerJoin("items", "items.id", "grants.item_id")
    .select("items.name")
    .where("grants.organisation_id", "=", organisationId)
    .where("grants.agent_id", "=", agentId)
    .where("grants.status", "=", "active")
    .orderBy("items.name")
    .execute();
  return rows.map((row) => row.name);
}

async function approvedRows(organisationId: string): Promise<number> {
  const rows = await sql<{ n: number }>`
    select count(*)::int as n from audit_events
    where organisation_id = ${organisationId} and action = 'grant_approved'`.execute(h.plane.database.db);
  return rows.rows[0]?.n ?? 0;
}

async function refreshStored(organisationId: string): Promise<boolean> {
  const row = await h.plane.database.db
    .selectFrom("items")
    .select("id")
    .where("organisation_id", "=", organisationId)
    .where("name", "=", "SPOTIFY_REFRESH")
    .executeTakeFirst();
  return row !== undefined;
}

describe("a connect whose agent was revoked since the start", () => {
  it("stores the account but approves nothing for the revoked agent", async () => {
    const { op, clientId, organisationId, authorized } = await startedForAgent();
    const revoked = await op.request("POST", `/api/clients/${clientId}/revoke`);
    expect(revoked.statusCode, revoked.body).toBe(200);

    const done = await callback(op, authorized);
    expect(done.headers.location).toBe("/console#vault?connected=spotify");
    expect(await refreshStored(organisationId)).toBe(true);
    expect(await activeGrants(organisationId, clientId)).toEqual([]);
    expect(await approvedRows(organisationId)).toBe(0);
  });

  it("a live agent still gets its standing approvals on the source credential and the refresh item", async () => {
    const { op, clientId, organisationId, authorized } = await startedForAgent();
    const done = await callback(op, authorized);
    expect(done.headers.location).toBe("/console#vault?connected=spotify");
    expect(await activeGrants(organisationId, clientId)).toEqual(["SPOTIFY", "SPOTIFY_REFRESH"]);
  });
});

describe.runIf(isPostgresRun())("a revoke landing while the callback runs", () => {
  it("the callback waits for the client's row, then sees the revoke and approves nothing", async () => {
    const { op, clientId, organisationId, authorized } = await startedForAgent();
    const db = h.plane.database.db;
    let finishing: ReturnType<typeof callback> | undefined;
    // A stand-in for a revoke caught between its UPDATE of the client row and its commit.
    await db.transaction().execute(async (trx) => {
      await trx.updateTable("clients").set({ revoked_at: new Date() }).where("id", "=", clientId).execute();
      finishing = callback(op, authorized);
      // The account is stored before the approvals' transaction; then the callback waits for the row.
      const deadline = Date.now() + 10_000;
      while (!(await refreshStored(organisationId)) && Date.now() < deadline) await sleep(20);
      while (Date.now() < deadline) {
        const waiting = await sql<{ n: number }>`
          select count(*)::int as n from pg_stat_activity
          where wait_event_type = 'Lock' and datname = current_database()`.execute(db);
        if ((waiting.rows[0]?.n ?? 0) > 0) break;
        // Unlocked, the callback finishes meanwhile with approvals for the agent: stop waiting.
        if ((await activeGrants(organisationId, clientId)).length > 0) break;
        await sleep(20);
      }
    });
    expect((await finishing)?.headers.location).toBe("/console#vault?connected=spotify");
    expect(await activeGrants(organisationId, clientId)).toEqual([]);
    expect(await approvedRows(organisationId)).toBe(0);
  });
});
