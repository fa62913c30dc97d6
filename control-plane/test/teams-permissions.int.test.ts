// DECISIONS "Teams", the permission table, row by row with real work: for each role, one thing the
// row allows it to do (and the change is made) or the 403 forbidden_role it gets (and nothing
// changed). The authorization suite checks every route's declared action; this file checks that
// the actions do what the table says.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Role } from "../src/auth/permissions.ts";
import { type HostedHarness, startHosted, uniqueEmail } from "./hosted.ts";
import { askCall, type Member, startTeam, type Team } from "./teams.ts";

let h: HostedHarness;
let team: Team;
beforeAll(async () => {
  h = await startHosted();
  team = await startTeam(h);
}, 120_000);
afterAll(async () => {
  await h?.close();
});

const memberOf = (role: Role): Member => team[role];
let names = 0;

/** Expects 403 forbidden_role naming `needed`. */
function expectRefused(
  response: { statusCode: number; body: string; json(): unknown },
  role: Role,
  needed: Role[],
) {
  expect(response.statusCode, response.body).toBe(403);
  const error = (response.json() as { error: Record<string, unknown> }).error;
  expect(error).toMatchObject({ code: "forbidden_role", role, required_roles: needed });
  expect(String(error.message)).toMatch(/needs the .* role; you are an? \w+ here/);
}

describe("see the vault, inbox, grants, clients, audit, access and members", () => {
  it.each(["owner", "admin", "approver", "auditor"] as const)("%s: allowed", async (role) => {
    const browser = memberOf(role).browser;
    const items = (await browser.request("GET", "/api/items")).json().items;
    expect(items.map((i: { name: string }) => i.name)).toContain("API_KEY");
    for (const path of ["/api/inbox", "/api/approvals", "/api/audit", "/api/access", "/api/orgs/members"]) {
      expect((await browser.request("GET", path)).statusCode, `${role} ${path}`).toBe(200);
    }
  });

  it("a stranger (no member): 404, as if the organisation did not exist", async () => {
    const grant = await team.requestGrant();
    const stranger = (await startTeam(h)).owner.browser;
    expect((await stranger.request("POST", `/api/grants/${grant.grant_id}/approve`, {})).statusCode).toBe(
      404,
    );
  });
});

describe("approve, deny, revoke approvals (prompt, session, item_standing)", () => {
  it.each(["owner", "admin", "approver"] as const)("%s: allowed (approves, then revokes)", async (role) => {
    const grant = await team.requestGrant();
    const approved = await memberOf(role).browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "session",
    });
    expect(approved.statusCode, approved.body).toBe(200);
    expect(approved.json().grant.status).toBe("active");
    const revoked = await memberOf(role).browser.request("POST", `/api/grants/${grant.grant_id}/revoke`);
    expect(revoked.json().grant.status).toBe("revoked");
  });

  it("auditor: refused, and the request stays pending", async () => {
    const grant = await team.requestGrant();
    const auditor = memberOf("auditor").browser;
    expectRefused(await auditor.request("POST", `/api/grants/${grant.grant_id}/approve`, {}), "auditor", [
      "owner",
      "admin",
      "approver",
    ]);
    expectRefused(await auditor.request("POST", `/api/grants/${grant.grant_id}/revoke`), "auditor", [
      "owner",
      "admin",
      "approver",
    ]);
    const pending = (await auditor.request("GET", "/api/inbox")).json().approvals;
    expect(pending.find((g: { grant_id: string }) => g.grant_id === grant.grant_id)?.status).toBe("pending");
  });
});

describe("every decision names the member who made it", () => {
  it("an approver's denial of a credential request is audited need_denied under their email", async () => {
    const asked = await askCall(h, team.token, { host: "api.denied.test", method: "GET", path: "/v1/me" });
    expect(asked.statusCode).toBe(200);
    const need = (await team.approver.browser.request("GET", "/api/inbox"))
      .json()
      .requests.find((n: { host: string }) => n.host === "api.denied.test");
    expectRefused(
      await team.auditor.browser.request("POST", `/api/need-items/${need.need_id}/deny`),
      "auditor",
      ["owner", "admin", "approver"],
    );
    expect(
      (await team.approver.browser.request("POST", `/api/need-items/${need.need_id}/deny`)).statusCode,
    ).toBe(200);
    const events = (await team.owner.browser.request("GET", "/api/audit?action=need_denied")).json().events;
    expect(events[0]).toMatchObject({ actor_name: team.approver.email, host: "api.denied.test" });
  });

  it("a denial and a revocation of approvals name the member too", async () => {
    const denied = await team.requestGrant();
    await team.approver.browser.request("POST", `/api/grants/${denied.grant_id}/revoke`);
    const events = (await team.owner.browser.request("GET", "/api/audit?action=grant_denied")).json().events;
    expect(
      events.find((e: { detail: { grant_id: string } }) => e.detail.grant_id === denied.grant_id),
    ).toMatchObject({
      actor_name: team.approver.email,
    });
  });
});

