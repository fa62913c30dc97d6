// Provider connect on the hosted plane (spec 4.3, DECISIONS "Providers"): every provider from
// start to callback against fake providers on loopback TLS (the browser's visit to the provider's
// authorize page is the fake approving the URL the start returned), the four error reasons, the
// single-use state bound to the operator's session, the alias, agent_client_id and need_id, and an
// agent's user-only call working right after. No token reaches an answer, a log or a row in clear.
import { setTimeout as sleep } from "node:timers/promises";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lockItemTokens } from "../src/items/item-tokens.repo.ts";
import { isPostgresRun, refuseAuditRows } from "./database.ts";
import { FAKE_PROVIDER_HOSTS, type FakeProviderId, FakeProviders } from "./fake-providers.ts";
import {
  type Browser,
  connectAgent,
  type HostedHarness,
  operatorWithClient,
  readyOperator,
  startHosted,
  toolAnswer,
} from "./hosted.ts";

let h: HostedHarness;
let url: string;
let fakes: FakeProviders;
const answers: string[] = [];

const HOSTS: Record<FakeProviderId, string[]> = {
  spotify: ["api.spotify.com", "accounts.spotify.com"],
  github: ["api.github.com", "github.com"],
  google: ["www.googleapis.com", "oauth2.googleapis.com"],
  slack: ["slack.com"],
  stripe: ["api.stripe.com", "connect.stripe.com"],
};
const AUTHORIZE: Record<FakeProviderId, string> = {
  spotify: "https://accounts.spotify.com/authorize?",
  github: "https://github.com/login/oauth/authorize?",
  google: "https://accounts.google.com/o/oauth2/v2/auth?",
  slack: "https://slack.com/oauth/v2/authorize?",
  stripe: "https://connect.stripe.com/oauth/authorize?",
};

beforeAll(async () => {
  h = await startHosted({ providerHosts: [...FAKE_PROVIDER_HOSTS] });
  fakes = new FakeProviders();
  h.egress.setHandler(fakes.handler);
  url = await h.app.listen({ host: "127.0.0.1", port: 0 });
}, 60_000);

afterAll(async () => {
  await h?.close();
});

/** Hosted POST /api/items with client_credentials (spec 4.3): the app credential of `provider`. */
async function storeApp(op: Browser, provider: FakeProviderId): Promise<void> {
  const created = await op.request("POST", "/api/items", {
    name: provider.toUpperCase(),
    value: fakes.clients[provider].clientSecret,
    username: fakes.clients[provider].clientId,
    kind: "client_secret",
    inject: "client_credentials",
    environment: "staging",
    allowed_hosts: HOSTS[provider],
  });
  expect(created.statusCode, created.body).toBe(201);
  answers.push(created.body);
}

async function start(op: Browser, provider: string, body: Record<string, unknown> = {}) {
  const started = await op.request("POST", `/api/integrations/${provider}/start`, {
    item_name: provider.toUpperCase(),
    environment: "staging",
    ...body,
  });
  answers.push(started.body);
  return started;
}

async function callback(op: Browser, query: Record<string, string>, path = "/connect/callback") {
  const response = await op.request("GET", `${path}?${new URLSearchParams(query)}`);
  answers.push(response.body, String(response.headers.location));
  return response;
}

