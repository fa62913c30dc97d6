// An edit that widens a credential (a host added, the inject mode changed) never widens a standing
// approval behind its owners' backs (DECISIONS "Teams"): under a folder_standing approval only an
// owner may make it, as only an owner may approve the folder; an item_standing approval of the
// whole credential ends with it (audited as a revoke), so the agent asks again, and under the
// two-person rule a first approval of one waiting for its second member is forgotten. A host-scoped
// approval and a narrowing edit are left alone.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, startHosted } from "../../test/hosted.ts";
import { startTeam, type Team } from "../../test/teams.ts";

let h: HostedHarness;
let team: Team;
let names = 0;

beforeAll(async () => {
  h = await startHosted();
  team = await startTeam(h);
}, 120_000);
afterAll(async () => {
  await h?.close();
});

type Answer = Awaited<ReturnType<Team["owner"]["browser"]["request"]>>;
type Grant = { grant_id: string; status: string; policy: string | null };

/** What the agent's call would do (http_request with dry_run): covered, or why not. */
function dryRun(itemName: string, host: string): Promise<Record<string, unknown>> {
  return callWith(itemName, host, true);
}

/** The agent's http_request of GET `host`/v1/data with `itemName`, as its tool answer. */
async function callWith(itemName: string, host: string, isDryRun = false): Promise<Record<string, unknown>> {
  const answer = await h.app.inject({
    method: "POST",
    url: "/mcp",
    headers: {
      authorization: `Bearer ${team.token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    payload: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: {
        name: "http_request",
        arguments: { item_name: itemName, host, method: "GET", path: "/v1/data", dry_run: isDryRun },
      },
    }),
  });
  return toolPayload(answer.body);
}

function toolPayload(body: string): Record<string, unknown> {
  const text = (JSON.parse(body) as { result: { content: { text: string }[] } }).result.content[0]!.text;
  return JSON.parse(text) as Record<string, unknown>;
}

/** A credential of its own, in no folder, and an approval the agent asked for a call with it. */
async function itemWithRequest(of: Team = team): Promise<{ id: string; name: string; grantId: string }> {
  const name = `WIDE_${++names}`;
  const stored = await of.owner.browser.request("POST", "/api/items", {
    name,
    value: "v-wide-0123456789",
    environment: "staging",
    allowed_hosts: ["api.latch.test", "other.latch.test"],
  });
  expect(stored.statusCode, stored.body).toBe(201);
  const requested = await h.app.inject({
    method: "POST",
    url: "/api/grants/request",
    headers: { authorization: `Bearer ${of.token}`, "content-type": "application/json" },
    payload: JSON.stringify({ item_name: name, host: "api.latch.test", method: "GET", path: "/v1/data" }),
  });
  expect(requested.statusCode, requested.body).toBe(201);
  return { id: stored.json().item.id, name, grantId: requested.json().grant.grant_id };
}

async function grantOf(id: string): Promise<Grant> {
  const grants = (await team.owner.browser.request("GET", "/api/grants")).json().grants as Grant[];
  const grant = grants.find((g) => g.grant_id === id);
  if (!grant) throw new Error(`grant ${id} is not listed`);
  return grant;
}

async function itemOf(
  id: string,
): Promise<{ allowed_hosts: string[]; inject: string; username: string | null }> {
  return (await team.owner.browser.request("GET", "/api/items"))
    .json()
    .items.find((i: { id: string }) => i.id === id);
}

function expectWideningRefused(response: Answer) {
  expect(response.statusCode, response.body).toBe(403);
  const error = (response.json() as { error: Record<string, unknown> }).error;
  expect(error).toMatchObject({ code: "forbidden_role", role: "admin", required_roles: ["owner"] });
  expect(String(error.message)).toContain("standing approval of every credential in folder apis");
}

describe("an edit under a folder_standing approval", () => {
  it("widening: an admin is refused and nothing changes; an owner may; narrowing and other fields need nothing", async () => {
    const items = (await team.owner.browser.request("GET", "/api/items")).json().items;
    const apiKey = items.find((i: { name: string }) => i.name === "API_KEY");
    const grant = await team.requestGrant();
    const approved = await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "apis",
      scope: "credential",
    });
    expect(approved.json().grant).toMatchObject({ status: "active", policy: "folder_standing" });
    try {
      const wider = ["api.latch.test", "evil.example.com"];
      const meta = `/api/items/${apiKey.id}/meta`;
      expectWideningRefused(
        await team.admin.browser.request("POST", meta, { allowed_hosts: wider, inject: "query:leak" }),
      );
      expectWideningRefused(await team.admin.browser.request("POST", meta, { allowed_hosts: wider }));
      expectWideningRefused(await team.admin.browser.request("POST", meta, { inject: "query:leak" }));
      expect(await itemOf(apiKey.id)).toMatchObject({ allowed_hosts: ["api.latch.test"], inject: "bearer" });
      expect((await dryRun("API_KEY", "evil.example.com")).status).toBe("host_mismatch");

      // Neither a username nor a narrowing sends the credential anywhere new.
      const renamed = await team.admin.browser.request("POST", meta, { username: "someone" });
      expect(renamed.statusCode, renamed.body).toBe(200);

      const byOwner = await team.owner.browser.request("POST", meta, { allowed_hosts: wider });
      expect(byOwner.statusCode, byOwner.body).toBe(200);
      expect((await dryRun("API_KEY", "evil.example.com")).would_send).toBe(true);
      const narrowed = await team.admin.browser.request("POST", meta, { allowed_hosts: ["api.latch.test"] });
      expect(narrowed.statusCode, narrowed.body).toBe(200);
      expect(await itemOf(apiKey.id)).toMatchObject({
        allowed_hosts: ["api.latch.test"],
        username: "someone",
      });
      expect((await grantOf(grant.grant_id)).status).toBe("active");
    } finally {
      await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/revoke`);
    }
  });
});

