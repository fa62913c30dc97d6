// The hosted operator JSON API to the letter of spec 4.3, 5 rule 5, 6 and 8: another organisation's
// ids, the audit's auto_approved rows, the access snapshot's fields, need requests' names and
// recipes, and value limits on every route that takes a value.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGrantsRepo } from "../src/grants/grants.repo.ts";
import { connectAgent, type HostedHarness, listenHosted, operatorWithClient, toolAnswer } from "./hosted.ts";

const SECRET = "sk_live_hostedapi_canary_5150";
let h: HostedHarness;
let url: string;

beforeAll(async () => {
  ({ h, url } = await listenHosted((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  }));
}, 60_000);
afterAll(async () => {
  await h.close();
});

async function setUp() {
  return operatorWithClient(h, {
    secret: SECRET,
    items: [{ name: "API_KEY", folder_name: "apis" }],
    clientName: "billing agent",
  });
}

/** POST /api/grants/request as the model client (spec 5: a model token may call it). */
const requestAsModel = (token: string, body: Record<string, unknown>) =>
  h.app.inject({
    method: "POST",
    url: "/api/grants/request",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    payload: JSON.stringify(body),
  });

describe("another organisation's grant ids (spec 5 rule 5)", () => {
  it("are 404 to approve-by-code naming them, which never counts against that approval's code", async () => {
    const mine = await setUp();
    const theirs = await setUp();
    const pending = (await requestAsModel(mine.token, { item_name: "API_KEY" })).json();
    expect(pending.grant.status).toBe("pending");
    const wrong = pending.approval_code === "00000000" ? "11111111" : "00000000";
    for (let i = 0; i < 5; i++) {
      const attempt = await theirs.op.request("POST", "/api/grants/approve-by-code", {
        code: wrong,
        grant_id: pending.grant.grant_id,
      });
      expect(attempt.statusCode).toBe(404);
    }
    const approved = await mine.op.request("POST", "/api/grants/approve-by-code", {
      code: pending.approval_code,
    });
    expect(approved.statusCode, approved.body).toBe(200);
  });

  it("are 404 to a folder_standing approval, whoever asks and whatever confirm_name says", async () => {
    const mine = await setUp();
    const theirs = await setUp();
    const pending = (await requestAsModel(mine.token, { item_name: "API_KEY" })).json();
    for (const id of [pending.grant.grant_id, "grt_doesnotexist0000"]) {
      const attempt = await theirs.op.request("POST", `/api/grants/${id}/approve`, {
        policy: "folder_standing",
        confirm_name: "apis",
      });
      expect(attempt.statusCode, attempt.body).toBe(404);
    }
    const grants = (await mine.op.request("GET", "/api/grants")).json().grants;
    expect(grants[0]).toMatchObject({ grant_id: pending.grant.grant_id, status: "pending" });
  });
});

