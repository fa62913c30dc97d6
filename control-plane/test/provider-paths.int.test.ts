// Provider paths read as the provider reads them, and rule 7's audit rows, end to end on the local
// vault through the real proxy to the fake providers (fake-providers.ts): a user-only path or the
// token URL spelled another way ("/v1/%6De", "/v1//me", "/%75ser", "/api/%74oken") answers as the
// plain path does; an exchange audits both its items (spec 4.2 rule 7), a rotated refresh token
// stored in place has its row, and a minted token reused writes no exchange row.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EgressHarness, LogCapture, startEgressHarness } from "./egress-harness.ts";
import { FAKE_PROVIDER_HOSTS, type FakeProviderId, FakeProviders } from "./fake-providers.ts";
import { connectLocalAgent, type LocalRig, localOperator, startLocalVault, toolPayload } from "./local.ts";

let harness: EgressHarness;
let fakes: FakeProviders;
const logs = new LogCapture();

const HOSTS: Record<"spotify" | "github" | "google" | "slack", string[]> = {
  spotify: ["api.spotify.com", "accounts.spotify.com"],
  github: ["api.github.com", "github.com"],
  google: ["www.googleapis.com", "oauth2.googleapis.com"],
  slack: ["slack.com"],
};

beforeAll(async () => {
  harness = await startEgressHarness({ providerHosts: [...FAKE_PROVIDER_HOSTS] });
  fakes = new FakeProviders();
  harness.setHandler(fakes.handler);
}, 60_000);

afterAll(async () => {
  await harness?.close();
});

async function store(rig: LocalRig, body: Record<string, unknown>): Promise<void> {
  const stored = await localOperator(rig, "POST", "/api/items", body);
  expect([200, 201], JSON.stringify(stored.json)).toContain(stored.status);
}

/** The app credential (client secret, client id as username) under `name`. */
async function storeApp(rig: LocalRig, provider: keyof typeof HOSTS, name: string): Promise<void> {
  await store(rig, {
    name,
    value: fakes.clients[provider].clientSecret,
    username: fakes.clients[provider].clientId,
    inject: "client_credentials",
    allowed_hosts: HOSTS[provider],
  });
}

async function storeRefresh(rig: LocalRig, provider: keyof typeof HOSTS, refreshToken: string) {
  await store(rig, {
    name: `${provider.toUpperCase()}_REFRESH`,
    value: refreshToken,
    inject: "refresh",
    allowed_hosts: HOSTS[provider],
  });
}

/** http_request; a pending answer is approved for the session and the call made again. */
async function callApproved(rig: LocalRig, agent: Client, args: Record<string, unknown>) {
  const first = toolPayload(await agent.callTool({ name: "http_request", arguments: args }));
  if (first.status !== "pending") return first;
  const approved = await localOperator(rig, "POST", "/api/grants", {
    grant_id: first.grant_id,
    scope: "session",
  });
  expect(approved.status, JSON.stringify(approved.json)).toBe(200);
  return toolPayload(await agent.callTool({ name: "http_request", arguments: args }));
}

/** The organisation's audit rows of calls and exchanges, oldest first. */
async function auditRows(rig: LocalRig) {
  const rows = await rig.vault.database.db
    .selectFrom("audit_events")
    .select(["action", "item_name", "host", "reason", "detail", "seq"])
    .where("organisation_id", "=", rig.vault.organisationId)
    .where("action", "in", ["http_request", "http_request_refused", "token_exchange", "item_rotated"])
    .execute();
  return rows
    .sort((a, b) => Number(a.seq) - Number(b.seq))
    .map(({ seq: _seq, ...row }) => ({ ...row, detail: row.detail as Record<string, unknown> }));
}

const tokenCalls = (provider: FakeProviderId) =>
  fakes.tokenRequests.filter((r) => r.provider === provider).length;

describe("a provider path spelled another way is the same path", () => {
  it.each([
    ["spotify", "SPOTIFY", "api.spotify.com", "/v1/%6De"],
    ["spotify", "SPOTIFY", "api.spotify.com", "/v1//me/player"],
    ["github", "GITHUB", "api.github.com", "/%75ser"],
  ] as const)(
    "%s, app credential only: %s %s%s answers user_connect_required as the plain path does; nothing is sent or asked",
    async (provider, name, host, path) => {
      const rig = await startLocalVault(harness, { logs });
      await storeApp(rig, provider, name);
      const agent = await connectLocalAgent(rig.url, `${provider}-spelling-agent`);
      const before = harness.origin.requests.length;
      const answer = toolPayload(
        await agent.callTool({
          name: "http_request",
          arguments: { method: "GET", host, path, item_name: name },
        }),
      );
      expect(answer, JSON.stringify(answer)).toMatchObject({
        status: "user_connect_required",
        provider,
        item_name: name,
        refresh_item_name: `${name}_REFRESH`,
      });
      expect(harness.origin.requests.length).toBe(before);
      // No approval was asked for, so none can be spent on a call the provider refuses.
      expect((await localOperator<{ grants: unknown[] }>(rig, "GET", "/api/grants")).json.grants).toEqual([]);
      await agent.close();
    },
  );

  it("the token URL spelled /api/%74oken is the token endpoint: the exchange is the answer, redacted", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeApp(rig, "spotify", "SPOTIFY_SECRET");
    await storeRefresh(rig, "spotify", fakes.issueRefreshToken("spotify"));
    const agent = await connectLocalAgent(rig.url, "token-spelling-agent");
    const before = tokenCalls("spotify");
    const answer = await callApproved(rig, agent, {
      method: "POST",
      host: "accounts.spotify.com",
      path: "/api/%74oken",
      item_name: "SPOTIFY_REFRESH",
      content_type: "application/x-www-form-urlencoded",
      body: { grant_type: "refresh_token" },
    });
    expect(answer.origin_status, JSON.stringify(answer)).toBe(200);
    expect(answer.refreshed).toBe(true);
    const body = JSON.parse(String(answer.body)) as Record<string, unknown>;
    expect(body.access_token).toBe("[redacted]");
    expect(body.refresh_token).toBe("[redacted]");
    // One exchange: the agent's post was answered by it, not sent again with a bearer.
    expect(tokenCalls("spotify")).toBe(before + 1);
    await agent.close();
  });

  it("an ordinary path still goes with the app credential alone", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeApp(rig, "spotify", "SPOTIFY");
    const agent = await connectLocalAgent(rig.url, "ordinary-path-agent");
    const answer = await callApproved(rig, agent, {
      method: "GET",
      host: "api.spotify.com",
      path: "/v1/%6Dentions",
      item_name: "SPOTIFY",
    });
    expect(answer.origin_status, JSON.stringify(answer)).toBe(200);
    expect(JSON.parse(String(answer.body)).kind).toBe("app");
    await agent.close();
  });
});

