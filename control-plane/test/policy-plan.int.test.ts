// An organisation policy judges the call that is made (DECISIONS "Policies"), hosted, through the
// official MCP SDK client and the real proxy to a fake Spotify on loopback TLS: a rule's `items`
// hold for every credential the token plan uses (the `<ITEM>_REFRESH` it exchanges, the sibling
// client secret), however the agent names the call; a rule's `paths` hold for the validated path
// and for the path the provider's rename sends (spec 4.2 rule 3), as the preview replays it.
// Refused: nothing sent, no token exchanged, no approval spent, the audit row naming the rule.
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

const SPOTIFY_HOSTS = ["api.spotify.com", "accounts.spotify.com"];

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

/**
 * An operator with the Spotify app credential stored as `appName` and, with `isConnected`, the
 * user's account connected (spec 4.3: `<BASE>_REFRESH`, sealed by the proxy), and its agent.
 */
async function setUp(options: { appName?: string; isConnected: boolean }) {
  const appName = options.appName ?? "SPOTIFY";
  const { op, token } = await operatorWithClient(h, {
    secret: fakes.clients.spotify.clientSecret,
    items: [
      {
        name: appName,
        username: fakes.clients.spotify.clientId,
        kind: "client_secret",
        inject: "client_credentials",
        allowed_hosts: SPOTIFY_HOSTS,
      },
    ],
    clientName: "music agent",
  });
  if (options.isConnected) {
    const started = await op.request("POST", "/api/integrations/spotify/start", {
      item_name: appName,
      environment: "staging",
    });
    expect(started.statusCode, started.body).toBe(200);
    const { code, state } = fakes.authorize("spotify", started.json().authorize_url);
    const done = await op.request("GET", `/connect/callback?${new URLSearchParams({ code, state })}`);
    expect(done.headers.location).toBe("/console#vault?connected=spotify");
  }
  return { op, agent: await connectAgent(url, token, "music agent") };
}

const call = async (agent: Client, args: Record<string, unknown>): Promise<ToolAnswer> =>
  toolAnswer(await agent.callTool({ name: "http_request", arguments: { method: "GET", ...args } }));

/** The call, approved item_standing when it asks (with the operator's fresh step-up), and made again. */
async function callApproved(op: Browser, agent: Client, args: Record<string, unknown>) {
  const first = await call(agent, args);
  if (first.status !== "pending") return first;
  const approved = await op.request("POST", `/api/grants/${first.grant_id}/approve`, {
    policy: "item_standing",
  });
  expect(approved.statusCode, approved.body).toBe(200);
  return call(agent, args);
}

async function savePolicy(op: Browser, rules: unknown[]) {
  const current = await op.request("GET", "/api/policies");
  const saved = await op.request(
    "PUT",
    "/api/policies",
    { rules },
    { "if-match": current.headers.etag as string },
  );
  expect(saved.statusCode, saved.body).toBe(200);
}

async function auditOf(op: Browser) {
  return (await op.request("GET", "/api/audit")).json().events as {
    action: string;
    item_name: string | null;
    detail: Record<string, unknown>;
  }[];
}

/** What reached the fake Spotify: its API calls, and its token endpoint's exchanges. */
const spotifyTraffic = () => ({
  api: h.egress.origin.requests.filter((r) => String(r.headers.host).startsWith("api.spotify.com")).length,
  exchanges: fakes.tokenRequests.filter((r) => r.provider === "spotify").length,
});