describe("the audit (spec 4.3, 6)", () => {
  it("records auto_approved with the item name and host when a standing approval covers a request", async () => {
    const { op, token } = await setUp();
    const pending = (await requestAsModel(token, { item_name: "API_KEY" })).json();
    const approved = await op.request("POST", `/api/grants/${pending.grant.grant_id}/approve`, {
      policy: "item_standing",
    });
    expect(approved.statusCode, approved.body).toBe(200);
    const covered = await requestAsModel(token, {
      item_name: "API_KEY",
      host: "api.latch.test",
      method: "GET",
      path: "/v1/x",
    });
    expect(covered.statusCode).toBe(200);
    expect(covered.json().grant).toMatchObject({ grant_id: pending.grant.grant_id, status: "active" });
    const events = (await op.request("GET", "/api/audit?item_name=API_KEY")).json().events;
    expect(events[0]).toMatchObject({
      action: "auto_approved",
      item_name: "API_KEY",
      host: "api.latch.test",
    });
    expect(JSON.stringify(events)).not.toContain(SECRET);
  });

  it("records a pending request refused as grant_denied, an approval withdrawn as grant_revoked", async () => {
    const { op, token } = await setUp();
    const denied = (await requestAsModel(token, { item_name: "API_KEY" })).json().grant.grant_id;
    expect((await op.request("POST", `/api/grants/${denied}/revoke`)).statusCode).toBe(200);
    const approved = (await requestAsModel(token, { item_name: "API_KEY" })).json().grant.grant_id;
    await op.request("POST", `/api/grants/${approved}/approve`, { policy: "session" });
    expect((await op.request("POST", `/api/grants/${approved}/revoke`)).statusCode).toBe(200);
    const events = (await op.request("GET", "/api/audit?item_name=API_KEY")).json().events;
    const actionOf = (id: string) =>
      events
        .filter((e: { detail: { grant_id?: string } }) => e.detail.grant_id === id)
        .map((e: { action: string }) => e.action);
    expect(actionOf(denied)).toContain("grant_denied");
    expect(actionOf(denied)).not.toContain("grant_revoked");
    expect(actionOf(approved)).toContain("grant_revoked");
    // Neither can be revoked again.
    expect((await op.request("POST", `/api/grants/${denied}/revoke`)).statusCode).toBe(409);
  });

  it("revokes a one-call approval spent on a call whose outcome is not known yet, so it never comes back", async () => {
    // The proxy did not answer: the approval is consumed and held until a fence says whether the
    // request left. The operator revokes it meanwhile; a late fence that wins must not restore it.
    const { op, token } = await setUp();
    const id = (await requestAsModel(token, { item_name: "API_KEY" })).json().grant.grant_id as string;
    await op.request("POST", `/api/grants/${id}/approve`, { policy: "prompt" });
    const grants = createGrantsRepo(h.plane.database.db);
    expect(await grants.updateGrantConsumed(id, new Date())).toBe(true);
    const revoked = await op.request("POST", `/api/grants/${id}/revoke`);
    expect(revoked.statusCode, revoked.body).toBe(200);
    expect(revoked.json().grant.status).toBe("revoked");
    await grants.updateGrantRestored(id, null);
    const listed = (await op.request("GET", "/api/grants")).json().grants as {
      grant_id: string;
      status: string;
    }[];
    expect(listed.find((g) => g.grant_id === id)?.status).toBe("revoked");
    const events = (await op.request("GET", "/api/audit?action=grant_revoked")).json().events;
    expect(events.some((e: { detail: { grant_id?: string } }) => e.detail.grant_id === id)).toBe(true);
  });

  it("names operators by email and clients by name, filters by action, environment and date, and pages back", async () => {
    const { op, token } = await setUp();
    await requestAsModel(token, { item_name: "API_KEY" });
    const me = (await op.request("GET", "/api/auth/me")).json();
    const created = (await op.request("GET", "/api/audit?action=item_created")).json();
    expect(created.events.map((e: { action: string }) => e.action)).toEqual(["item_created"]);
    expect(created.events[0].actor_name).toBe(me.email);
    expect(created.next_before).toBeNull();
    const requested = (await op.request("GET", "/api/audit?action=grant_requested")).json().events;
    expect(requested[0]?.actor_name, JSON.stringify(requested)).toBe("billing agent");
    expect((await op.request("GET", "/api/audit?environment=production")).json().events).toEqual([]);
    const future = new Date(Date.now() + 3_600_000).toISOString();
    expect((await op.request("GET", `/api/audit?since=${encodeURIComponent(future)}`)).json().events).toEqual(
      [],
    );
    expect(
      (await op.request("GET", `/api/audit?until=${encodeURIComponent(future)}&action=item_created`)).json()
        .events,
    ).toHaveLength(1);

    // 250 more events: the first page holds the newest 200, `before` gives the rest, then null.
    for (let i = 0; i < 250; i++) {
      await h.plane.services.audit.insertAuditEvent({
        organisationId: me.organisation.id,
        actor: "system",
        action: "paging_test",
        reason: String(i),
      });
    }
    const first = (await op.request("GET", "/api/audit?action=paging_test")).json();
    expect(first.events).toHaveLength(200);
    expect(first.events[0].reason).toBe("249");
    const second = (
      await op.request("GET", `/api/audit?action=paging_test&before=${first.next_before}`)
    ).json();
    expect(second.events.map((e: { reason: string }) => e.reason)).toEqual(
      Array.from({ length: 50 }, (_, i) => String(49 - i)),
    );
    expect(second.next_before).toBeNull();
    for (const bad of ["before=abc", "before=1%00", "since=yesterday", "action=%00"]) {
      const refused = await op.request("GET", `/api/audit?${bad}`);
      expect(refused.statusCode, bad).toBe(400);
    }
  });
});

