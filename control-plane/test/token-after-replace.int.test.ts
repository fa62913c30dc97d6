// An access token minted with a refresh token that a replace by name took away while the exchange
// ran (a reconnect as another account, a local `vault set`) is never cached: the replace takes no
// token lock, so the call's own store checks, under its transaction, that the value it spent is
// still the stored one. Without that, every call until the token expired acted as the old account.
// The race is PostgreSQL's: PGlite runs one transaction at a time, so there the replace waits for
// the call and drops its token afterwards (the test passes there too, without a race).
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isPostgresRun } from "./database.ts";
import { type EgressHarness, LogCapture, startEgressHarness } from "./egress-harness.ts";
import { FAKE_PROVIDER_HOSTS, FakeProviders } from "./fake-providers.ts";
import { connectLocalAgent, type LocalRig, localOperator, startLocalVault, toolPayload } from "./local.ts";

let harness: EgressHarness;
let fakes: FakeProviders;
const logs = new LogCapture();

type RecordedRequest = Parameters<FakeProviders["handler"]>[2];

beforeAll(async () => {
  harness = await startEgressHarness({ providerHosts: [...FAKE_PROVIDER_HOSTS] });
  fakes = new FakeProviders();
  harness.setHandler(fakes.handler);
}, 60_000);

afterAll(async () => {
  await harness?.close();
});

/**
 * Spotify's fakes, with whose account each token is: a refresh token is its user's (a client
 * secret its app's), and so are the access and rotated refresh tokens its exchange answers; the
 * API notes whose token it was sent.
 * `holdNextExchange` keeps the next token request unanswered until `release` is called.
 */
function accountsOf(fake: FakeProviders) {
  const users = new Map<string, string>();
  const apiUsers: (string | undefined)[] = [];
  let held: { resolveHeld: () => void; answer?: () => void } | undefined;

  const answerToken = (req: IncomingMessage, res: ServerResponse, recorded: RecordedRequest) => {
    // A refresh token's user, or (client credentials) the app whose secret is in the Basic header.
    const form = new URLSearchParams(recorded.body.toString("utf8"));
    const basic = String(recorded.headers.authorization ?? "").replace(/^Basic /, "");
    const appSecret = Buffer.from(basic, "base64").toString("utf8").split(":")[1] ?? "";
    const user = users.get(form.get("refresh_token") ?? appSecret);
    const end = res.end.bind(res);
    res.end = ((chunk: unknown, ...rest: unknown[]) => {
      const answer = JSON.parse(String(chunk)) as { access_token?: string; refresh_token?: string };
      if (user && answer.access_token) users.set(answer.access_token, user);
      if (user && answer.refresh_token) users.set(answer.refresh_token, user);
      return (end as (...a: unknown[]) => ServerResponse)(chunk, ...rest);
    }) as typeof res.end;
    fake.handler(req, res, recorded);
  };

  harness.setHandler((req, res, recorded) => {
    const host = String(req.headers.host ?? "").replace(/:\d+$/, "");
    if (host === "accounts.spotify.com") {
      if (held && !held.answer) {
        held.answer = () => answerToken(req, res, recorded);
        held.resolveHeld();
        return;
      }
      answerToken(req, res, recorded);
      return;
    }
    if (host === "api.spotify.com") {
      const bearer = String(recorded.headers.authorization ?? "").replace(/^Bearer /, "");
      apiUsers.push(users.get(bearer));
    }
    fake.handler(req, res, recorded);
  });

  return {
    apiUsers,
    /** `secret` is the client secret of the app `user`. */
    nameApp(secret: string, user: string): void {
      users.set(secret, user);
    },
    issueRefreshToken(user: string): string {
      const value = fake.issueRefreshToken("spotify");
      users.set(value, user);
      return value;
    },
    /** Resolves once the next token request has arrived and is being held. */
    holdNextExchange(): { isHeld: Promise<void>; release: () => void } {
      let resolveHeld = () => {};
      const isHeld = new Promise<void>((resolve) => {
        resolveHeld = resolve;
      });
      const hold: NonNullable<typeof held> = { resolveHeld };
      held = hold;
      return {
        isHeld,
        release: () => {
          held = undefined;
          hold.answer?.();
        },
      };
    },
  };
}

