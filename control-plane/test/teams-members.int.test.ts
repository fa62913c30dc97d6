// An organisation's members (DECISIONS "Teams"): the listing, role changes, the last owner, removal
// (sessions and OAuth grants gone at once, approvals kept in force and in the audit), leaving,
// handing ownership over, other members' sessions, and the organisation's slug.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Browser, type HostedHarness, lastCodeFor, readyOperator, startHosted } from "./hosted.ts";
import { approveAndExchange, RESOURCE, register, token } from "./oauth/oauth-flow.ts";
import { joinAs, startTeam } from "./teams.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

async function mcp(accessToken: string) {
  return h.app.inject({
    method: "POST",
    url: "/mcp",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
    payload: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  });
}

describe("the members listing", () => {
  it("lists email, role, joined and last seen, with the pending invitations", async () => {
    const team = await startTeam(h);
    h.clock.advance(61_000);
    await team.approver.browser.request("GET", "/api/items");
    const listed = (await team.auditor.browser.request("GET", "/api/orgs/members")).json();
    const byEmail = new Map(listed.members.map((m: { email: string }) => [m.email, m]));
    expect(byEmail.get(team.owner.email)).toMatchObject({
      role: "owner",
      operator_id: team.owner.operatorId,
    });
    expect(byEmail.get(team.approver.email)).toMatchObject({ role: "approver" });
    const approver = byEmail.get(team.approver.email) as { joined_at: string; last_seen_at: string };
    expect(Date.parse(approver.last_seen_at)).toBeGreaterThanOrEqual(Date.parse(approver.joined_at));
    expect(listed.invites).toEqual([]);
  });
});

describe("changing a role", () => {
  it("takes effect on the member's next request, and is audited", async () => {
    const team = await startTeam(h);
    const grant = await team.requestGrant();
    const changed = await team.admin.browser.request(
      "POST",
      `/api/orgs/members/${team.approver.operatorId}/role`,
      {
        role: "auditor",
      },
    );
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json().member).toMatchObject({ email: team.approver.email, role: "auditor" });
    const refused = await team.approver.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {});
    expect(refused.json().error).toMatchObject({ code: "forbidden_role", role: "auditor" });
    const events = (await team.owner.browser.request("GET", "/api/audit?action=member_role_changed")).json()
      .events;
    expect(events[0]).toMatchObject({
      actor_name: team.admin.email,
      detail: { email: team.approver.email, from: "approver", to: "auditor" },
    });
  });

  it("refuses a role that does not exist, and a stranger's id is 404", async () => {
    const team = await startTeam(h);
    const bad = await team.owner.browser.request(
      "POST",
      `/api/orgs/members/${team.approver.operatorId}/role`,
      {
        role: "superuser",
      },
    );
    expect(bad.statusCode).toBe(400);
    const other = await startTeam(h);
    const stranger = await team.owner.browser.request(
      "POST",
      `/api/orgs/members/${other.approver.operatorId}/role`,
      {
        role: "auditor",
      },
    );
    expect(stranger.statusCode).toBe(404);
  });
});

describe("the last owner", () => {
  it("cannot leave, be removed or be demoted (409 last_owner); with a second owner, can", async () => {
    const team = await startTeam(h);
    const owner = team.owner;
    for (const attempt of [
      () => owner.browser.request("POST", "/api/orgs/leave"),
      () => owner.browser.request("DELETE", `/api/orgs/members/${owner.operatorId}`),
      () => owner.browser.request("POST", `/api/orgs/members/${owner.operatorId}/role`, { role: "admin" }),
    ]) {
      const answer = await attempt();
      expect(answer.statusCode, answer.body).toBe(409);
      expect(answer.json().error.code).toBe("last_owner");
      expect(answer.json().error.message).toContain("keeps one owner at least");
    }
    const promoted = await owner.browser.request("POST", `/api/orgs/members/${team.admin.operatorId}/role`, {
      role: "owner",
    });
    expect(promoted.statusCode).toBe(200);
    expect(
      (await owner.browser.request("POST", `/api/orgs/members/${owner.operatorId}/role`, { role: "admin" }))
        .statusCode,
    ).toBe(200);
    // Now the admin-made-owner is the last owner.
    const last = await team.admin.browser.request("POST", "/api/orgs/leave");
    expect(last.json().error.code).toBe("last_owner");
  });

  it("two owners demoting each other at once keep one owner", async () => {
    const team = await startTeam(h);
    await team.owner.browser.request("POST", `/api/orgs/members/${team.admin.operatorId}/role`, {
      role: "owner",
    });
    const [a, b] = await Promise.all([
      team.owner.browser.request("POST", `/api/orgs/members/${team.admin.operatorId}/role`, {
        role: "admin",
      }),
      team.admin.browser.request("POST", `/api/orgs/members/${team.owner.operatorId}/role`, {
        role: "admin",
      }),
    ]);
    expect([a.statusCode, b.statusCode].sort()).toEqual([200, 403]);
    const members = (await team.approver.browser.request("GET", "/api/orgs/members")).json().members;
    expect(members.filter((m: { role: string }) => m.role === "owner")).toHaveLength(1);
  });
});