describe("approval requests scoped to a call (spec 4.2 rules 1, 4)", () => {
  it.each([
    [{ host: "127.0.0.1" }, "ip_literal"],
    [{ host: "api.latch.test\r\nx" }, "invalid_host"],
    [{ host: 42 }, "invalid_host"],
    [{ method: "TRACE" }, "invalid_request"],
    [{ path: "/v1/../admin" }, "invalid_path"],
    [{ path: "v1/x" }, "invalid_path"],
  ])("refuses the scope %j with %s and writes no approval", async (scope, code) => {
    const { op, token } = await setUp();
    const refused = await requestAsModel(token, { item_name: "API_KEY", ...scope });
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json().error.code).toBe(code);
    expect((await op.request("GET", "/api/grants")).json().grants).toEqual([]);
  });

  it("keeps a valid scope in its normal form: host lowercased, method uppercased, query dropped", async () => {
    const { token } = await setUp();
    const asked = await requestAsModel(token, {
      item_name: "API_KEY",
      host: "API.Latch.Test",
      method: "get",
      path: "/v1/x?page=2",
    });
    expect(asked.statusCode, asked.body).toBe(201);
    expect(asked.json().grant).toMatchObject({
      status: "pending",
      scope: { host: "api.latch.test", method: "GET", path: "/v1/x" },
    });
  });
});

describe("the access snapshot (spec 4.3 Access)", () => {
  it("shows each client's fetched names and each operator's first and last access", async () => {
    const { op, token } = await setUp();
    const trusted = (await op.request("POST", "/api/clients/trusted", { environment: "staging" })).json();
    const resolved = await h.app.inject({
      method: "POST",
      url: "/runtime/resolve",
      headers: { authorization: `Bearer ${trusted.token}`, "content-type": "application/json" },
      payload: JSON.stringify({ item_name: "API_KEY" }),
    });
    expect(resolved.statusCode).toBe(200);
    const access = (await op.request("GET", "/api/access")).json();
    const byKind = Object.fromEntries(
      access.clients.map((c: { kind: string; fetched_names: string[] }) => [c.kind, c]),
    );
    expect(byKind.trusted.fetched_names).toEqual(["API_KEY"]);
    expect(byKind.model.fetched_names).toEqual([]);
    expect(access.operators[0]).toMatchObject({
      created_at: expect.any(String),
      first_access_at: expect.any(String),
      last_access_at: expect.any(String),
    });
    expect(access).not.toHaveProperty("events");
    expect(JSON.stringify(access)).not.toContain(SECRET);
    expect(JSON.stringify(access)).not.toContain(token);
  });
});

describe("need requests (spec 2.5, 4.3)", () => {
  it("name the requesting client and carry the public recipe for a known provider host", async () => {
    const { op, token } = await setUp();
    const agent = await connectAgent(url, token);
    const ask = (host: string) =>
      agent
        .callTool({ name: "http_request", arguments: { method: "GET", path: "/user", host } })
        .then(toolAnswer);
    const known = await ask("api.github.com");
    const unknown = await ask("api.unknown-provider.test");
    expect(known.status).toBe("need_item");
    const need = (await op.request("GET", `/api/need-items/${known.need_id}`)).json().need;
    expect(need).toMatchObject({ client_name: "billing agent", host: "api.github.com", kind: "secret" });
    expect(need.recipe.steps.length).toBeGreaterThan(0);
    expect(need.recipe.steps.every((s: unknown) => typeof s === "string")).toBe(true);
    expect(typeof need.recipe.next).toBe("string");
    const other = (await op.request("GET", `/api/need-items/${unknown.need_id}`)).json().need;
    expect(other.recipe).toBeUndefined();
    const inbox = (await op.request("GET", "/api/inbox")).json().requests;
    expect(inbox.find((r: { need_id: string }) => r.need_id === known.need_id)).toMatchObject({
      client_name: "billing agent",
      recipe: { next: expect.any(String) },
    });
    await agent.close();
  });
});