describe("a rule's items hold for every credential the call uses", () => {
  it("deny on SPOTIFY_REFRESH refuses a call that names SPOTIFY, or only the host: the refresh token is never exchanged", async () => {
    const { op, agent } = await setUp({ isConnected: true });
    const me = { host: "api.spotify.com", path: "/v1/me" };
    // Approved for good: without a policy the user's account is used (a refresh exchange).
    const sent = await callApproved(op, agent, { ...me, item_name: "SPOTIFY" });
    expect(sent.origin_status, JSON.stringify(sent)).toBe(200);
    expect(JSON.parse(String(sent.body)).kind).toBe("user");
    expect(spotifyTraffic().api).toBeGreaterThan(0);

    const rule = {
      id: "no-user-account",
      name: "Not the user's account",
      effect: "deny",
      match: { items: ["SPOTIFY_REFRESH"] },
    };
    // The preview counts the calls above (the request, then the call), as the rule will judge them:
    // a call naming SPOTIFY that uses the user's account is the account's call (its rows name
    // SPOTIFY_REFRESH, tools/http-request.tool.ts decideAccountUse).
    const preview = await op.request("POST", "/api/policies/preview", { rules: [rule] });
    expect(preview.statusCode, preview.body).toBe(200);
    expect(preview.json()).toMatchObject({
      totals: { deny: 2, none: 0 },
      rules: [{ id: "no-user-account", calls: 2 }],
    });
    await savePolicy(op, [rule]);
    const before = spotifyTraffic();
    for (const args of [{ ...me, item_name: "SPOTIFY" }, me]) {
      const denied = await call(agent, args);
      expect(denied, JSON.stringify(denied)).toMatchObject({
        status: "policy_denied",
        policy: { rule_id: "no-user-account", effect: "deny" },
        item_name: "SPOTIFY_REFRESH",
      });
      // And a dry run names the same rule.
      expect(await call(agent, { ...args, dry_run: true })).toMatchObject({
        status: "dry_run",
        policy: { rule_id: "no-user-account", effect: "deny" },
        would_send: false,
        reason: "policy_denied",
      });
    }
    expect(spotifyTraffic()).toEqual(before);
    const denials = (await auditOf(op)).filter((e) => e.action === "policy_denied");
    expect(denials).toHaveLength(2);
    for (const row of denials)
      expect(row.detail).toMatchObject({ rule_id: "no-user-account", path: "/v1/me" });
    // The standing approval is untouched: a call the rule does not name (the app token, a public
    // catalogue path) still goes under it once the rule is gone.
    await savePolicy(op, []);
    expect((await call(agent, { ...me, item_name: "SPOTIFY" })).origin_status).toBe(200);
    await agent.close();
  });

  it("deny on SPOTIFY_SECRET refuses a call that names SPOTIFY_REFRESH, whose exchange adds the secret", async () => {
    const { op, agent } = await setUp({ appName: "SPOTIFY_SECRET", isConnected: true });
    const args = { host: "api.spotify.com", path: "/v1/me", item_name: "SPOTIFY_REFRESH" };
    const sent = await callApproved(op, agent, args);
    expect(sent.origin_status, JSON.stringify(sent)).toBe(200);

    await savePolicy(op, [
      {
        id: "no-app-secret",
        name: "Never the client secret",
        effect: "deny",
        match: { items: ["SPOTIFY_SECRET"] },
      },
    ]);
    const before = spotifyTraffic();
    expect(await call(agent, args)).toMatchObject({
      status: "policy_denied",
      policy: { rule_id: "no-app-secret" },
      item_name: "SPOTIFY_REFRESH",
    });
    expect(spotifyTraffic()).toEqual(before);
    await agent.close();
  });

  it("an allow holds only for the credential it names: one on the app credential never reaches the user's account, a sibling's ask beats it", async () => {
    const { op, agent } = await setUp({ isConnected: true });
    const args = { host: "api.spotify.com", path: "/v1/me", item_name: "SPOTIFY" };
    const before = spotifyTraffic();

    // An allow on the app credential: /v1/me is the user's account's call (SPOTIFY_REFRESH), which
    // no rule names, so today's approvals decide it (the allow on a sibling sends nothing).
    await savePolicy(op, [{ id: "app-ok", effect: "allow", match: { items: ["SPOTIFY"] } }]);
    const asked = await call(agent, args);
    expect(asked, JSON.stringify(asked)).toMatchObject({ status: "pending", item_name: "SPOTIFY_REFRESH" });
    expect(asked.policy).toBeUndefined();

    // An allow on the account first, then an ask on the app credential (the exchange's client
    // secret): the call asks, naming the ask rule.
    await savePolicy(op, [
      { id: "user-ok", effect: "allow", match: { items: ["SPOTIFY_REFRESH"] } },
      { id: "ask-app", effect: "ask", match: { items: ["SPOTIFY"] } },
    ]);
    expect(await call(agent, args)).toMatchObject({
      status: "pending",
      policy: { rule_id: "ask-app", effect: "ask" },
    });
    expect(spotifyTraffic()).toEqual(before);

    // The allow written for the account alone: sent without an approval.
    await savePolicy(op, [{ id: "user-ok", effect: "allow", match: { items: ["SPOTIFY_REFRESH"] } }]);
    const allowed = await call(agent, args);
    expect(allowed, JSON.stringify(allowed)).toMatchObject({
      origin_status: 200,
      policy: { rule_id: "user-ok", effect: "allow" },
    });
    await agent.close();
  });
});