describe("an edit of an item with item_standing approvals", () => {
  it("widening ends a whole-credential approval, audited as a revoke, and the agent's next call asks again", async () => {
    const item = await itemWithRequest();
    const approved = await team.owner.browser.request("POST", `/api/grants/${item.grantId}/approve`, {
      policy: "item_standing",
      scope: "credential",
    });
    expect(approved.json().grant).toMatchObject({ status: "active", policy: "item_standing" });
    expect((await dryRun(item.name, "other.latch.test")).would_send).toBe(true);

    const widened = await team.admin.browser.request("POST", `/api/items/${item.id}/meta`, {
      allowed_hosts: ["api.latch.test", "other.latch.test", "evil.example.com"],
    });
    expect(widened.statusCode, widened.body).toBe(200);
    expect((await grantOf(item.grantId)).status).toBe("revoked");
    const events = (await team.owner.browser.request("GET", `/api/audit?item_name=${item.name}`)).json()
      .events as { action: string; reason: string | null; detail: Record<string, unknown> }[];
    expect(events.find((e) => e.action === "grant_revoked")).toMatchObject({
      reason: "credential_widened",
      detail: { grant_id: item.grantId },
    });
    expect((await dryRun(item.name, "evil.example.com")).would_send).toBe(false);
    expect(await callWith(item.name, "api.latch.test")).toMatchObject({ status: "pending" });
  });

  it("an inject change ends it too", async () => {
    const item = await itemWithRequest();
    await team.owner.browser.request("POST", `/api/grants/${item.grantId}/approve`, {
      policy: "item_standing",
      scope: "credential",
    });
    const changed = await team.admin.browser.request("POST", `/api/items/${item.id}/meta`, {
      inject: "query:leak",
    });
    expect(changed.statusCode, changed.body).toBe(200);
    expect((await grantOf(item.grantId)).status).toBe("revoked");
  });

  it("a host-scoped approval stays, covering its own host only; a narrowing edit ends nothing", async () => {
    const scoped = await itemWithRequest();
    const approved = await team.owner.browser.request("POST", `/api/grants/${scoped.grantId}/approve`, {
      // No scope chosen: the one it was asked with, GET api.latch.test/v1/data.
      policy: "item_standing",
    });
    expect(approved.json().grant).toMatchObject({ status: "active", policy: "item_standing" });
    const widened = await team.admin.browser.request("POST", `/api/items/${scoped.id}/meta`, {
      allowed_hosts: ["api.latch.test", "other.latch.test", "evil.example.com"],
    });
    expect(widened.statusCode, widened.body).toBe(200);
    expect((await grantOf(scoped.grantId)).status).toBe("active");
    expect((await dryRun(scoped.name, "api.latch.test")).would_send).toBe(true);
    expect((await dryRun(scoped.name, "evil.example.com")).would_send).toBe(false);

    const whole = await itemWithRequest();
    await team.owner.browser.request("POST", `/api/grants/${whole.grantId}/approve`, {
      policy: "item_standing",
      scope: "credential",
    });
    const narrowed = await team.admin.browser.request("POST", `/api/items/${whole.id}/meta`, {
      allowed_hosts: ["api.latch.test"],
      username: "someone",
    });
    expect(narrowed.statusCode, narrowed.body).toBe(200);
    expect((await grantOf(whole.grantId)).status).toBe("active");
    expect((await dryRun(whole.name, "api.latch.test")).would_send).toBe(true);
  });
});

