// Spec 4.2 rule 7 end to end on the local vault (spec 4.4's refresh path): an agent's calls to
// fake providers on loopback TLS, through the real proxy, for every branch: a refresh-based call
// (rotation stored in place, the minted token reused), the agent's own post to the token
// endpoint, client credentials, the PKCE public-client exchange, user_connect_required,
// inject_denied with missing_item, a refused exchange, and each provider's client
// authentication. Every secret the fakes hold or issue is then looked for everywhere.
import { randomBytes } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EgressHarness, LogCapture, startEgressHarness } from "./egress-harness.ts";
import { FAKE_PROVIDER_HOSTS, type FakeProviderId, FakeProviders } from "./fake-providers.ts";
import { connectLocalAgent, type LocalRig, localOperator, startLocalVault, toolPayload } from "./local.ts";

let harness: EgressHarness;
let fakes: FakeProviders;
const logs = new LogCapture();
const answers: string[] = [];

const TOKEN_HOSTS: Record<FakeProviderId, string> = {
  spotify: "accounts.spotify.com",
  github: "github.com",
  google: "oauth2.googleapis.com",
  slack: "slack.com",
  stripe: "connect.stripe.com",
};
const API_HOSTS: Record<FakeProviderId, string> = {
  spotify: "api.spotify.com",
  github: "api.github.com",
  google: "www.googleapis.com",
  slack: "slack.com",
  stripe: "api.stripe.com",
};
const USER_PATHS: Record<FakeProviderId, string> = {
  spotify: "/v1/me",
  github: "/user",
  google: "/oauth2/v3/userinfo",
  slack: "/api/users.profile.get",
  stripe: "/v1/balance",
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
  answers.push(JSON.stringify(stored.json));
}

/** The app credential (client secret, client id as username) for both of the provider's hosts. */
async function storeApp(
  rig: LocalRig,
  provider: FakeProviderId,
  name = provider.toUpperCase(),
): Promise<void> {
  await store(rig, {
    name,
    value: fakes.clients[provider].clientSecret,
    username: fakes.clients[provider].clientId,
    inject: "client_credentials",
    allowed_hosts: [...new Set([API_HOSTS[provider], TOKEN_HOSTS[provider]])],
  });
}

async function storeRefresh(
  rig: LocalRig,
  provider: FakeProviderId,
  refreshToken: string,
  username?: string,
) {
  await store(rig, {
    name: `${provider.toUpperCase()}_REFRESH`,
    value: refreshToken,
    inject: "refresh",
    ...(username ? { username } : {}),
    allowed_hosts: [...new Set([API_HOSTS[provider], TOKEN_HOSTS[provider]])],
  });
}

/** http_request; a pending answer is approved for 8 hours and the call made again. */
async function callApproved(rig: LocalRig, agent: Client, args: Record<string, unknown>) {
  const first = toolPayload(await agent.callTool({ name: "http_request", arguments: args }));
  answers.push(JSON.stringify(first));
  if (first.status !== "pending") return first;
  const approved = await localOperator(rig, "POST", "/api/grants", {
    grant_id: first.grant_id,
    scope: "session",
  });
  expect(approved.status, JSON.stringify(approved.json)).toBe(200);
  const second = toolPayload(await agent.callTool({ name: "http_request", arguments: args }));
  answers.push(JSON.stringify(second));
  return second;
}

async function storedLast4(rig: LocalRig, name: string): Promise<string | undefined> {
  const listed = await localOperator<{ items: { name: string; last4: string }[] }>(rig, "GET", "/api/items");
  return listed.json.items.find((item) => item.name === name)?.last4;
}

const tokenCalls = (provider: FakeProviderId) =>
  fakes.tokenRequests.filter((r) => r.provider === provider).length;