describe("values (spec 2.1, 8)", () => {
  it("refuses on rotate and edit a value that create refuses, without echoing it", async () => {
    const { op } = await setUp();
    const id = (await op.request("GET", "/api/items")).json().items[0].id;
    const long = `${"v".repeat(40 * 1024)}TAIL_MARKER`;
    const rotated = await op.request("POST", `/api/items/${id}/rotate`, { value: long });
    expect(rotated.statusCode).toBe(400);
    expect(rotated.body).not.toContain("TAIL_MARKER");
    const edited = await op.request("POST", `/api/items/${id}`, { value: long });
    expect(edited.statusCode).toBe(400);
    expect((await op.request("POST", `/api/items/${id}/rotate`, { value: "" })).statusCode).toBe(400);
  });
});

describe("the issuance ledger (spec 4.3 Access, 6)", () => {
  it("marks a client's revocation once, however often it is revoked", async () => {
    const { op, clientId } = await setUp();
    for (let i = 0; i < 2; i++) {
      expect((await op.request("POST", `/api/clients/${clientId}/revoke`)).statusCode).toBe(200);
    }
    const ledger = (await op.request("GET", "/api/access/events")).json().events;
    expect(ledger.map((e: { action: string }) => e.action)).toEqual(["client_revoked", "client_issued"]);
    expect(ledger[0]).toMatchObject({ client_id: clientId, revoked: true });
  });
});

describe("the hourly request limit (spec 8)", () => {
  it("still counts a request whose approval code was voided by wrong codes", async () => {
    const { op } = await setUp();
    const ask = (i: number) =>
      op.request("POST", "/api/grants/request", { item_name: "API_KEY", agent_id: `agent-${i}` });
    const first = (await ask(0)).json();
    const wrong = first.approval_code === "00000000" ? "11111111" : "00000000";
    for (let i = 0; i < 5; i++) {
      await op.request("POST", "/api/grants/approve-by-code", {
        code: wrong,
        grant_id: first.grant.grant_id,
      });
    }
    for (let i = 1; i < 30; i++) expect((await ask(i)).statusCode).toBe(201);
    expect((await ask(30)).statusCode).toBe(429);
  });
});

describe("the approval link (spec 3.1, 4.3)", () => {
  it("sends a signed-out browser to sign in and back to the link; a signed-in operator approves with the agent named", async () => {
    const { op, token } = await setUp();
    const asked = await requestAsModel(token, { item_name: "API_KEY" });
    expect(asked.statusCode, asked.body).toBe(201);
    // The mail is quoted-printable: soft line breaks and =3D undone.
    const text =
      h.inbox.mails
        .at(-1)
        ?.raw.replace(/=\r?\n/g, "")
        .replace(/=3D/g, "=") ?? "";
    const linkToken = /\/approve\?token=([A-Za-z0-9_-]+)/.exec(text)?.[1];
    expect(linkToken, text).toBeDefined();
    const link = `/approve?token=${linkToken}`;

    // Signed out: to sign-in, naming the link to come back to. Nothing is approved.
    const signedOut = await h.app.inject({ method: "GET", url: link });
    expect(signedOut.statusCode).toBe(302);
    expect(signedOut.headers.location).toBe(`/sign-in?return_to=${encodeURIComponent(link)}`);
    // A malformed token is not carried along.
    const malformed = await h.app.inject({ method: "GET", url: "/approve?token=%3Cscript%3E" });
    expect(malformed.headers.location).toBe("/sign-in");

    const approved = await op.request("GET", link);
    expect(approved.statusCode, approved.body).toBe(200);
    expect(approved.body).toContain("&quot;billing agent&quot; may use API_KEY");
    expect(approved.body).not.toMatch(/cli_[A-Za-z0-9]/);
    expect(approved.body).toContain('<header class="site">');
    // The link's token reaches no log line, the redirect to sign-in included.
    expect(h.logs.text()).not.toContain(linkToken!);
  });
});