describe("connect", () => {
  it.each(["spotify", "github", "google", "slack", "stripe"] as const)(
    "%s: start, the provider's authorize page, the callback; the refresh token is stored sealed as <ITEM>_REFRESH",
    async (provider) => {
      const op = await readyOperator(h);
      await storeApp(op, provider);
      const started = await start(op, provider);
      expect(started.statusCode, started.body).toBe(200);
      const { authorize_url, redirect_uri } = started.json() as {
        authorize_url: string;
        redirect_uri: string;
      };
      expect(authorize_url.startsWith(AUTHORIZE[provider])).toBe(true);
      expect(redirect_uri).toBe("http://localhost:8787/connect/callback");
      if (provider === "google") {
        expect(authorize_url).toContain("access_type=offline");
        expect(authorize_url).toContain("prompt=consent");
      }
      if (provider === "slack") expect(authorize_url).toContain("user_scope=");
      const { code, state } = fakes.authorize(provider, authorize_url);

      const done = await callback(op, { code, state });
      expect(done.statusCode).toBe(303);
      expect(done.headers.location).toBe(`/console#vault?connected=${provider}`);
      const items = (await op.request("GET", "/api/items?environment=staging")).json() as {
        items: { name: string; inject: string; username: string | null }[];
      };
      expect(items.items.find((i) => i.name === `${provider.toUpperCase()}_REFRESH`)).toMatchObject({
        inject: "refresh",
        username: fakes.clients[provider].clientId,
      });

      // The state is single use.
      const again = await callback(op, { code, state });
      expect(again.headers.location).toBe("/console#vault?connect_error=provider&reason=state_expired");
    },
  );

  it("answers each reason: provider_denied, exchange_failed, no_refresh_token, state_expired (another session, unknown state)", async () => {
    const op = await readyOperator(h);
    await storeApp(op, "spotify");
    await storeApp(op, "stripe");

    const denied = fakes.authorize("spotify", (await start(op, "spotify")).json().authorize_url);
    expect((await callback(op, { error: "access_denied", state: denied.state })).headers.location).toBe(
      "/console#vault?connect_error=spotify&reason=provider_denied",
    );

    const wrongCode = fakes.authorize("spotify", (await start(op, "spotify")).json().authorize_url);
    expect((await callback(op, { code: "not-the-code", state: wrongCode.state })).headers.location).toBe(
      "/console#vault?connect_error=spotify&reason=exchange_failed",
    );

    fakes.withoutRefreshToken.add("stripe");
    try {
      const noRefresh = fakes.authorize("stripe", (await start(op, "stripe")).json().authorize_url);
      expect((await callback(op, noRefresh)).headers.location).toBe(
        "/console#vault?connect_error=stripe&reason=no_refresh_token",
      );
    } finally {
      fakes.withoutRefreshToken.delete("stripe");
    }

    // Bound to the session that started it: another operator's browser cannot finish it.
    const stolen = fakes.authorize("spotify", (await start(op, "spotify")).json().authorize_url);
    const other = await readyOperator(h, "other");
    expect((await callback(other, stolen)).headers.location).toBe(
      "/console#vault?connect_error=provider&reason=state_expired",
    );
    expect((await callback(op, { code: "x", state: "unknown-state" })).headers.location).toBe(
      "/console#vault?connect_error=provider&reason=state_expired",
    );
    // Ten minutes.
    const late = fakes.authorize("spotify", (await start(op, "spotify")).json().authorize_url);
    h.clock.advance(10 * 60 * 1000 + 1);
    expect((await callback(op, late)).headers.location).toBe(
      "/console#vault?connect_error=provider&reason=state_expired",
    );
  });

  it("the alias /integrations/:provider/callback finishes a connect too; an unknown provider is 404", async () => {
    const op = await readyOperator(h);
    await storeApp(op, "github");
    const started = await start(op, "github", {
      redirect_uri: "http://localhost:8787/integrations/github/callback",
    });
    const { code, state } = fakes.authorize("github", started.json().authorize_url);
    expect((await callback(op, { code, state }, "/integrations/github/callback")).headers.location).toBe(
      "/console#vault?connected=github",
    );
    expect((await start(op, "myspace")).statusCode).toBe(404);
    expect((await start(op, "github", { redirect_uri: "https://evil.example/cb" })).statusCode).toBe(400);
  });

  it("a signed-out browser is sent to sign-in and nothing is claimed", async () => {
    const response = await h.app.inject({ method: "GET", url: "/connect/callback?code=x&state=y" });
    expect(response.statusCode).toBe(302);
    expect(response.headers.location).toBe("/sign-in");
  });
});

