// Limits around organisation policies (DECISIONS "Policies"), hosted: saving the list is limited
// per organisation (each save writes the whole list into a permanent ledger row), and a rule's
// rate limit counts a call whenever that rule decided some view of it, also when another rule
// decided the path the agent named and the provider's rename sends the call to the limited path.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FAKE_PROVIDER_HOSTS, FakeProviders } from "./fake-providers.ts";
import {
  type Browser,
  connectAgent,
  type HostedHarness,
  operatorWithClient,
  startHosted,
  type ToolAnswer,
  toolAnswer,
} from "./hosted.ts";
import { joinAs } from "./teams.ts";

let h: HostedHarness;
let url: string;
let fakes: FakeProviders;

beforeAll(async () => {
  h = await startHosted({ providerHosts: [...FAKE_PROVIDER_HOSTS] });
  fakes = new FakeProviders();
  h.egress.setHandler(fakes.handler);
  url = await h.app.listen({ host: "127.0.0.1", port: 0 });
}, 60_000);

afterAll(async () => {
  await h?.close();
});

/** An operator with the Spotify app credential `SPOTIFY` and its agent. */
async function setUp() {
  const { op, token } = await operatorWithClient(h, {
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
    clientName: "music agent",
  });
  return { op, agent: await connectAgent(url, token, "music agent") };
}

const call = async (agent: Client, args: Record<string, unknown>): Promise<ToolAnswer> =>
  toolAnswer(await agent.callTool({ name: "http_request", arguments: { method: "GET", ...args } }));

async function save(op: Browser, rules: unknown[]) {
  const current = await op.request("GET", "/api/policies");
  return op.request("PUT", "/api/policies", { rules }, { "if-match": current.headers.etag as string });
}

/** The organisation's ledger rows of `action`. */
async function ledgerRows(op: Browser, action: string) {
  const exported = await op.request("GET", "/api/audit/ledger");
  expect(exported.statusCode).toBe(200);
  return exported.body
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as { action?: string })
    .filter((row) => row.action === action);
}

const spotifyCalls = () =>
  h.egress.origin.requests.filter((r) => String(r.headers.host).startsWith("api.spotify.com")).length;

describe("PUT /api/policies", () => {
  it("the 61st save in an hour is 429 rate_limited with retry_after, and writes no ledger row", async () => {
    const { op, agent } = await setUp();
    for (let i = 0; i < 60; i++) {
      const saved = await save(op, [{ id: `r${i}`, effect: "ask" }]);
      expect(saved.statusCode, saved.body).toBe(200);
    }
    expect(await ledgerRows(op, "policies_changed")).toHaveLength(60);

    const refused = await save(op, [{ id: "one-more", effect: "ask" }]);
    expect(refused.statusCode, refused.body).toBe(429);
    const error = refused.json().error as { code: string; retry_after: number };
    expect(error.code).toBe("rate_limited");
    expect(error.retry_after).toBeGreaterThan(0);
    expect(error.retry_after).toBeLessThanOrEqual(3600);
    expect(refused.headers["retry-after"]).toBe(String(error.retry_after));
    // Nothing saved, nothing written to the ledger.
    expect(await ledgerRows(op, "policies_changed")).toHaveLength(60);
    expect((await op.request("GET", "/api/policies")).json().rules).toEqual([
      expect.objectContaining({ id: "r59" }),
    ]);

    // Another member of the same organisation (an admin) still saves: the limit is each member's,
    // so one member's loop never keeps another from changing a rule.
    const admin = await joinAs(h, op, "admin", "policy-admin");
    expect((await save(admin.browser, [{ id: "admins", effect: "ask" }])).statusCode).toBe(200);
    // Another organisation saves its own list meanwhile.
    const other = await setUp();
    expect((await save(other.op, [{ id: "mine", effect: "ask" }])).statusCode).toBe(200);
    await agent.close();
    await other.agent.close();
  }, 60_000);

  it("a stale save (409) takes no place in the limit", async () => {
    const { op, agent } = await setUp();
    expect((await save(op, [{ id: "first", effect: "ask" }])).statusCode).toBe(200);
    for (let i = 0; i < 60; i++) {
      const stale = await op.request("PUT", "/api/policies", { rules: [] }, { "if-match": '"0"' });
      expect(stale.statusCode, stale.body).toBe(409);
    }
    const saved = await save(op, [{ id: "second", effect: "ask" }]);
    expect(saved.statusCode, saved.body).toBe(200);
    await agent.close();
  }, 60_000);
});

describe("a rule's rate limit counts every call it decided a view of", () => {
  it("an allow on .../items limited to 1 an hour holds for GET .../tracks, which another allow decides and the rename sends to .../items", async () => {
    const { op, agent } = await setUp();
    const rules = [
      {
        id: "tracks",
        effect: "allow",
        match: { paths: ["/v1/playlists/*/tracks"] },
        rate_limit: { calls: 100, per: "hour" },
      },
      {
        id: "items-limited",
        effect: "allow",
        match: { paths: ["/v1/playlists/*/items"] },
        rate_limit: { calls: 1, per: "hour" },
      },
    ];
    expect((await save(op, rules)).statusCode).toBe(200);
    const get = { item_name: "SPOTIFY", path: "https://api.spotify.com/v1/playlists/p1/tracks" };

    const first = await call(agent, get);
    expect(first, JSON.stringify(first)).toMatchObject({
      origin_status: 200,
      path_rewritten: { from: "/v1/playlists/p1/tracks", to: "/v1/playlists/p1/items" },
    });
    const before = spotifyCalls();

    // The dry run already says the second would be over the limit on the path actually sent.
    const dry = await call(agent, { ...get, dry_run: true });
    expect(dry, JSON.stringify(dry)).toMatchObject({ would_send: false, reason: "rate_limited" });

    const second = await call(agent, get);
    expect(second, JSON.stringify(second)).toMatchObject({
      status: "rate_limited",
      policy: { rule_id: "items-limited", effect: "allow" },
    });
    expect(second.retry_after).toBeGreaterThan(0);
    // Named by its new path, the call is refused the same; nothing reached Spotify.
    const renamed = await call(agent, { ...get, path: "https://api.spotify.com/v1/playlists/p1/items" });
    expect(renamed.status, JSON.stringify(renamed)).toBe("rate_limited");
    expect(spotifyCalls()).toBe(before);
    const limited = await ledgerRows(op, "rate_limited");
    expect(limited.length).toBe(2);
    // The broad rule's limit counted the call that left, not the one items-limited refused.
    const organisationId = (await op.request("GET", "/api/auth/me")).json().organisation.id as string;
    const tracksHits = await h.plane.database.db
      .selectFrom("rate_limit_hits")
      .select((eb) => eb.fn.countAll<string>().as("n"))
      .where("bucket", "=", `policy:${organisationId}:tracks`)
      .executeTakeFirstOrThrow();
    expect(Number(tracksHits.n)).toBe(1);
    await agent.close();
  }, 60_000);
});