async function storeRefresh(rig: LocalRig, refreshToken: string): Promise<void> {
  const stored = await localOperator(rig, "POST", "/api/items", {
    name: "SPOTIFY_REFRESH",
    value: refreshToken,
    inject: "refresh",
    allowed_hosts: ["api.spotify.com", "accounts.spotify.com"],
  });
  expect([200, 201], JSON.stringify(stored.json)).toContain(stored.status);
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

describe("a refresh token replaced while a call exchanges it", () => {
  it("the access token minted from the old account is not kept: the next call exchanges the new refresh token and acts as the new account", async () => {
    const accounts = accountsOf(fakes);
    try {
      const rig = await startLocalVault(harness, { logs });
      const app = fakes.clients.spotify;
      const stored = await localOperator(rig, "POST", "/api/items", {
        name: "SPOTIFY",
        value: app.clientSecret,
        username: app.clientId,
        inject: "client_credentials",
        allowed_hosts: ["api.spotify.com", "accounts.spotify.com"],
      });
      expect(stored.status, JSON.stringify(stored.json)).toBe(201);
      await storeRefresh(rig, accounts.issueRefreshToken("A"));
      const agent = await connectLocalAgent(rig.url, "replace-race-agent");
      const me = { method: "GET", host: "api.spotify.com", path: "/v1/me", item_name: "SPOTIFY" };

      // The call exchanges user A's refresh token; the token endpoint holds its answer.
      const hold = accounts.holdNextExchange();
      const calling = callApproved(rig, agent, me);
      await hold.isHeld;
      // Meanwhile the operator connects user B's account over the same item. On PostgreSQL it
      // commits before the exchange answers; on PGlite it waits for the call's transaction.
      const replacing = storeRefresh(rig, accounts.issueRefreshToken("B"));
      if (isPostgresRun()) await replacing;
      hold.release();
      const first = await calling;
      await replacing;
      // The call itself went as user A (the exchange had begun): its answer is handed back as it is.
      expect(first.origin_status, JSON.stringify(first)).toBe(200);
      expect(accounts.apiUsers.at(-1)).toBe("A");

      // Nothing minted from A's refresh token is kept beside B's.
      const kept = await rig.vault.database.db
        .selectFrom("item_tokens")
        .select("item_id")
        .where("organisation_id", "=", rig.vault.organisationId)
        .execute();
      const refreshItem = await rig.vault.database.db
        .selectFrom("items")
        .select("id")
        .where("name", "=", "SPOTIFY_REFRESH")
        .where("organisation_id", "=", rig.vault.organisationId)
        .executeTakeFirstOrThrow();
      expect(kept.map((row) => row.item_id)).not.toContain(refreshItem.id);

      const exchangesBefore = fakes.tokenRequests.length;
      const next = await callApproved(rig, agent, me);
      expect(next.origin_status, JSON.stringify(next)).toBe(200);
      expect(next.refreshed).toBe(true);
      expect(fakes.tokenRequests.length).toBe(exchangesBefore + 1);
      expect(accounts.apiUsers.at(-1)).toBe("B");
      await agent.close();
    } finally {
      harness.setHandler(fakes.handler);
    }
  }, 60_000);

  it("a client secret replaced while a client_credentials call exchanges it: the app token minted with the old secret is not kept", async () => {
    // Its own fakes: the app's credentials change at the provider during the test.
    const provider = new FakeProviders();
    const accounts = accountsOf(provider);
    try {
      const rig = await startLocalVault(harness, { logs });
      const oldApp = { ...provider.clients.spotify };
      accounts.nameApp(oldApp.clientSecret, "app-1");
      const storeApp = (app: { clientId: string; clientSecret: string }) =>
        localOperator(rig, "POST", "/api/items", {
          name: "SPOTIFY",
          value: app.clientSecret,
          username: app.clientId,
          inject: "client_credentials",
          allowed_hosts: ["api.spotify.com", "accounts.spotify.com"],
        });
      expect((await storeApp(oldApp)).status).toBe(201);
      const agent = await connectLocalAgent(rig.url, "secret-race-agent");
      const releases = {
        method: "GET",
        host: "api.spotify.com",
        path: "/v1/browse/new-releases",
        item_name: "SPOTIFY",
      };

      const hold = accounts.holdNextExchange();
      const calling = callApproved(rig, agent, releases);
      await hold.isHeld;
      // The operator stores another app's credentials over SPOTIFY while the exchange is out.
      const newApp = { clientId: "spotify-client-other", clientSecret: "spotify_cs_other_app_0123456789" };
      provider.secrets.push(newApp.clientSecret);
      accounts.nameApp(newApp.clientSecret, "app-2");
      const replacing = storeApp(newApp);
      if (isPostgresRun()) expect((await replacing).status).toBe(201);
      hold.release();
      const first = await calling;
      expect((await replacing).status).toBe(201);
      expect(first.origin_status, JSON.stringify(first)).toBe(200);
      expect(accounts.apiUsers.at(-1)).toBe("app-1");
      // From now on the provider knows the new app (the old one's tokens still work there).
      provider.clients.spotify = newApp;

      const next = await callApproved(rig, agent, releases);
      expect(next.origin_status, JSON.stringify(next)).toBe(200);
      expect(next.refreshed).toBe(true);
      expect(accounts.apiUsers.at(-1)).toBe("app-2");
      await agent.close();
    } finally {
      harness.setHandler(fakes.handler);
    }
  }, 60_000);
});