describe("a rule's paths hold for the validated path and the path the provider's rename sends", () => {
  const tracks = "/v1/playlists/abc/tracks";

  it("deny on .../items refuses DELETE .../tracks, which would leave as .../items; the preview counts the call it refuses", async () => {
    const { op, agent } = await setUp({ isConnected: false });
    const del = { item_name: "SPOTIFY", method: "DELETE", path: `https://api.spotify.com${tracks}` };
    const sent = await callApproved(op, agent, del);
    expect(sent.origin_status, JSON.stringify(sent)).toBe(200);
    expect(sent.path_rewritten).toEqual({ from: tracks, to: "/v1/playlists/abc/items" });
    // The call's row records the path sent, and the path asked for.
    const row = (await auditOf(op)).find((e) => e.action === "http_request");
    expect(row?.detail).toMatchObject({ path: "/v1/playlists/abc/items", requested_path: tracks });

    const rule = {
      id: "keep-playlists",
      name: "Keep playlists",
      effect: "deny",
      match: { hosts: ["api.spotify.com"], methods: ["DELETE"], paths: ["/v1/playlists/*/items"] },
    };
    // The preview replays the call above through the rule (its row's path is the one sent) ...
    const preview = await op.request("POST", "/api/policies/preview", { rules: [rule] });
    expect(preview.statusCode, preview.body).toBe(200);
    expect(preview.json().rules).toMatchObject([{ id: "keep-playlists", calls: 1 }]);
    // ... and the list in force refuses it, whichever name the agent uses.
    await savePolicy(op, [rule]);
    const before = spotifyTraffic();
    for (const path of [tracks, "/v1/playlists/abc/items"]) {
      const denied = await call(agent, { ...del, path: `https://api.spotify.com${path}` });
      expect(denied, JSON.stringify(denied)).toMatchObject({
        status: "policy_denied",
        policy: { rule_id: "keep-playlists" },
      });
    }
    expect(spotifyTraffic()).toEqual(before);
    // Other methods are not the rule's: still sent (and renamed) under the standing approval.
    const read = await callApproved(op, agent, { ...del, method: "GET" });
    expect(read.origin_status, JSON.stringify(read)).toBe(200);
    await agent.close();
  });

  it("an allow holds only where it matches both paths", async () => {
    const { op, agent } = await setUp({ isConnected: false });
    const get = { item_name: "SPOTIFY", path: `https://api.spotify.com${tracks}` };
    const before = spotifyTraffic();
    // Written for one name of the path alone, an allow sends neither: the old name would leave as
    // the new one, which the rule does not name, and the new name was not asked for.
    for (const glob of ["/v1/playlists/*/tracks", "/v1/playlists/*/items"]) {
      await savePolicy(op, [{ id: "one-name", effect: "allow", match: { paths: [glob] } }]);
      const asked = await call(agent, get);
      expect(asked.status, JSON.stringify(asked)).toBe("pending");
    }
    expect(spotifyTraffic()).toEqual(before);

    await savePolicy(op, [{ id: "playlists", effect: "allow", match: { paths: ["/v1/playlists/**"] } }]);
    const allowed = await call(agent, get);
    expect(allowed, JSON.stringify(allowed)).toMatchObject({
      origin_status: 200,
      policy: { rule_id: "playlists", effect: "allow" },
      path_rewritten: { from: tracks, to: "/v1/playlists/abc/items" },
    });
    await agent.close();
  });
});