describe("an agent and a connect", () => {
  it("user_connect_required carries connect_url and need_id; a connect with need_id and agent_client_id closes it, and the agent's retry works without asking", async () => {
    const { op, clientId, token } = await operatorWithClient(h, {
      secret: fakes.clients.spotify.clientSecret,
      items: [
        {
          name: "SPOTIFY",
          username: fakes.clients.spotify.clientId,
          kind: "client_secret",
          inject: "client_credentials",
          allowed_hosts: HOSTS.spotify,
        },
        {
          name: "SPOTIFY_TEAM",
          username: fakes.clients.spotify.clientId,
          kind: "client_secret",
          inject: "client_credentials",
          allowed_hosts: HOSTS.spotify,
        },
      ],
      clientName: "music-agent",
    });
    const agent = await connectAgent(url, token, "music-agent");
    const args = { method: "GET", host: "api.spotify.com", path: "/v1/me", item_name: "SPOTIFY" };
    const first = toolAnswer(await agent.callTool({ name: "http_request", arguments: args }));
    answers.push(JSON.stringify(first));
    expect(first).toMatchObject({
      status: "user_connect_required",
      provider: "spotify",
      item_name: "SPOTIFY",
      refresh_item_name: "SPOTIFY_REFRESH",
    });
    expect(String(first.connect_url)).toContain("/collect/");
    expect(typeof first.need_id).toBe("string");
    // The connect recipe: the app to create, this deployment's redirect URI, the scopes.
    const steps = (first.recipe as { steps: string[] }).steps.join("\n");
    expect(steps).toContain("https://developer.spotify.com/dashboard");
    expect(steps).toContain("http://localhost:8787/connect/callback");
    expect(steps).toContain("user-read-private");
    // Spec 3.2: a connect request is not fulfilled with a value.
    const fulfil = await op.request("POST", `/api/need-items/${first.need_id}/fulfill`, { value: "x" });
    expect(fulfil.statusCode).toBe(409);

    // The standing approval goes to a real agent of this organisation: an id no agent has is refused.
    const nobody = await start(op, "spotify", { agent_client_id: "cli_nobody_here", need_id: first.need_id });
    expect(nobody.statusCode, nobody.body).toBe(404);
    expect(nobody.json().error.code).toBe("not_found");
    // The request asks for SPOTIFY_REFRESH: a connect of another credential neither closes it nor
    // approves its agent for an account the agent did not ask for.
    const other = await start(op, "spotify", { item_name: "SPOTIFY_TEAM", need_id: first.need_id });
    expect(other.statusCode, other.body).toBe(404);
    expect(other.json().error.message).toContain("no pending connect request");
    // A connect whose last write fails (its `connected` row refused, as a crash there would) closes
    // nothing and approves nothing: the request still waits, and a second connect finishes it.
    const organisationId = (await op.request("GET", "/api/auth/me")).json().organisation.id as string;
    const restore = await refuseAuditRows(h.plane.database, organisationId, "connected");
    try {
      const failing = await start(op, "spotify", { agent_client_id: clientId, need_id: first.need_id });
      expect(failing.statusCode, failing.body).toBe(200);
      const refused = await callback(op, fakes.authorize("spotify", failing.json().authorize_url));
      expect(refused.headers.location).not.toBe("/console#vault?connected=spotify");
    } finally {
      await restore();
    }
    expect((await op.request("GET", `/api/need-items/${first.need_id}`)).json().need.status).toBe("pending");
    const grantsOfAgent = (await op.request("GET", "/api/grants")).json().grants as { agent_id: string }[];
    expect(grantsOfAgent.filter((g) => g.agent_id === clientId)).toEqual([]);

    const started = await start(op, "spotify", { agent_client_id: clientId, need_id: first.need_id });
    expect(started.statusCode, started.body).toBe(200);
    const done = await callback(op, fakes.authorize("spotify", started.json().authorize_url));
    expect(done.headers.location).toBe("/console#vault?connected=spotify");
    const inbox = (await op.request("GET", "/api/inbox")).json() as { requests?: { need_id: string }[] };
    expect(JSON.stringify(inbox)).not.toContain(String(first.need_id));
    // Spec 3.2: the connect closed the request: its state is `closed` (a secret request is fulfilled).
    const closed = await op.request("GET", `/api/need-items/${first.need_id}`);
    expect(closed.json().need.status).toBe("closed");

    const exchanges = fakes.tokenRequests.length;
    const retried = toolAnswer(await agent.callTool({ name: "http_request", arguments: args }));
    answers.push(JSON.stringify(retried));
    expect(retried.origin_status, JSON.stringify(retried)).toBe(200);
    // The connect's own access token is kept and reused: no second exchange.
    expect(retried.refreshed).toBeUndefined();
    expect(fakes.tokenRequests.length).toBe(exchanges);
    expect(String(retried.body)).toContain("Bearer [redacted]");
    await agent.close();
  });
});