describe("removing a member", () => {
  it("ends their sessions' access and the OAuth grants they gave there; what they approved stays", async () => {
    const team = await startTeam(h);
    const admin = team.admin;
    // A second browser of theirs, acting in the organisation too.
    const elsewhere = new Browser(h.app);
    await elsewhere.request("POST", "/api/auth/otp/send", { email: admin.email });
    await elsewhere.request("POST", "/api/auth/otp/verify", {
      email: admin.email,
      otp: lastCodeFor(h.inbox, admin.email),
    });
    h.clock.advance(30_000);
    await elsewhere.request("POST", "/api/auth/totp/verify", {
      code: admin.totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    await elsewhere.request("POST", "/api/orgs/switch", { organisation_id: team.organisationId });
    expect(
      (await elsewhere.request("GET", "/api/items")).json().items.map((i: { name: string }) => i.name),
    ).toContain("API_KEY");

    // An agent they connected with OAuth in this organisation.
    const redirectUri = "http://127.0.0.1:33418/callback";
    const registered = await register(h.app, { client_name: "Admin's agent", redirect_uris: [redirectUri] });
    const clientId = registered.json().client_id as string;
    const { tokens } = await approveAndExchange(admin.browser, h.app, {
      clientId,
      redirectUri,
      organisationId: team.organisationId,
    });
    expect((await mcp(tokens.access_token)).statusCode).toBe(200);

    // An approval they gave.
    const grant = await team.requestGrant();
    await admin.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, { policy: "item_standing" });

    const removed = await team.owner.browser.request("DELETE", `/api/orgs/members/${admin.operatorId}`);
    expect(removed.statusCode, removed.body).toBe(200);

    for (const browser of [admin.browser, elsewhere]) {
      const me = (await browser.request("GET", "/api/auth/me")).json();
      expect(me.organisation?.id).not.toBe(team.organisationId);
      expect(me.organisations.map((o: { id: string }) => o.id)).not.toContain(team.organisationId);
      const items = (await browser.request("GET", "/api/items")).json().items ?? [];
      expect(items.map((i: { name: string }) => i.name)).not.toContain("API_KEY");
      const back = await browser.request("POST", "/api/orgs/switch", {
        organisation_id: team.organisationId,
      });
      expect(back.statusCode).toBe(404);
    }
    expect((await mcp(tokens.access_token)).statusCode).toBe(401);
    const refreshed = await token(h.app, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: clientId,
      resource: RESOURCE,
    });
    expect(refreshed.statusCode).toBe(400);
    expect(refreshed.json().error).toBe("invalid_grant");

    const approvals = (await team.owner.browser.request("GET", "/api/approvals")).json().approvals;
    expect(approvals.find((a: { grant_id: string }) => a.grant_id === grant.grant_id)).toMatchObject({
      status: "active",
      approved_by: { operator_id: admin.operatorId, email: admin.email },
    });
    const events = (await team.owner.browser.request("GET", "/api/audit")).json().events;
    const approved = events.find(
      (e: { action: string; detail: { grant_id?: string } }) =>
        e.action === "grant_approved" && e.detail.grant_id === grant.grant_id,
    );
    expect(approved.actor_name).toBe(admin.email);
    const gone = events.find((e: { action: string }) => e.action === "member_removed");
    expect(gone).toMatchObject({
      actor_name: team.owner.email,
      detail: { email: admin.email, role: "admin" },
    });
  });

  it("an approver cannot end another member's session; an admin can, but never an owner's", async () => {
    const team = await startTeam(h);
    const sessions = (await team.owner.browser.request("GET", "/api/access")).json().sessions as {
      session_id: string;
      email: string;
    }[];
    const of = (email: string) => sessions.find((s) => s.email === email)!.session_id;
    const refused = await team.approver.browser.request(
      "POST",
      `/api/sessions/${of(team.auditor.email)}/revoke`,
    );
    expect(refused.json().error).toMatchObject({
      code: "forbidden_role",
      required_roles: ["owner", "admin"],
    });
    const ownerSession = await team.admin.browser.request(
      "POST",
      `/api/sessions/${of(team.owner.email)}/revoke`,
    );
    expect(ownerSession.json().error).toMatchObject({ code: "forbidden_role", required_roles: ["owner"] });
    expect(
      (await team.admin.browser.request("POST", `/api/sessions/${of(team.auditor.email)}/revoke`)).statusCode,
    ).toBe(200);
    expect((await team.auditor.browser.request("GET", "/api/auth/me")).statusCode).toBe(401);
  });
});