describe("rule 7: refresh-based calls", () => {
  it("a one-call approval of a refresh-based call sends it once: its ticket is named on the grant before the token lock", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeApp(rig, "github");
    await storeRefresh(rig, "github", fakes.issueRefreshToken("github"));
    const agent = await connectLocalAgent(rig.url, "github-once-agent");
    const args = { method: "GET", host: API_HOSTS.github, path: USER_PATHS.github, item_name: "GITHUB" };
    const first = toolPayload(await agent.callTool({ name: "http_request", arguments: args }));
    expect(first.status).toBe("pending");
    const approved = await localOperator(rig, "POST", "/api/grants", {
      grant_id: first.grant_id,
      scope: "once",
    });
    expect(approved.status, JSON.stringify(approved.json)).toBe(200);
    const sent = toolPayload(await agent.callTool({ name: "http_request", arguments: args }));
    expect(sent.origin_status, JSON.stringify(sent)).toBe(200);
    expect(sent.refreshed).toBe(true);
    // Settled: the grant names no ticket any more, and the approval is spent.
    const row = await rig.vault.database.db
      .selectFrom("grants")
      .select(["status", "call_ticket_id"])
      .where("id", "=", String(first.grant_id))
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ status: "consumed", call_ticket_id: null });
    expect(toolPayload(await agent.callTool({ name: "http_request", arguments: args })).status).toBe(
      "pending",
    );
    await agent.close();
  }, 60_000);

  it.each(["spotify", "github", "google", "slack", "stripe"] as const)(
    "%s: mints an access token from <ITEM>_REFRESH with the sibling client secret, redacts it, stores a rotated refresh token and reuses the minted token",
    async (provider) => {
      const rig = await startLocalVault(harness, { logs });
      await storeApp(rig, provider);
      const refreshToken = fakes.issueRefreshToken(provider);
      await storeRefresh(rig, provider, refreshToken);
      const agent = await connectLocalAgent(rig.url, `${provider}-agent`);
      const before = tokenCalls(provider);
      // Stripe has no user-only path: a call naming the platform key goes with it alone unless the
      // agent is allowed on the connected account (connected-account.int.test.ts), so it is named.
      const itemName = provider === "stripe" ? "STRIPE_REFRESH" : provider.toUpperCase();

      const answer = await callApproved(rig, agent, {
        method: "GET",
        host: API_HOSTS[provider],
        path: USER_PATHS[provider],
        item_name: itemName,
      });
      expect(answer.origin_status, JSON.stringify(answer)).toBe(200);
      expect(answer.refreshed).toBe(true);
      expect(String(answer.token_last4)).toMatch(/^.{4}$/);
      // The API echoed the minted token in its body and x-request-id: both [redacted].
      expect(String(answer.body)).toContain("Bearer [redacted]");
      expect((answer.origin_headers as Record<string, string>)["x-request-id"]).toBe("[redacted]");
      expect(tokenCalls(provider)).toBe(before + 1);

      const rotates = provider === "spotify" || provider === "github" || provider === "slack";
      // The spent refresh token is dead at the provider; the stored one is its rotation.
      expect(fakes.refreshTokens.has(refreshToken)).toBe(!rotates);
      if (rotates) {
        const live = [...fakes.refreshTokens.entries()].filter(([, p]) => p === provider).map(([t]) => t);
        expect(live.map((t) => t.slice(-4))).toContain(
          await storedLast4(rig, `${provider.toUpperCase()}_REFRESH`),
        );
      }

      // Reused until 60 s before expiry: a second call makes no exchange (Stripe's tokens carry no
      // expires_in: they are kept an hour).
      const again = await callApproved(rig, agent, {
        method: "GET",
        host: API_HOSTS[provider],
        path: USER_PATHS[provider],
        item_name: itemName,
      });
      expect(again.origin_status).toBe(200);
      expect(tokenCalls(provider)).toBe(before + 1);
      await agent.close();
    },
  );

  it("an agent approved on <ITEM>_REFRESH alone posts to the token endpoint: the body comes back redacted with refreshed and token_last4", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeApp(rig, "google", "GOOGLE_SECRET");
    await storeRefresh(rig, "google", fakes.issueRefreshToken("google"));
    const agent = await connectLocalAgent(rig.url, "token-endpoint-agent");
    const answer = await callApproved(rig, agent, {
      method: "POST",
      host: "oauth2.googleapis.com",
      path: "/token",
      item_name: "GOOGLE_REFRESH",
      content_type: "application/x-www-form-urlencoded",
      body: { grant_type: "refresh_token" },
    });
    expect(answer.origin_status, JSON.stringify(answer)).toBe(200);
    expect(answer.refreshed).toBe(true);
    const body = JSON.parse(String(answer.body)) as Record<string, unknown>;
    expect(body.access_token).toBe("[redacted]");
    expect(body.id_token).toBe("[redacted]");
    expect(body.expires_in).toBe(3600);
    expect(String(answer.token_last4)).toHaveLength(4);
    // The sibling client secret was added by the proxy, in form fields (Google's way).
    expect(fakes.tokenRequests.at(-1)).toEqual({ provider: "google", grantType: "refresh_token", ok: true });
    await agent.close();
  });

  it("the agent's post to the token endpoint never shows a token the reader could miss: a name given twice is refused, a nested token in an error redacted", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeApp(rig, "google", "GOOGLE_SECRET");
    await storeRefresh(rig, "google", fakes.issueRefreshToken("google"));
    const agent = await connectLocalAgent(rig.url, "token-answer-agent");
    const [access, firstCopy, nested] = ["google_at_", "google_rt_first_", "google_rt_nested_"].map(
      (prefix) => `${prefix}${randomBytes(12).toString("hex")}`,
    ) as [string, string, string];
    fakes.secrets.push(access, firstCopy, nested);
    // The token endpoint answers once as given (fake-providers.ts writes well-formed answers only).
    const answerOnce = (status: number, body: string) =>
      harness.setHandler((req, res, recorded) => {
        if (String(req.headers.host ?? "").replace(/:\d+$/, "") !== "oauth2.googleapis.com") {
          fakes.handler(req, res, recorded);
          return;
        }
        harness.setHandler(fakes.handler);
        res.writeHead(status, { "content-type": "application/json" });
        res.end(body);
      });
    const post = () =>
      callApproved(rig, agent, {
        method: "POST",
        host: "oauth2.googleapis.com",
        path: "/token",
        item_name: "GOOGLE_REFRESH",
        content_type: "application/x-www-form-urlencoded",
        body: { grant_type: "refresh_token" },
      });
    try {
      // JSON.parse keeps the last copy; the first would have reached the agent.
      answerOnce(
        200,
        `{"access_token":"${access}","refresh_token":"${firstCopy}","refresh_token":"","expires_in":3600}`,
      );
      const repeated = await post();
      expect(repeated.error, JSON.stringify(repeated)).toMatchObject({ code: "token_exchange_failed" });
      expect(String((repeated.error as { message: string }).message)).toContain("repeated_parameter");
      expect(JSON.stringify(repeated)).not.toContain(firstCopy);
      // An error answer is handed on, without the token nested in it.
      answerOnce(400, `{"error":"invalid_grant","team":{"refresh_token":"${nested}"}}`);
      const refused = await post();
      expect(refused.origin_status, JSON.stringify(refused)).toBe(400);
      expect(String(refused.body)).toContain("invalid_grant");
      expect(String(refused.body)).toContain("[redacted]");
      expect(JSON.stringify(refused)).not.toContain(nested);
    } finally {
      harness.setHandler(fakes.handler);
      await agent.close();
    }
  });

  it("without the sibling, a PKCE provider gets the public-client exchange (client_id only)", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeRefresh(rig, "spotify", fakes.issueRefreshToken("spotify"), fakes.clients.spotify.clientId);
    const agent = await connectLocalAgent(rig.url, "pkce-agent");
    const answer = await callApproved(rig, agent, {
      method: "GET",
      host: "api.spotify.com",
      path: "/v1/me",
      item_name: "SPOTIFY_REFRESH",
    });
    expect(answer.origin_status, JSON.stringify(answer)).toBe(200);
    expect(answer.refreshed).toBe(true);
    await agent.close();
  });

  it("http_request's client_id is the public client's ID the exchange sends when none is stored (spec 4.2)", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeRefresh(rig, "spotify", fakes.issueRefreshToken("spotify"));
    const agent = await connectLocalAgent(rig.url, "client-id-agent");
    const call = { method: "GET", host: "api.spotify.com", path: "/v1/me", item_name: "SPOTIFY_REFRESH" };
    // No client ID anywhere: nothing to exchange with.
    const denied = toolPayload(await agent.callTool({ name: "http_request", arguments: call }));
    expect(denied.status).toBe("inject_denied");
    const before = tokenCalls("spotify");
    const answer = await callApproved(rig, agent, { ...call, client_id: fakes.clients.spotify.clientId });
    expect(answer.origin_status, JSON.stringify(answer)).toBe(200);
    expect(answer.refreshed).toBe(true);
    expect(tokenCalls("spotify")).toBe(before + 1);
    expect(fakes.tokenRequests.at(-1)).toMatchObject({
      provider: "spotify",
      grantType: "refresh_token",
      ok: true,
    });
    await agent.close();
  });

  it("http_request's client_id must be the one stored with the client secret, or the call is refused before any approval", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeApp(rig, "spotify");
    await storeRefresh(rig, "spotify", fakes.issueRefreshToken("spotify"));
    const agent = await connectLocalAgent(rig.url, "client-id-mismatch");
    const result = await agent.callTool({
      name: "http_request",
      arguments: { method: "GET", host: "api.spotify.com", path: "/v1/me", client_id: "another-client" },
    });
    expect(result.isError).toBe(true);
    const refused = toolPayload(result) as { error?: { code: string; message: string } };
    expect(refused.error?.code).toBe("invalid_request");
    expect(refused.error?.message).toMatch(/client_id is not the client ID stored with SPOTIFY/);
    const grants = await localOperator<{ grants: unknown[] }>(rig, "GET", "/api/grants");
    expect(grants.json.grants).toEqual([]);
    // The stored one named explicitly is the same as naming none.
    const sent = await callApproved(rig, agent, {
      method: "GET",
      host: "api.spotify.com",
      path: "/v1/me",
      client_id: fakes.clients.spotify.clientId,
    });
    expect(sent.origin_status, JSON.stringify(sent)).toBe(200);
    await agent.close();
  });

  it("without the sibling, another provider answers inject_denied with missing_item, sends nothing and asks no approval", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeRefresh(rig, "github", fakes.issueRefreshToken("github"));
    const agent = await connectLocalAgent(rig.url, "denied-agent");
    const before = fakes.tokenRequests.length;
    const answer = toolPayload(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", host: "api.github.com", path: "/user", item_name: "GITHUB_REFRESH" },
      }),
    );
    answers.push(JSON.stringify(answer));
    expect(answer.status).toBe("inject_denied");
    expect(answer.missing_item).toBe("GITHUB_SECRET");
    expect(fakes.tokenRequests.length).toBe(before);
    expect((await localOperator<{ grants: unknown[] }>(rig, "GET", "/api/grants")).json.grants).toEqual([]);
    await agent.close();
  });

  it("a refresh token the provider refused answers token_exchange_failed with its error code; the approved call is not sent", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeApp(rig, "slack");
    const refreshToken = fakes.issueRefreshToken("slack");
    fakes.revokeRefreshToken(refreshToken);
    await storeRefresh(rig, "slack", refreshToken);
    const agent = await connectLocalAgent(rig.url, "revoked-agent");
    const answer = await callApproved(rig, agent, {
      method: "GET",
      host: "slack.com",
      path: "/api/users.profile.get",
      item_name: "SLACK",
    });
    expect(answer.error).toMatchObject({ code: "token_exchange_failed" });
    expect(String((answer.error as { message: string }).message)).toContain("invalid_refresh_token");
    expect(answer.refreshed).toBeUndefined();
    // Locally the user stores a new refresh token; there is no console Connect to point at.
    expect(String(answer.hint)).toContain("`vault set SLACK_REFRESH --inject refresh`");
    expect(String(answer.hint)).not.toContain("console");
    expect((answer.next as { for_model?: string }).for_model).toBe(answer.hint);
    await agent.close();
  });
});