describe("the app credential a start connects with", () => {
  /** Hosted POST /api/items of Spotify's app credential as `name`, or of another inject mode. */
  async function storeSpotify(op: Browser, name: string, inject = "client_credentials"): Promise<void> {
    const created = await op.request("POST", "/api/items", {
      name,
      value: fakes.clients.spotify.clientSecret,
      username: fakes.clients.spotify.clientId,
      kind: "client_secret",
      inject,
      environment: "staging",
      allowed_hosts: HOSTS.spotify,
    });
    expect(created.statusCode, created.body).toBe(201);
    answers.push(created.body);
  }

  it("spec 2.1: the Inbox and collect pages name the request's base (SPOTIFY for SPOTIFY_REFRESH); the client secret stored as SPOTIFY_SECRET is found and SPOTIFY_REFRESH stored", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: fakes.clients.spotify.clientSecret,
      items: [
        {
          name: "SPOTIFY_SECRET",
          username: fakes.clients.spotify.clientId,
          kind: "client_secret",
          inject: "client_credentials",
          allowed_hosts: HOSTS.spotify,
        },
      ],
      clientName: "secret-agent",
    });
    const agent = await connectAgent(url, token, "secret-agent");
    const args = { method: "GET", host: "api.spotify.com", path: "/v1/me", item_name: "SPOTIFY_SECRET" };
    const first = toolAnswer(await agent.callTool({ name: "http_request", arguments: args }));
    answers.push(JSON.stringify(first));
    expect(first).toMatchObject({ status: "user_connect_required", refresh_item_name: "SPOTIFY_REFRESH" });
    // What console-inbox.js and collect.js send: the request's suggested name without _REFRESH.
    const need = (await op.request("GET", `/api/need-items/${first.need_id}`)).json().need as {
      suggested_name: string;
      need_id: string;
    };
    const started = await start(op, "spotify", {
      item_name: need.suggested_name.replace(/_REFRESH$/, ""),
      need_id: first.need_id,
    });
    expect(started.statusCode, started.body).toBe(200);
    const done = await callback(op, fakes.authorize("spotify", started.json().authorize_url));
    expect(done.headers.location).toBe("/console#vault?connected=spotify");
    const items = (await op.request("GET", "/api/items?environment=staging")).json().items as {
      name: string;
      inject: string;
    }[];
    expect(items.find((i) => i.name === "SPOTIFY_REFRESH")).toMatchObject({ inject: "refresh" });
    expect((await op.request("GET", `/api/need-items/${first.need_id}`)).json().need.status).toBe("closed");
    await agent.close();
  });

  it("a start on an item of another inject mode is refused (400 invalid_request); <ITEM>_SECRET of another mode is passed over for <ITEM>", async () => {
    const op = await readyOperator(h);
    await storeSpotify(op, "SPOTIFY_BEARER", "bearer");
    const refused = await start(op, "spotify", { item_name: "SPOTIFY_BEARER" });
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json().error.code).toBe("invalid_request");
    expect(refused.json().error.message).toContain("inject client_credentials");

    await storeSpotify(op, "SPOTIFY_SECRET", "bearer");
    await storeSpotify(op, "SPOTIFY");
    const started = await start(op, "spotify", { item_name: "SPOTIFY_SECRET" });
    expect(started.statusCode, started.body).toBe(200);
    expect(
      (await callback(op, fakes.authorize("spotify", started.json().authorize_url))).headers.location,
    ).toBe("/console#vault?connected=spotify");
  });

  it("spec 4.3 client_id: the client ID stored with the secret, or refused (the exchange authenticates as that client)", async () => {
    const op = await readyOperator(h);
    await storeApp(op, "github");
    const other = await start(op, "github", { client_id: "another-client" });
    expect(other.statusCode, other.body).toBe(400);
    expect(other.json().error.code).toBe("invalid_request");
    expect(other.json().error.message).toContain("client_id");
    const same = await start(op, "github", { client_id: fakes.clients.github.clientId });
    expect(same.statusCode, same.body).toBe(200);
    const authorizeUrl = new URL(same.json().authorize_url);
    expect(authorizeUrl.searchParams.get("client_id")).toBe(fakes.clients.github.clientId);
    expect((await callback(op, fakes.authorize("github", authorizeUrl.href))).headers.location).toBe(
      "/console#vault?connected=github",
    );
  });

  it("an exchange whose ticket the proxy refuses outright (no answer to read) is exchange_failed with a connect_failed row", async () => {
    const op = await readyOperator(h);
    await storeApp(op, "spotify");
    const started = await start(op, "spotify");
    expect(started.statusCode, started.body).toBe(200);
    // A verifier past the ticket's 2 MiB: the proxy refuses the ticket itself (a gRPC error, as a
    // replica gone would be), so Execute throws rather than answering the provider's refusal.
    const organisationId = (await op.request("GET", "/api/auth/me")).json().organisation.id as string;
    await sql`update connect_states set sealed_verifier = ${Buffer.alloc(2 * 1024 * 1024 + 1)}
      where organisation_id = ${organisationId} and used_at is null`.execute(h.plane.database.db);
    const done = await callback(op, fakes.authorize("spotify", started.json().authorize_url));
    expect(done.headers.location).toBe("/console#vault?connect_error=spotify&reason=exchange_failed");
    const events = (await op.request("GET", "/api/audit?action=connect_failed")).json().events as {
      item_name: string;
      detail: Record<string, unknown>;
    }[];
    expect(events).toEqual([
      expect.objectContaining({ item_name: "SPOTIFY", detail: { provider: "spotify" } }),
    ]);
  });
});