describe("approve folder_standing (spec: owner only)", () => {
  it("owner: allowed", async () => {
    const grant = await team.requestGrant();
    const approved = await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "apis",
    });
    expect(approved.statusCode, approved.body).toBe(200);
    expect(approved.json().grant).toMatchObject({ status: "active", policy: "folder_standing" });
    await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/revoke`);
  });

  it.each(["admin", "approver", "auditor"] as const)("%s: refused, naming the owner", async (role) => {
    const grant = await team.requestGrant();
    const attempt = await memberOf(role).browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "apis",
    });
    expectRefused(attempt, role, role === "auditor" ? ["owner", "admin", "approver"] : ["owner"]);
  });
});

describe("put a credential in a folder agents hold a folder_standing approval of (as approving it: owner only)", () => {
  it("admin: refused, moving one there or storing one there; owner: allowed, and the move is in the audit", async () => {
    const grant = await team.requestGrant();
    const approved = await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "apis",
    });
    expect(approved.json().grant).toMatchObject({ status: "active", policy: "folder_standing" });
    try {
      const items = (await team.admin.browser.request("GET", "/api/items")).json().items;
      const environment = items.find((i: { name: string }) => i.name === "API_KEY").environment as string;
      const name = `OUTSIDE_${++names}`;
      const stored = await team.admin.browser.request("POST", "/api/items", {
        name,
        value: "v-outside-123456",
        environment,
        allowed_hosts: ["api.latch.test"],
      });
      expect(stored.statusCode, stored.body).toBe(201);
      const id = stored.json().item.id as string;
      const moved = await team.admin.browser.request("POST", `/api/items/${id}/meta`, {
        folder_name: "apis",
      });
      expectStandingRefused(moved);
      const inside = await team.admin.browser.request("POST", "/api/items", {
        name: `INSIDE_${++names}`,
        value: "v-inside-123456",
        environment,
        allowed_hosts: ["api.latch.test"],
        folder_name: "apis",
      });
      expectStandingRefused(inside);
      const after = (await team.admin.browser.request("GET", "/api/items")).json().items;
      expect(after.find((i: { id: string }) => i.id === id).folder_name).toBeNull();
      expect(after.map((i: { name: string }) => i.name)).not.toContain(`INSIDE_${names}`);

      const byOwner = await team.owner.browser.request("POST", `/api/items/${id}/meta`, {
        folder_name: "apis",
      });
      expect(byOwner.statusCode, byOwner.body).toBe(200);
      const events = (await team.owner.browser.request("GET", `/api/audit?item_name=${name}`)).json().events;
      expect(events.find((e: { action: string }) => e.action === "item_edited").detail.folder).toEqual({
        from: null,
        to: "apis",
      });
    } finally {
      await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/revoke`);
    }
  });
});

function expectStandingRefused(response: { statusCode: number; body: string; json(): unknown }) {
  expect(response.statusCode, response.body).toBe(403);
  const error = (response.json() as { error: Record<string, unknown> }).error;
  expect(error).toMatchObject({ code: "forbidden_role", role: "admin", required_roles: ["owner"] });
  expect(String(error.message)).toContain("standing approval of every credential in folder apis");
}

describe("store, delete credentials; fulfil collect; connect providers", () => {
  it.each(["owner", "admin"] as const)("%s: allowed", async (role) => {
    const name = `STORED_${role.toUpperCase()}_${++names}`;
    const stored = await memberOf(role).browser.request("POST", "/api/items", {
      name,
      value: "v-123456",
      environment: "staging",
      allowed_hosts: ["api.latch.test"],
    });
    expect(stored.statusCode, stored.body).toBe(201);
    const id = stored.json().item.id;
    expect((await memberOf(role).browser.request("DELETE", `/api/items/${id}`)).statusCode).toBe(200);
  });

  it.each(["approver", "auditor"] as const)("%s: refused, and nothing is stored", async (role) => {
    const name = `REFUSED_${role.toUpperCase()}_${++names}`;
    const attempt = await memberOf(role).browser.request("POST", "/api/items", {
      name,
      value: "v-123456",
      environment: "staging",
      allowed_hosts: ["api.latch.test"],
    });
    expectRefused(attempt, role, ["owner", "admin"]);
    const items = (await team.owner.browser.request("GET", "/api/items")).json().items;
    expect(items.map((i: { name: string }) => i.name)).not.toContain(name);
    expectRefused(
      await memberOf(role).browser.request("POST", "/api/integrations/github/start", {
        item_name: "API_KEY",
      }),
      role,
      ["owner", "admin"],
    );
  });
});

describe("issue, rotate, revoke clients", () => {
  it.each(["owner", "admin"] as const)("%s: allowed", async (role) => {
    const issued = await memberOf(role).browser.request("POST", "/api/clients/model", {
      name: `agent of ${role}`,
      environment: "staging",
    });
    expect(issued.statusCode, issued.body).toBe(201);
    const revoked = await memberOf(role).browser.request(
      "POST",
      `/api/clients/${issued.json().client_id}/revoke`,
    );
    expect(revoked.statusCode).toBe(200);
  });

  it.each(["approver", "auditor"] as const)("%s: refused", async (role) => {
    expectRefused(
      await memberOf(role).browser.request("POST", "/api/clients/model", {
        name: "x",
        environment: "staging",
      }),
      role,
      ["owner", "admin"],
    );
    expectRefused(
      await memberOf(role).browser.request("POST", `/api/clients/${team.clientId}/revoke`),
      role,
      ["owner", "admin"],
    );
  });
});