describe("app credentials only", () => {
  it("a user-only path answers user_connect_required with the local vault set command, and sends nothing", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeApp(rig, "spotify");
    const agent = await connectLocalAgent(rig.url, "connect-agent");
    const before = harness.origin.requests.length;
    const dryRun = toolPayload(
      await agent.callTool({
        name: "http_request",
        arguments: {
          method: "GET",
          host: "api.spotify.com",
          path: "/v1/me",
          item_name: "SPOTIFY",
          dry_run: true,
        },
      }),
    );
    expect(dryRun).toMatchObject({ status: "dry_run", provider: "spotify", inject: "client_credentials" });
    const answer = toolPayload(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", host: "api.spotify.com", path: "/v1/me/playlists", item_name: "SPOTIFY" },
      }),
    );
    answers.push(JSON.stringify(answer));
    expect(answer).toMatchObject({
      status: "user_connect_required",
      provider: "spotify",
      item_name: "SPOTIFY",
      refresh_item_name: "SPOTIFY_REFRESH",
    });
    expect(answer.connect_url).toBeUndefined();
    expect(String(answer.hint)).toContain("vault set SPOTIFY_REFRESH --inject refresh");
    expect(harness.origin.requests.length).toBe(before);
    await agent.close();
  });

  it("spotify: other paths get a client_credentials app token (HTTP Basic at the token URL), reused", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeApp(rig, "spotify");
    const agent = await connectLocalAgent(rig.url, "app-agent");
    const before = tokenCalls("spotify");
    const args = {
      method: "GET",
      host: "api.spotify.com",
      path: "/v1/browse/new-releases",
      item_name: "SPOTIFY",
    };
    const answer = await callApproved(rig, agent, args);
    expect(answer.origin_status, JSON.stringify(answer)).toBe(200);
    expect(answer.refreshed).toBe(true);
    expect(JSON.parse(String(answer.body)).kind).toBe("app");
    expect(fakes.tokenRequests.at(-1)).toEqual({
      provider: "spotify",
      grantType: "client_credentials",
      ok: true,
    });
    await callApproved(rig, agent, args);
    expect(tokenCalls("spotify")).toBe(before + 1);
    // The app credential set again (`vault set`): the token minted with the old one is forgotten.
    await storeApp(rig, "spotify");
    expect((await callApproved(rig, agent, args)).refreshed).toBe(true);
    expect(tokenCalls("spotify")).toBe(before + 2);
    await agent.close();
  });

  it("calls with a minted token already stored do not wait for each other: the token lock is let go before the call is sent", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeApp(rig, "spotify");
    const agent = await connectLocalAgent(rig.url, "parallel-agent");
    const args = {
      method: "GET",
      host: "api.spotify.com",
      path: "/v1/browse/categories",
      item_name: "SPOTIFY",
    };
    // The first call mints the app token and stores it; the 8-hour approval covers the rest.
    expect((await callApproved(rig, agent, args)).origin_status).toBe(200);
    // The origin answers two held calls only once both have arrived (or alone after 5 s).
    const held: (() => void)[] = [];
    harness.setHandler((req, res, recorded) => {
      if (!req.url?.startsWith("/v1/browse/held")) return fakes.handler(req, res, recorded);
      const answer = (how: string) => () => {
        if (res.headersSent) return;
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ how }));
      };
      held.push(answer("together"));
      if (held.length === 2) for (const release of held.splice(0)) release();
      else setTimeout(answer("alone"), 5_000);
    });
    try {
      const both = await Promise.all(
        [1, 2].map(() =>
          agent.callTool({ name: "http_request", arguments: { ...args, path: "/v1/browse/held" } }),
        ),
      );
      const payloads = both.map((answer) => toolPayload(answer));
      expect(
        payloads.map((p) => String(p.body)),
        JSON.stringify(payloads),
      ).toEqual([JSON.stringify({ how: "together" }), JSON.stringify({ how: "together" })]);
    } finally {
      harness.setHandler(fakes.handler);
    }
    await agent.close();
  });

  it("stripe: the platform key is the bearer; google: every path needs a user", async () => {
    const rig = await startLocalVault(harness, { logs });
    await storeApp(rig, "stripe");
    await storeApp(rig, "google");
    const agent = await connectLocalAgent(rig.url, "stripe-agent");
    const stripe = await callApproved(rig, agent, {
      method: "GET",
      host: "api.stripe.com",
      path: "/v1/balance",
      item_name: "STRIPE",
    });
    expect(stripe.origin_status, JSON.stringify(stripe)).toBe(200);
    expect(String(stripe.body)).toContain("Bearer [redacted]");
    const google = toolPayload(
      await agent.callTool({
        name: "http_request",
        arguments: {
          method: "GET",
          host: "www.googleapis.com",
          path: "/drive/v3/files",
          item_name: "GOOGLE",
        },
      }),
    );
    expect(google.status).toBe("user_connect_required");
    await agent.close();
  });
});

