// A user account connected beside an app credential (`<ITEM>_REFRESH`, spec 2.1) is used only by
// an agent allowed on it (spec 4.2 user_connect_required: "after the operator connects and allows
// the agent"; POST /api/integrations/:provider/start approves its agent_client_id alone), hosted,
// through the official MCP SDK client and the real proxy to a fake Spotify on loopback TLS. An
// approval or allow rule on the app credential keeps covering the app's own calls (its app token),
// never the user's account. And a connect over an existing `<ITEM>_REFRESH` widens it as an edit
// would: its whole-credential standing approvals end, audited.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGrantsRepo } from "../src/grants/grants.repo.ts";
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

const call = async (agent: Client, args: Record<string, unknown>): Promise<ToolAnswer> =>
  toolAnswer(await agent.callTool({ name: "http_request", arguments: { method: "GET", ...args } }));

/** A call the user's account answers, and one the app token answers (fake Spotify's `kind`). */
const ME = { host: "api.spotify.com", path: "/v1/me", item_name: "SPOTIFY" };
const ALBUM = { host: "api.spotify.com", path: "/v1/albums/x", item_name: "SPOTIFY" };

const kindOf = (answer: ToolAnswer) => JSON.parse(String(answer.body)).kind as string;

/** The Spotify app credential stored, agent A (the operator's first client) and agent B. */
async function setUp() {
  const { op, clientId, token } = await operatorWithClient(h, {
    secret: fakes.clients.spotify.clientSecret,
    items: [
      {
        name: "SPOTIFY",
        username: fakes.clients.spotify.clientId,
        kind: "client_secret",
        inject: "client_credentials",
        allowed_hosts: SPOTIFY_HOSTS,
      },
    ],
    clientName: "agent-a",
  });
  const issued = await op.request("POST", "/api/clients/model", { name: "agent-b", environment: "staging" });
  expect(issued.statusCode, issued.body).toBe(201);
  return {
    op,
    agentAId: clientId,
    agentA: await connectAgent(url, token, "agent-a"),
    agentB: await connectAgent(url, issued.json().token as string, "agent-b"),
  };
}

async function approve(op: Browser, grantId: unknown, policy = "item_standing") {
  const approved = await op.request("POST", `/api/grants/${grantId}/approve`, { policy });
  expect(approved.statusCode, approved.body).toBe(200);
}