describe("an edit of an item whose item_standing approval waits for a second member", () => {
  let pair: Team;
  beforeAll(async () => {
    pair = await startTeam(h);
    const set = await pair.owner.browser.request("PATCH", "/api/orgs/settings", {
      standing_approvals_need: 2,
    });
    expect(set.statusCode, set.body).toBe(200);
  }, 120_000);

  const approve = (member: Team["owner"], grantId: string, scope?: "credential") =>
    member.browser.request("POST", `/api/grants/${grantId}/approve`, {
      policy: "item_standing",
      ...(scope ? { scope } : {}),
    });

  /** A credential whose agent's request the owner approved first (item_standing, "1 of 2"). */
  async function firstApproved(scope?: "credential") {
    const item = await itemWithRequest(pair);
    const first = await approve(pair.owner, item.grantId, scope);
    expect(first.json().grant).toMatchObject({ status: "pending", approvals: "1 of 2" });
    return item;
  }

  async function editedEvent(itemName: string) {
    const events = (await pair.owner.browser.request("GET", `/api/audit?item_name=${itemName}`)).json()
      .events as { action: string; detail: Record<string, unknown> }[];
    return events.find((e) => e.action === "item_edited");
  }

  const edit = async (id: string, body: Record<string, unknown>) => {
    const edited = await pair.admin.browser.request("POST", `/api/items/${id}/meta`, body);
    expect(edited.statusCode, edited.body).toBe(200);
  };

  it("widening forgets a first approval of the whole credential: the next member's is the first again", async () => {
    const hosts = await firstApproved("credential");
    await edit(hosts.id, { allowed_hosts: ["api.latch.test", "other.latch.test", "evil.example.com"] });
    expect((await editedEvent(hosts.name))?.detail).toMatchObject({ first_approvals_voided: 1 });
    const second = await approve(pair.approver, hosts.grantId, "credential");
    expect(second.statusCode, second.body).toBe(200);
    expect(second.json().grant).toMatchObject({ status: "pending", approvals: "1 of 2" });
    // The owner, whose approval of the narrower credential was forgotten, may confirm the wider one.
    const confirmed = await approve(pair.owner, hosts.grantId, "credential");
    expect(confirmed.json().grant).toMatchObject({ status: "active", approvals: "2 of 2" });

    const inject = await firstApproved("credential");
    await edit(inject.id, { inject: "query:leak" });
    const after = await approve(pair.approver, inject.grantId, "credential");
    expect(after.json().grant).toMatchObject({ status: "pending", approvals: "1 of 2" });
  });

  it("a narrowing edit, a rename and a host-scoped first approval keep it: the next member confirms", async () => {
    const narrowed = await firstApproved("credential");
    await edit(narrowed.id, { allowed_hosts: ["api.latch.test"] });
    const renamed = await firstApproved("credential");
    await edit(renamed.id, { name: `${renamed.name}_RENAMED` });
    // No scope chosen: the one it was asked with, GET api.latch.test/v1/data, never a host added.
    const scoped = await firstApproved();
    await edit(scoped.id, { allowed_hosts: ["api.latch.test", "other.latch.test", "evil.example.com"] });
    expect((await editedEvent(scoped.name))?.detail.first_approvals_voided).toBeUndefined();
    for (const [item, scope] of [
      [narrowed, "credential"],
      [renamed, "credential"],
      [scoped, undefined],
    ] as const) {
      const confirmed = await approve(pair.approver, item.grantId, scope);
      expect(confirmed.statusCode, confirmed.body).toBe(200);
      expect(confirmed.json().grant).toMatchObject({ status: "active", approvals: "2 of 2" });
    }
  });
});