describe.runIf(isPostgresRun())("two connects of one item at once", () => {
  it("a connect whose refresh token another connect replaced while it waited for the item's token lock stores no access token beside the other's", async () => {
    const op = await readyOperator(h);
    await storeApp(op, "spotify");
    const authorized = async () =>
      fakes.authorize("spotify", (await start(op, "spotify")).json().authorize_url);
    expect((await callback(op, await authorized())).headers.location).toBe(
      "/console#vault?connected=spotify",
    );
    const db = h.plane.database.db;
    const organisationId = (await op.request("GET", "/api/auth/me")).json().organisation.id as string;
    const refreshItem = () =>
      db
        .selectFrom("items")
        .select(["id", "sealed_value"])
        .where("organisation_id", "=", organisationId)
        .where("name", "=", "SPOTIFY_REFRESH")
        .executeTakeFirstOrThrow();
    const first = await refreshItem();
    const second = await authorized();
    // Stand-ins for a third connect that lands between the second one's two writes: its refresh
    // token and access token, written while this test holds the item's token lock.
    const otherRefresh = Buffer.from("the sealed refresh token of another connect");
    const otherAccess = Buffer.from("the sealed access token of another connect");
    let finishing: ReturnType<typeof callback> | undefined;
    await db.transaction().execute(async (trx) => {
      await lockItemTokens(trx, first.id);
      finishing = callback(op, second);
      // The second connect has stored its refresh token once the stored value moves; it then
      // waits for the lock before storing its access token.
      while (Buffer.from((await refreshItem()).sealed_value).equals(Buffer.from(first.sealed_value))) {
        await sleep(20);
      }
      await trx.updateTable("items").set({ sealed_value: otherRefresh }).where("id", "=", first.id).execute();
      const token = {
        sealed_value: otherAccess,
        sealing_key_id: "kid-other",
        token_last4: "othr",
        scope: "",
        expires_at: new Date(Date.now() + 3_600_000),
      };
      await trx
        .insertInto("item_tokens")
        .values({ item_id: first.id, organisation_id: organisationId, ...token })
        .onConflict((c) => c.column("item_id").doUpdateSet(token))
        .execute();
    });
    expect((await finishing)?.headers.location).toBe("/console#vault?connected=spotify");
    const kept = await db
      .selectFrom("item_tokens")
      .select("sealed_value")
      .where("item_id", "=", first.id)
      .executeTakeFirstOrThrow();
    expect(Buffer.from(kept.sealed_value).equals(otherAccess)).toBe(true);
    expect(Buffer.from((await refreshItem()).sealed_value).equals(otherRefresh)).toBe(true);
  });
});