/** The operator connects the user's Spotify account (as SPOTIFY_REFRESH), approving `agentClientId`. */
async function connectSpotify(op: Browser, agentClientId?: string) {
  const started = await op.request("POST", "/api/integrations/spotify/start", {
    item_name: "SPOTIFY",
    environment: "staging",
    ...(agentClientId ? { agent_client_id: agentClientId } : {}),
  });
  expect(started.statusCode, started.body).toBe(200);
  const { code, state } = fakes.authorize("spotify", started.json().authorize_url);
  const done = await op.request("GET", `/connect/callback?${new URLSearchParams({ code, state })}`);
  expect(done.headers.location).toBe("/console#vault?connected=spotify");
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

/** Requests that reached the fake Spotify's API host. */
const apiCalls = () =>
  h.egress.origin.requests.filter((r) => String(r.headers.host).startsWith("api.spotify.com")).length;

describe("an approval of the app credential does not cover a user account connected later", () => {
  it("agent B, approved on SPOTIFY only, is asked for SPOTIFY_REFRESH on /v1/me after a connect for agent A; its catalogue calls keep the app token", async () => {
    const { op, agentAId, agentA, agentB } = await setUp();
    // B reads the catalogue with the app credential, approved for good.
    const asked = await call(agentB, ALBUM);
    expect(asked.status).toBe("pending");
    await approve(op, asked.grant_id);
    expect(kindOf(await call(agentB, ALBUM))).toBe("app");
    expect((await call(agentB, ME)).status).toBe("user_connect_required");

    await connectSpotify(op, agentAId);
    // A, whom the connect allowed, reads the user's account by name and by host.
    const asA = await call(agentA, ME);
    expect(asA.origin_status, JSON.stringify(asA)).toBe(200);
    expect(kindOf(asA)).toBe("user");
    expect(kindOf(await call(agentA, { host: "api.spotify.com", path: "/v1/me/playlists" }))).toBe("user");

    // B is not: the call asks for the account, exactly as a call naming SPOTIFY_REFRESH would.
    const before = apiCalls();
    for (const args of [ME, { host: "api.spotify.com", path: "/v1/me" }]) {
      const refused = await call(agentB, args);
      expect(refused, JSON.stringify(refused)).toMatchObject({
        status: "pending",
        item_name: "SPOTIFY_REFRESH",
      });
      expect(refused.origin_status).toBeUndefined();
      expect(JSON.stringify(refused)).not.toContain('"kind":"user"');
    }
    expect((await call(agentB, { ...ME, dry_run: true })).would_send).toBe(false);
    expect(apiCalls()).toBe(before);
    // B's catalogue calls still go, with the app token (not the user's), by name and by host.
    const album = await call(agentB, ALBUM);
    expect(album.origin_status, JSON.stringify(album)).toBe(200);
    expect(kindOf(album)).toBe("app");
    expect(kindOf(await call(agentB, { host: "api.spotify.com", path: "/v1/albums/y" }))).toBe("app");

    // Once the operator approves B on the account, B reads it.
    const pending = await call(agentB, ME);
    expect(pending.item_name).toBe("SPOTIFY_REFRESH");
    await approve(op, pending.grant_id);
    const asB = await call(agentB, ME);
    expect(asB.origin_status, JSON.stringify(asB)).toBe(200);
    expect(kindOf(asB)).toBe("user");
    // Its catalogue calls now go as the user too, as A's do (the account's approval covers them).
    expect(kindOf(await call(agentB, ALBUM))).toBe("user");
    const audit = (await op.request("GET", "/api/audit")).json().events as {
      action: string;
      item_name: string | null;
      actor: string;
    }[];
    expect(audit.filter((e) => e.action === "http_request" && e.item_name === "SPOTIFY_REFRESH").length).toBe(
      4,
    );
    await agentA.close();
    await agentB.close();
  });

  it("an allow rule on SPOTIFY sends catalogue calls with the app token, never the user's account; one on SPOTIFY_REFRESH does", async () => {
    const { op, agentA, agentB } = await setUp();
    await connectSpotify(op);
    await savePolicy(op, [{ id: "app-ok", effect: "allow", match: { items: ["SPOTIFY"] } }]);
    const album = await call(agentB, ALBUM);
    expect(album, JSON.stringify(album)).toMatchObject({ origin_status: 200, policy: { rule_id: "app-ok" } });
    expect(kindOf(album)).toBe("app");
    const before = apiCalls();
    const me = await call(agentB, ME);
    expect(me, JSON.stringify(me)).toMatchObject({ status: "pending", item_name: "SPOTIFY_REFRESH" });
    expect(apiCalls()).toBe(before);

    await savePolicy(op, [{ id: "user-ok", effect: "allow", match: { items: ["SPOTIFY_REFRESH"] } }]);
    const allowed = await call(agentB, ME);
    expect(allowed, JSON.stringify(allowed)).toMatchObject({
      origin_status: 200,
      policy: { rule_id: "user-ok" },
    });
    expect(kindOf(allowed)).toBe("user");
    await agentA.close();
    await agentB.close();
  });

  it("a retry naming SPOTIFY of a call whose one-call approval on SPOTIFY_REFRESH is held is answered held, not sent with the app token", async () => {
    const { op, agentAId, agentA, agentB } = await setUp();
    const asked = await call(agentB, ALBUM);
    await approve(op, asked.grant_id);
    await connectSpotify(op, agentAId);
    // B asks for this one call with the user's account, and the operator approves it once.
    const onAccount = await call(agentB, { ...ALBUM, item_name: "SPOTIFY_REFRESH" });
    expect(onAccount.status, JSON.stringify(onAccount)).toBe("pending");
    const grantId = onAccount.grant_id as string;
    await approve(op, grantId, "prompt");
    // Its first try as calls.service.ts leaves a held one: spent, its ticket named, marked held.
    const repo = createGrantsRepo(h.plane.database.db);
    const ticket = {
      id: "tkt_held_account_try",
      expiresAt: new Date(Date.now() + 11_500),
      isStoreShared: true,
    };
    expect(await repo.updateGrantConsumed(grantId, new Date(), ticket)).toBe(true);
    await repo.updateGrantHeld(grantId, "tkt_held_account_try", new Date(Date.now() + 90_000));
    const before = apiCalls();

    // The retry names the app credential, which B may use for the catalogue: still held.
    const retried = await call(agentB, ALBUM);
    expect(retried, JSON.stringify(retried)).toMatchObject({ grant_id: grantId, approval: "held" });
    expect(apiCalls()).toBe(before);
    await repo.updateGrantCallSettled(grantId, "tkt_held_account_try");
    await repo.updateGrantHoldEnded(grantId);
    await agentA.close();
    await agentB.close();
  });
});

describe("a connect over an existing <ITEM>_REFRESH is judged as an edit", () => {
  type Grant = { grant_id: string; agent_id: string; item_name?: string; policy: string; status: string };
  type Event = {
    action: string;
    item_name: string | null;
    reason: string | null;
    detail: Record<string, unknown>;
  };
  const grantsOf = async (op: Browser) => (await op.request("GET", "/api/grants")).json().grants as Grant[];
  const eventsOf = async (op: Browser) =>
    (await op.request("GET", "/api/audit?item_name=SPOTIFY_REFRESH")).json().events as Event[];

  it("a wider reach (another inject mode, the token host added) ends its whole-credential standing approvals, audited; a connect again leaves them and its folder", async () => {
    const { op, agentAId, agentA, agentB } = await setUp();
    // Stored by hand as a bearer for the API host only; agent B approved on it for good.
    const stored = await op.request("POST", "/api/items", {
      name: "SPOTIFY_REFRESH",
      value: "some-narrow-bearer-token-1234",
      environment: "staging",
      inject: "bearer",
      allowed_hosts: ["api.spotify.com"],
    });
    expect(stored.statusCode, stored.body).toBe(201);
    const asked = await call(agentB, { ...ALBUM, item_name: "SPOTIFY_REFRESH" });
    expect(asked.status).toBe("pending");
    await approve(op, asked.grant_id);
    const approvedB = (await grantsOf(op)).find((g) => g.grant_id === asked.grant_id);
    expect(approvedB).toMatchObject({ status: "active", policy: "item_standing" });

    // The connect makes it an inject refresh item for both Spotify hosts, approving agent A.
    await connectSpotify(op, agentAId);
    const after = await grantsOf(op);
    expect(after.find((g) => g.grant_id === asked.grant_id)?.status).toBe("revoked");
    const revoked = (await eventsOf(op)).filter((e) => e.action === "grant_revoked");
    expect(revoked).toEqual([
      expect.objectContaining({
        item_name: "SPOTIFY_REFRESH",
        reason: "credential_widened",
        detail: expect.objectContaining({ grant_id: asked.grant_id, agent_id: expect.any(String) }),
      }),
    ]);
    // The approval the connect writes for its agent comes after, and stays.
    const ofA = after.filter((g) => g.agent_id === agentAId && g.item_name === "SPOTIFY_REFRESH");
    expect(ofA.map((g) => g.status)).toEqual(["active"]);
    expect((await call(agentB, ME)).status).toBe("pending");
    expect(kindOf(await call(agentA, ME))).toBe("user");

    // Put in a folder, then connected again, reaching no further: it stays in its folder, A's
    // approval stays, nothing more is revoked.
    const listed = (await op.request("GET", "/api/items?environment=staging")).json().items as {
      id: string;
      name: string;
      folder_name: string | null;
    }[];
    const refreshId = listed.find((i) => i.name === "SPOTIFY_REFRESH")?.id;
    const moved = await op.request("POST", `/api/items/${refreshId}/meta`, { folder_name: "music" });
    expect(moved.statusCode, moved.body).toBe(200);
    await connectSpotify(op);
    const relisted = (await op.request("GET", "/api/items?environment=staging")).json()
      .items as typeof listed;
    expect(relisted.find((i) => i.name === "SPOTIFY_REFRESH")).toMatchObject({
      id: refreshId,
      folder_name: "music",
    });
    const again = await grantsOf(op);
    expect(again.find((g) => g.grant_id === ofA[0]?.grant_id)?.status).toBe("active");
    expect((await eventsOf(op)).filter((e) => e.action === "grant_revoked")).toHaveLength(1);
    expect(kindOf(await call(agentA, ME))).toBe("user");
    await agentA.close();
    await agentB.close();
  });
});