describe("canary", () => {
  it("no client secret, refresh token or minted access token appears in an answer, a log line or the database in plaintext", async () => {
    const rig = await startLocalVault(harness, { logs });
    const joined = answers.join("\n");
    const tables = await sql<{ tablename: string }>`
      select tablename from pg_tables where schemaname = 'public'`.execute(rig.vault.database.db);
    const rows: string[] = [];
    for (const { tablename } of tables.rows) {
      const found = await sql<{
        row: string;
      }>`select row_to_json(t)::text as row from ${sql.table(tablename)} t`.execute(rig.vault.database.db);
      rows.push(...found.rows.map((r) => r.row));
    }
    expect(tables.rows.map((t) => t.tablename)).toContain("item_tokens");
    const dump = rows.join("\n");
    expect(fakes.secrets.length).toBeGreaterThan(20);
    for (const secret of fakes.secrets) {
      expect(joined.includes(secret), "an answer").toBe(false);
      expect(logs.text().includes(secret), "a control plane log").toBe(false);
      expect(harness.logs.text().includes(secret), "a proxy log").toBe(false);
      expect(dump.includes(secret), "a database row").toBe(false);
      expect(dump.includes(Buffer.from(secret).toString("hex")), "a database row (hex)").toBe(false);
    }
  });
});