describe("leaving", () => {
  it("moves the session to the member's own organisation and is audited", async () => {
    const team = await startTeam(h);
    const left = await team.approver.browser.request("POST", "/api/orgs/leave");
    expect(left.statusCode, left.body).toBe(200);
    const me = (await team.approver.browser.request("GET", "/api/auth/me")).json();
    expect(left.json().organisation.id).toBe(me.organisation.id);
    expect(me.organisation).toMatchObject({ role: "owner" });
    const events = (await team.owner.browser.request("GET", "/api/audit?action=member_removed")).json()
      .events;
    expect(events[0]).toMatchObject({
      actor_name: team.approver.email,
      detail: { email: team.approver.email, left: true },
    });
  });
});

describe("transferring ownership", () => {
  it("makes the member the owner and the old owner an admin", async () => {
    const team = await startTeam(h);
    const moved = await team.owner.browser.request("POST", "/api/orgs/transfer", {
      operator_id: team.approver.operatorId,
    });
    expect(moved.statusCode, moved.body).toBe(200);
    const roles = new Map(
      (await team.owner.browser.request("GET", "/api/orgs/members"))
        .json()
        .members.map((m: { email: string; role: string }) => [m.email, m.role]),
    );
    expect(roles.get(team.approver.email)).toBe("owner");
    expect(roles.get(team.owner.email)).toBe("admin");
    expect((await team.owner.browser.request("PATCH", "/api/orgs/settings", { name: "No" })).statusCode).toBe(
      403,
    );
    expect(
      (await team.approver.browser.request("PATCH", "/api/orgs/settings", { name: "Mine" })).statusCode,
    ).toBe(200);
    const events = (
      await team.approver.browser.request("GET", "/api/audit?action=ownership_transferred")
    ).json().events;
    expect(events[0]).toMatchObject({
      actor_name: team.owner.email,
      detail: { to_email: team.approver.email },
    });
  });

  it("refuses a stranger (404) and oneself (400)", async () => {
    const team = await startTeam(h);
    const other = await startTeam(h);
    expect(
      (
        await team.owner.browser.request("POST", "/api/orgs/transfer", {
          operator_id: other.owner.operatorId,
        })
      ).statusCode,
    ).toBe(404);
    expect(
      (await team.owner.browser.request("POST", "/api/orgs/transfer", { operator_id: team.owner.operatorId }))
        .statusCode,
    ).toBe(400);
  });
});

describe("settings and slugs", () => {
  it("every member reads the settings; a change is audited setting_changed with its old and new value", async () => {
    const team = await startTeam(h);
    const read = (await team.auditor.browser.request("GET", "/api/orgs/settings")).json();
    expect(read).toMatchObject({ role: "auditor", organisation: { standing_approvals_need: 1 } });
    expect(read.organisation.slug).toMatch(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/);
    const changed = await team.owner.browser.request("PATCH", "/api/orgs/settings", {
      standing_approvals_need: 2,
    });
    expect(changed.json().organisation.standing_approvals_need).toBe(2);
    const bad = await team.owner.browser.request("PATCH", "/api/orgs/settings", {
      standing_approvals_need: 3,
    });
    expect(bad.statusCode).toBe(400);
    expect((await team.owner.browser.request("PATCH", "/api/orgs/settings", { name: "" })).statusCode).toBe(
      400,
    );
    const events = (await team.owner.browser.request("GET", "/api/audit?action=setting_changed")).json()
      .events;
    expect(events[0].detail).toEqual({ setting: "standing_approvals_need", from: 1, to: 2 });
  });

  it("PATCH needs the session's X-CSRF-Token like POST and DELETE", async () => {
    const team = await startTeam(h);
    const forged = await team.owner.browser.request(
      "PATCH",
      "/api/orgs/settings",
      { name: "Forged" },
      { "x-csrf-token": "nope" },
    );
    expect(forged.statusCode).toBe(403);
    expect(forged.json().error.code).toBe("csrf_failed");
  });

  it("a new organisation gets a slug from its name, unique, returned by POST /api/orgs and /api/auth/me", async () => {
    const a = await readyOperator(h);
    const b = await readyOperator(h);
    const name = `Acme Café ${Date.now()}`;
    const first = (await a.request("POST", "/api/orgs", { name })).json().organisation;
    const second = (await b.request("POST", "/api/orgs", { name })).json().organisation;
    expect(first.slug).toBe(`acme-cafe-${name.split(" ").at(-1)}`);
    expect(first.role).toBe("owner");
    expect(second.slug).toBe(`${first.slug}-2`);
    const me = (await a.request("GET", "/api/auth/me")).json();
    expect(me.organisation).toMatchObject({ id: first.id, slug: first.slug, role: "owner" });
    expect(me.permissions).toContain("org.manage");
  });

  it("an invited member sees the organisation's role in /api/auth/me and on switching", async () => {
    const owner = await readyOperator(h);
    const member = await joinAs(h, owner, "auditor");
    const mine = (await member.browser.request("GET", "/api/auth/me"))
      .json()
      .organisations.find((o: { role: string }) => o.role === "owner");
    const switched = await member.browser.request("POST", "/api/orgs/switch", { organisation_id: mine.id });
    expect(switched.json().organisation).toMatchObject({ id: mine.id, role: "owner" });
  });
});