describe("export audit", () => {
  it.each(["owner", "admin", "auditor"] as const)(
    "%s: allowed, the file names members by email",
    async (role) => {
      const exported = await memberOf(role).browser.request("GET", "/api/audit/export?format=jsonl");
      expect(exported.statusCode).toBe(200);
      expect(exported.headers["content-type"]).toMatch(/^application\/jsonl/);
      expect(exported.headers["content-disposition"]).toMatch(/attachment; filename="latch-audit-.*\.jsonl"/);
      const rows = exported.body
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line));
      const joined = rows.find((r) => r.action === "member_joined" && r.detail.email === team.auditor.email);
      expect(joined).toMatchObject({ who: team.auditor.email, detail: { role: "auditor" } });
      expect(exported.body).not.toContain("team-secret-value");
    },
  );

  it("approver: refused", async () => {
    expectRefused(await team.approver.browser.request("GET", "/api/audit/export"), "approver", [
      "owner",
      "admin",
      "auditor",
    ]);
  });
});

describe("invite, remove, change roles (an admin never touches an owner or makes one)", () => {
  it.each(["owner", "admin"] as const)("%s: allowed", async (role) => {
    const invited = await memberOf(role).browser.request("POST", "/api/orgs/members/invite", {
      email: uniqueEmail(`by-${role}`),
      role: "auditor",
    });
    expect(invited.statusCode, invited.body).toBe(201);
  });

  it.each(["approver", "auditor"] as const)("%s: refused", async (role) => {
    expectRefused(
      await memberOf(role).browser.request("POST", "/api/orgs/members/invite", {
        email: uniqueEmail("refused"),
        role: "auditor",
      }),
      role,
      ["owner", "admin"],
    );
    expectRefused(
      await memberOf(role).browser.request("POST", `/api/orgs/members/${team.auditor.operatorId}/role`, {
        role: "approver",
      }),
      role,
      ["owner", "admin"],
    );
  });

  it("admin: refused to invite an owner, to touch the owner, or to make one", async () => {
    const admin = team.admin.browser;
    const inviting = await admin.request("POST", "/api/orgs/members/invite", {
      email: uniqueEmail("o"),
      role: "owner",
    });
    expectRefused(inviting, "admin", ["owner"]);
    expect(inviting.json().error.message).toContain("inviting an owner needs the owner role");
    expectRefused(await admin.request("DELETE", `/api/orgs/members/${team.owner.operatorId}`), "admin", [
      "owner",
    ]);
    expectRefused(
      await admin.request("POST", `/api/orgs/members/${team.owner.operatorId}/role`, { role: "auditor" }),
      "admin",
      ["owner"],
    );
    expectRefused(
      await admin.request("POST", `/api/orgs/members/${team.auditor.operatorId}/role`, { role: "owner" }),
      "admin",
      ["owner"],
    );
  });
});

describe("rename or delete the organisation, transfer ownership", () => {
  it("owner: allowed to rename (the slug stays)", async () => {
    const before = (await team.owner.browser.request("GET", "/api/orgs/settings")).json().organisation;
    const renamed = await team.owner.browser.request("PATCH", "/api/orgs/settings", { name: "Renamed team" });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(renamed.json().organisation).toMatchObject({ name: "Renamed team", slug: before.slug });
  });

  it.each(["admin", "approver", "auditor"] as const)("%s: refused", async (role) => {
    const browser = memberOf(role).browser;
    expectRefused(await browser.request("PATCH", "/api/orgs/settings", { name: "Mine now" }), role, [
      "owner",
    ]);
    expectRefused(await browser.request("DELETE", "/api/orgs", { confirm_name: "Renamed team" }), role, [
      "owner",
    ]);
    expectRefused(
      await browser.request("POST", "/api/orgs/transfer", { operator_id: memberOf(role).operatorId }),
      role,
      ["owner"],
    );
    expect((await browser.request("GET", "/api/orgs/settings")).json().organisation.name).not.toBe(
      "Mine now",
    );
  });
});

describe("model and trusted clients are unaffected by roles", () => {
  it("a model client asks and a trusted client resolves as before: no role is asked of a bearer", async () => {
    const grant = await team.requestGrant();
    expect(grant.status).toBe("pending");
    const issued = await team.admin.browser.request("POST", "/api/clients/trusted", {
      name: "runtime",
      environment: "staging",
    });
    const resolved = await h.app.inject({
      method: "POST",
      url: "/runtime/resolve",
      headers: { authorization: `Bearer ${issued.json().token}`, "content-type": "application/json" },
      payload: JSON.stringify({ item_name: "API_KEY" }),
    });
    expect(resolved.statusCode, resolved.body).toBe(200);
    expect(resolved.json().value).toBe("team-secret-value");
  });
});