describe("rule 7: an exchange audits both items", () => {
  it("a call naming the app credential, made with its connected account: both items named, the rotation too; a reused token writes no exchange", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeApp(rig, "spotify", "SPOTIFY");
    await storeRefresh(rig, "spotify", fakes.issueRefreshToken("spotify"));
    const agent = await connectLocalAgent(rig.url, "account-audit-agent");
    const args = { method: "GET", host: "api.spotify.com", path: "/v1/me", item_name: "SPOTIFY" };
    expect((await callApproved(rig, agent, args)).refreshed).toBe(true);
    expect((await callApproved(rig, agent, args)).origin_status).toBe(200);
    const rows = await auditRows(rig);
    // The call is made with the account (tools/http-request.tool.ts decideAccountUse).
    expect(rows.map((r) => [r.action, r.item_name])).toEqual([
      ["http_request", "SPOTIFY_REFRESH"],
      ["token_exchange", "SPOTIFY"],
      ["item_rotated", "SPOTIFY_REFRESH"],
      ["http_request", "SPOTIFY_REFRESH"],
    ]);
    for (const row of rows.slice(1, 3)) {
      expect(row).toMatchObject({ host: "accounts.spotify.com", reason: null });
      expect(row.detail).toEqual({ provider: "spotify", for_item: "SPOTIFY_REFRESH" });
    }
    await agent.close();
  });

  it.each([
    ["spotify", true],
    ["google", false],
  ] as const)(
    "%s <ITEM>_REFRESH named: the client secret's token_exchange row only when it exchanged; a rotation stored has its row (%s)",
    async (provider, rotates) => {
      const rig = await startLocalVault(harness, { logs });
      const upper = provider.toUpperCase();
      await storeApp(rig, provider, `${upper}_SECRET`);
      await storeRefresh(rig, provider, fakes.issueRefreshToken(provider));
      const agent = await connectLocalAgent(rig.url, `${provider}-refresh-audit-agent`);
      const path = provider === "spotify" ? "/v1/me" : "/oauth2/v3/userinfo";
      const args = { method: "GET", host: HOSTS[provider][0], path, item_name: `${upper}_REFRESH` };
      expect((await callApproved(rig, agent, args)).refreshed).toBe(true);
      // The minted token is reused: no exchange, so no exchange row.
      const again = await callApproved(rig, agent, args);
      expect(again.origin_status).toBe(200);
      expect(again.refreshed).toBeUndefined();
      const rows = await auditRows(rig);
      expect(rows.map((r) => [r.action, r.item_name])).toEqual([
        ["http_request", `${upper}_REFRESH`],
        ["token_exchange", `${upper}_SECRET`],
        ...(rotates ? [["item_rotated", `${upper}_REFRESH`]] : []),
        ["http_request", `${upper}_REFRESH`],
      ]);
      expect(rows[1]).toMatchObject({ host: HOSTS[provider][1], reason: null });
      await agent.close();
    },
  );

  it("an exchange the provider refused still names the client secret, with its reason, and no rotation", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeApp(rig, "slack", "SLACK");
    const refreshToken = fakes.issueRefreshToken("slack");
    fakes.revokeRefreshToken(refreshToken);
    await storeRefresh(rig, "slack", refreshToken);
    const agent = await connectLocalAgent(rig.url, "refused-audit-agent");
    const answer = await callApproved(rig, agent, {
      method: "GET",
      host: "slack.com",
      path: "/api/users.profile.get",
      item_name: "SLACK",
    });
    expect(answer.error).toMatchObject({ code: "token_exchange_failed" });
    const rows = await auditRows(rig);
    expect(rows.map((r) => [r.action, r.item_name, r.reason])).toEqual([
      ["http_request_refused", "SLACK_REFRESH", "token_exchange_failed"],
      ["token_exchange", "SLACK", "token_exchange_failed"],
    ]);
    await agent.close();
  });
});