describe("setup with provider", () => {
  it("need_item (nothing stored) -> user_connect_required (app secret stored) -> ready after a connect with a standing approval", async () => {
    const { op, clientId, token } = await operatorWithClient(h, {
      secret: "unused-value-123456",
      items: [],
      clientName: "setup-agent",
    });
    const agent = await connectAgent(url, token, "setup-agent");
    const setup = async () => {
      const answer = toolAnswer(await agent.callTool({ name: "setup", arguments: { provider: "github" } }));
      answers.push(JSON.stringify(answer));
      return answer;
    };
    const nothing = await setup();
    expect(nothing.status).toBe("need_item");
    expect(nothing.recipe).toBeDefined();

    await storeApp(op, "github");
    const appOnly = await setup();
    expect(appOnly).toMatchObject({
      status: "user_connect_required",
      provider: "github",
      item_name: "GITHUB",
    });
    expect(String(appOnly.connect_url)).toContain("/collect/");

    const started = await start(op, "github", { agent_client_id: clientId, need_id: appOnly.need_id });
    expect(
      (await callback(op, fakes.authorize("github", started.json().authorize_url))).headers.location,
    ).toBe("/console#vault?connected=github");
    const ready = await setup();
    expect(ready.status, JSON.stringify(ready)).toBe("ready");
    expect((ready.item as { name: string }).name).toBe("GITHUB");
    await agent.close();
  });
});

describe("canary", () => {
  it("no client secret, code, refresh or access token appears in an answer, a log or a row in clear", async () => {
    const database = h.plane.database.db;
    const tables = await sql<{ tablename: string }>`
      select tablename from pg_tables where schemaname = 'public'`.execute(database);
    const rows: string[] = [];
    for (const { tablename } of tables.rows) {
      const found = await sql<{
        row: string;
      }>`select row_to_json(t)::text as row from ${sql.table(tablename)} t`.execute(database);
      rows.push(...found.rows.map((r) => r.row));
    }
    expect(tables.rows.map((t) => t.tablename)).toContain("connect_states");
    const dump = rows.join("\n");
    const joined = answers.join("\n");
    expect(fakes.secrets.length).toBeGreaterThan(15);
    for (const secret of fakes.secrets) {
      expect(joined.includes(secret), "an answer").toBe(false);
      expect(h.logs.text().includes(secret), "a control plane log").toBe(false);
      expect(h.egress.logs.text().includes(secret), "a proxy log").toBe(false);
      expect(dump.includes(secret), "a database row").toBe(false);
    }
  });
});
