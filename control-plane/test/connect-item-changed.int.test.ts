// Provider connect (spec 2.1, 4.3): the app credential a start named is the one its callback
// exchanges with and stores beside. A name whose `<ITEM>_REFRESH` no credential may have (spec 2.1:
// 128 characters) is refused at the start, and at the callback of an item renamed to one since,
// before the provider's code is spent; an item moved to another environment since the start is
// not exchanged with, nor stored beside in the start's environment.
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FAKE_PROVIDER_HOSTS, FakeProviders } from "./fake-providers.ts";
import { type Browser, type HostedHarness, readyOperator, startHosted } from "./hosted.ts";

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

const LONG = `S${"P".repeat(124)}`;

async function storeApp(op: Browser, name: string): Promise<string> {
  const created = await op.request("POST", "/api/items", {
    name,
    value: fakes.clients.spotify.clientSecret,
    username: fakes.clients.spotify.clientId,
    kind: "client_secret",
    inject: "client_credentials",
    environment: "staging",
    allowed_hosts: ["api.spotify.com", "accounts.spotify.com"],
  });
  expect(created.statusCode, created.body).toBe(201);
  return created.json().item.id as string;
}

async function auditActions(op: Browser): Promise<string[]> {
  const organisationId = (await op.request("GET", "/api/auth/me")).json().organisation.id as string;
  const rows = await sql<{ action: string }>`
    select action from audit_events where organisation_id = ${organisationId} order by seq`.execute(
    h.plane.database.db,
  );
  return rows.rows.map((row) => row.action);
}

async function itemNames(op: Browser, environment: string): Promise<string[]> {
  const listed = await op.request("GET", `/api/items?environment=${environment}`);
  return (listed.json() as { items: { name: string }[] }).items.map((item) => item.name);
}

describe("the app credential a connect started with", () => {
  it("a name whose <ITEM>_REFRESH would pass 128 characters is refused at the start (400 invalid_request)", async () => {
    const op = await readyOperator(h);
    await storeApp(op, LONG);
    const started = await op.request("POST", "/api/integrations/spotify/start", {
      item_name: LONG,
      environment: "staging",
    });
    expect(started.statusCode, started.body).toBe(400);
    expect(started.json().error.code).toBe("invalid_request");
    expect(started.json().error.message).toContain("128 characters");
  });

  it("renamed to such a name since the start: exchange_failed before the code is spent, recorded, no 500", async () => {
    const op = await readyOperator(h);
    const id = await storeApp(op, "SPOTIFY");
    const started = await op.request("POST", "/api/integrations/spotify/start", {
      item_name: "SPOTIFY",
      environment: "staging",
    });
    expect(started.statusCode, started.body).toBe(200);
    const { code, state } = fakes.authorize("spotify", started.json().authorize_url);
    const renamed = await op.request("POST", `/api/items/${id}`, { name: LONG });
    expect(renamed.statusCode, renamed.body).toBe(200);

    const done = await op.request("GET", `/connect/callback?${new URLSearchParams({ code, state })}`);
    expect(done.statusCode, done.body).toBe(303);
    expect(done.headers.location).toBe("/console#vault?connect_error=spotify&reason=exchange_failed");
    expect(await itemNames(op, "staging")).toEqual([LONG]);
    expect(await auditActions(op)).toContain("connect_failed");
  });

  it("moved to another environment since the start: exchange_failed, nothing stored in either", async () => {
    const op = await readyOperator(h);
    const id = await storeApp(op, "SPOTIFY");
    const started = await op.request("POST", "/api/integrations/spotify/start", {
      item_name: "SPOTIFY",
      environment: "staging",
    });
    expect(started.statusCode, started.body).toBe(200);
    const { code, state } = fakes.authorize("spotify", started.json().authorize_url);
    const moved = await op.request("POST", `/api/items/${id}`, { environment: "production" });
    expect(moved.statusCode, moved.body).toBe(200);

    const done = await op.request("GET", `/connect/callback?${new URLSearchParams({ code, state })}`);
    expect(done.headers.location).toBe("/console#vault?connect_error=spotify&reason=exchange_failed");
    expect(await itemNames(op, "staging")).toEqual([]);
    expect(await itemNames(op, "production")).toEqual(["SPOTIFY"]);
  });
});
