// The two-person rule (DECISIONS "Teams", standing_approvals_need 2): a standing approval is active
// only once a second member who may approve it confirms; the first leaves it pending "1 of 2"; the
// same member twice does not count; a prompt or session approval still needs one. Two members
// confirming at once activate it exactly once (a conditional UPDATE; on PostgreSQL the requests
// truly run side by side).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabase } from "./database.ts";
import { type HostedHarness, startHosted } from "./hosted.ts";
import { askCall, lastInviteTokenFor, startTeam, type Team } from "./teams.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

async function twoPersonTeam(): Promise<Team> {
  const team = await startTeam(h);
  const set = await team.owner.browser.request("PATCH", "/api/orgs/settings", { standing_approvals_need: 2 });
  expect(set.statusCode, set.body).toBe(200);
  return team;
}

/** The grant as the inbox shows it (undefined once it is no longer pending). */
async function inboxEntry(team: Team, grantId: string) {
  const approvals = (await team.auditor.browser.request("GET", "/api/inbox")).json().approvals;
  return approvals.find((g: { grant_id: string }) => g.grant_id === grantId);
}

/** Whether the model client's request for the same call is covered now (a standing approval active). */
async function isCovered(team: Team, path: string) {
  const answer = await h.app.inject({
    method: "POST",
    url: "/api/grants/request",
    headers: { authorization: `Bearer ${team.token}`, "content-type": "application/json" },
    payload: JSON.stringify({ item_name: "API_KEY", host: "api.latch.test", method: "GET", path }),
  });
  return answer.statusCode === 200 && answer.json().grant.status === "active";
}

async function auditOf(team: Team, grantId: string) {
  const events = (await team.owner.browser.request("GET", "/api/audit?item_name=API_KEY")).json().events;
  return events.filter((e: { detail: { grant_id?: string } }) => e.detail.grant_id === grantId);
}

describe("a standing approval under the two-person rule", () => {
  it('is pending "1 of 2" after the first member, refused to the same member again, active after a second', async () => {
    const team = await twoPersonTeam();
    const grant = await team.requestGrant("/v1/repos/a/issues");
    const first = await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "item_standing",
      scope: "credential",
    });
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json().grant).toMatchObject({ status: "pending", approvals: "1 of 2" });
    expect(await inboxEntry(team, grant.grant_id)).toMatchObject({
      approvals: "1 of 2",
      first_approval: {
        operator_id: team.owner.operatorId,
        email: team.owner.email,
        policy: "item_standing",
        scope: "credential",
      },
    });
    expect(await isCovered(team, "/v1/repos/a/issues")).toBe(false);

    const again = await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "item_standing",
      scope: "credential",
    });
    expect(again.statusCode).toBe(409);
    expect(again.json().error.code).toBe("second_member_required");
    expect(again.json().error.message).toContain("another member who may approve it must confirm it");
    // Nor by code: the same member is the same member however they approve.
    expect((await inboxEntry(team, grant.grant_id))?.status).toBe("pending");

    const other = await team.approver.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "item_standing",
      scope: "path_prefix",
    });
    expect(other.statusCode).toBe(409);
    expect(other.json().error.code).toBe("approval_mismatch");
    expect(other.json().error.message).toContain(team.owner.email);

    const confirmed = await team.approver.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "item_standing",
    });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    expect(confirmed.json().grant).toMatchObject({ status: "active", approvals: "2 of 2", scope: null });
    expect(await isCovered(team, "/v1/repos/a/issues")).toBe(true);
    const listed = (await team.owner.browser.request("GET", "/api/approvals")).json().approvals;
    expect(listed.find((a: { grant_id: string }) => a.grant_id === grant.grant_id)).toMatchObject({
      approved_by: { email: team.approver.email },
      first_approved_by: { email: team.owner.email },
    });
    const actions = (await auditOf(team, grant.grant_id)).map((e: { action: string; actor_name: string }) => [
      e.action,
      e.actor_name,
    ]);
    expect(actions).toContainEqual(["grant_first_approved", team.owner.email]);
    expect(actions).toContainEqual(["grant_approved", team.approver.email]);
  });

  it("is refused to an auditor, who may not approve it at all", async () => {
    const team = await twoPersonTeam();
    const grant = await team.requestGrant();
    await team.admin.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "item_standing",
    });
    const auditor = await team.auditor.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "item_standing",
    });
    expect(auditor.json().error.code).toBe("forbidden_role");
    expect((await inboxEntry(team, grant.grant_id))?.approvals).toBe("1 of 2");
  });

  it("a folder_standing approval is confirmed by a second owner only", async () => {
    const team = await twoPersonTeam();
    const grant = await team.requestGrant();
    await team.owner.browser.request("POST", `/api/orgs/members/${team.admin.operatorId}/role`, {
      role: "owner",
    });
    const first = await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "apis",
    });
    expect(first.json().grant.approvals).toBe("1 of 2");
    const approver = await team.approver.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "apis",
    });
    expect(approver.json().error).toMatchObject({ code: "forbidden_role", required_roles: ["owner"] });
    const second = await team.admin.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "apis",
    });
    expect(second.json().grant).toMatchObject({
      status: "active",
      policy: "folder_standing",
      approvals: "2 of 2",
    });
  });

  it("a first approval stops counting once its member is demoted or removed: the next is the first again", async () => {
    const team = await twoPersonTeam();
    const approve = (member: { browser: typeof team.owner.browser }, grantId: string) =>
      member.browser.request("POST", `/api/grants/${grantId}/approve`, { policy: "item_standing" });
    const demoted = await team.requestGrant();
    expect((await approve(team.approver, demoted.grant_id)).json().grant.approvals).toBe("1 of 2");
    const demote = await team.owner.browser.request(
      "POST",
      `/api/orgs/members/${team.approver.operatorId}/role`,
      {
        role: "auditor",
      },
    );
    expect(demote.statusCode, demote.body).toBe(200);
    const again = await approve(team.admin, demoted.grant_id);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().grant).toMatchObject({ status: "pending", approvals: "1 of 2" });
    expect((await inboxEntry(team, demoted.grant_id))?.first_approval).toMatchObject({
      email: team.admin.email,
    });
    expect(await isCovered(team, "/v1/call-demoted")).toBe(false);
    const confirmed = await approve(team.owner, demoted.grant_id);
    expect(confirmed.json().grant).toMatchObject({ status: "active", approvals: "2 of 2" });

    const removed = await team.requestGrant();
    expect((await approve(team.admin, removed.grant_id)).json().grant.approvals).toBe("1 of 2");
    const remove = await team.owner.browser.request("DELETE", `/api/orgs/members/${team.admin.operatorId}`);
    expect(remove.statusCode, remove.body).toBe(200);
    const next = await approve(team.owner, removed.grant_id);
    expect(next.json().grant).toMatchObject({ status: "pending", approvals: "1 of 2" });
    const firsts = (await auditOf(team, removed.grant_id)).filter(
      (e: { action: string }) => e.action === "grant_first_approved",
    );
    expect(firsts).toHaveLength(2);
  });

  it("a folder_standing confirmation is refused once the credential moved to another folder", async () => {
    const team = await twoPersonTeam();
    await team.owner.browser.request("POST", `/api/orgs/members/${team.admin.operatorId}/role`, {
      role: "owner",
    });
    const prod = await team.owner.browser.request("POST", "/api/items", {
      name: "PROD_KEY",
      value: "sk_prod_value_00000001",
      environment: "staging",
      allowed_hosts: ["api.latch.test"],
      folder_name: "prod",
    });
    expect(prod.statusCode, prod.body).toBe(201);
    const grant = await team.requestGrant();
    const first = await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "apis",
    });
    expect(first.json().grant.approvals).toBe("1 of 2");
    const items = (await team.admin.browser.request("GET", "/api/items")).json().items;
    const apiKey = items.find((i: { name: string }) => i.name === "API_KEY");
    const moved = await team.admin.browser.request("POST", `/api/items/${apiKey.id}/meta`, {
      folder_name: "prod",
    });
    expect(moved.statusCode, moved.body).toBe(200);
    const second = await team.admin.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "prod",
    });
    expect(second.statusCode, second.body).toBe(409);
    expect(second.json().error.code).toBe("approval_mismatch");
    expect(second.json().error.message).toContain("moved to another folder");
    expect((await inboxEntry(team, grant.grant_id))?.approvals).toBe("1 of 2");
    const prodCall = await h.app.inject({
      method: "POST",
      url: "/api/grants/request",
      headers: { authorization: `Bearer ${team.token}`, "content-type": "application/json" },
      payload: JSON.stringify({
        item_name: "PROD_KEY",
        host: "api.latch.test",
        method: "GET",
        path: "/v1/p",
      }),
    });
    expect(prodCall.json().grant.status).toBe("pending");
    // Moved back, the same folder is confirmed as the first owner approved it.
    const back = await team.admin.browser.request("POST", `/api/items/${apiKey.id}/meta`, {
      folder_name: "apis",
    });
    expect(back.statusCode, back.body).toBe(200);
    const confirmed = await team.admin.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "apis",
    });
    expect(confirmed.json().grant).toMatchObject({ status: "active", approvals: "2 of 2" });
  });

  it("a first approval does not count again when its member is invited back or promoted again", async () => {
    const team = await twoPersonTeam();
    const approve = (member: { browser: typeof team.owner.browser }, grantId: string) =>
      member.browser.request("POST", `/api/grants/${grantId}/approve`, { policy: "item_standing" });
    const setRole = (operatorId: string, role: string) =>
      team.owner.browser.request("POST", `/api/orgs/members/${operatorId}/role`, { role });

    const demoted = await team.requestGrant();
    expect((await approve(team.approver, demoted.grant_id)).json().grant.approvals).toBe("1 of 2");
    expect((await setRole(team.approver.operatorId, "auditor")).statusCode).toBe(200);
    expect((await setRole(team.approver.operatorId, "approver")).statusCode).toBe(200);
    const afterPromotion = await approve(team.admin, demoted.grant_id);
    expect(afterPromotion.json().grant).toMatchObject({ status: "pending", approvals: "1 of 2" });
    expect((await inboxEntry(team, demoted.grant_id))?.first_approval).toMatchObject({
      email: team.admin.email,
    });
    const roleChange = (await team.owner.browser.request("GET", "/api/audit"))
      .json()
      .events.find(
        (e: { action: string; detail: { to?: string } }) =>
          e.action === "member_role_changed" && e.detail.to === "auditor",
      );
    expect(roleChange.detail.first_approvals_voided).toBe(1);

    const removed = await team.requestGrant();
    expect((await approve(team.approver, removed.grant_id)).json().grant.approvals).toBe("1 of 2");
    const remove = await team.owner.browser.request(
      "DELETE",
      `/api/orgs/members/${team.approver.operatorId}`,
    );
    expect(remove.statusCode, remove.body).toBe(200);
    const invited = await team.owner.browser.request("POST", "/api/orgs/members/invite", {
      email: team.approver.email,
      role: "approver",
    });
    expect(invited.statusCode, invited.body).toBe(201);
    const joined = await team.approver.browser.request("POST", "/invite", {
      token: lastInviteTokenFor(h.inbox, team.approver.email),
    });
    expect(joined.statusCode, joined.body).toBe(200);
    const afterReturn = await approve(team.owner, removed.grant_id);
    expect(afterReturn.json().grant).toMatchObject({ status: "pending", approvals: "1 of 2" });
    expect(await isCovered(team, "/v1/call-returned")).toBe(false);
  });

  it("a prompt or 8-hour approval still needs one member", async () => {
    const team = await twoPersonTeam();
    for (const policy of ["prompt", "session"]) {
      const grant = await team.requestGrant();
      const approved = await team.approver.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
        policy,
      });
      expect(approved.json().grant, policy).toMatchObject({ status: "active", approvals: null });
    }
  });

  it("a standing approval waiting for its second member may still be approved once instead", async () => {
    const team = await twoPersonTeam();
    const grant = await team.requestGrant();
    await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "item_standing",
    });
    const once = await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "prompt",
    });
    expect(once.json().grant).toMatchObject({ status: "active", policy: "prompt" });
  });

  it("a stored credential's Always allow waits for a second member; the request that asked goes once", async () => {
    const team = await twoPersonTeam();
    const asked = await askCall(h, team.token, { host: "api.other.test", method: "GET", path: "/v1/me" });
    expect(asked.statusCode).toBe(200);
    const needs = (await team.owner.browser.request("GET", "/api/inbox")).json().requests;
    const need = needs.find((n: { host: string }) => n.host === "api.other.test");
    const fulfilled = await team.owner.browser.request("POST", `/api/need-items/${need.need_id}/fulfill`, {
      value: "other-secret-value",
      always_allow: true,
      scope: "credential",
    });
    expect(fulfilled.statusCode, fulfilled.body).toBe(200);
    expect(fulfilled.json().grant).toMatchObject({ status: "pending", approvals: "1 of 2" });
    const grants = (await team.owner.browser.request("GET", "/api/grants"))
      .json()
      .grants.filter((g: { item_name: string }) => g.item_name === fulfilled.json().item.name);
    expect(grants.map((g: { policy: string; status: string }) => `${g.policy}:${g.status}`).sort()).toEqual([
      "prompt:active",
      "prompt:pending",
    ]);
    const confirmed = await team.admin.browser.request(
      "POST",
      `/api/grants/${fulfilled.json().grant.grant_id}/approve`,
      {
        policy: "item_standing",
      },
    );
    expect(confirmed.json().grant).toMatchObject({
      status: "active",
      policy: "item_standing",
      approvals: "2 of 2",
    });
  });
});

describe("two members approving at once", () => {
  it("activate a pending two-person approval exactly once (the second's confirmations race)", async () => {
    const team = await twoPersonTeam();
    for (let round = 0; round < 5; round++) {
      const grant = await team.requestGrant();
      await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
        policy: "item_standing",
      });
      const answers = await Promise.all(
        [team.admin, team.approver].map((member) =>
          member.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
            policy: "item_standing",
          }),
        ),
      );
      expect(answers.map((a) => a.statusCode).sort(), answers.map((a) => a.body).join("\n")).toEqual([
        200, 409,
      ]);
      expect(answers.find((a) => a.statusCode === 409)!.json().error.code).toBe("grant_not_pending");
      const approved = (await auditOf(team, grant.grant_id)).filter(
        (e: { action: string }) => e.action === "grant_approved",
      );
      expect(approved).toHaveLength(1);
    }
  });

  it("two members giving the first approval at once: one is the first, the other the second", async () => {
    const team = await twoPersonTeam();
    for (let round = 0; round < 5; round++) {
      const grant = await team.requestGrant();
      const answers = await Promise.all(
        [team.owner, team.approver].map((member) =>
          member.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
            policy: "item_standing",
          }),
        ),
      );
      // Both are approvals that count: one recorded as the first, the other confirmed it (the
      // first's answer reads the row after it, so it may already show the grant active).
      expect(
        answers.map((a) => a.statusCode),
        answers.map((a) => a.body).join("\n"),
      ).toEqual([200, 200]);
      expect(answers.map((a) => a.json().grant.status)).toContain("active");
      const { db } = await testDatabase();
      const row = await db
        .selectFrom("grants")
        .selectAll()
        .where("id", "=", grant.grant_id)
        .executeTakeFirstOrThrow();
      expect(row.status).toBe("active");
      expect(row.first_approved_by).not.toBe(row.approved_by);
      const actions = (await auditOf(team, grant.grant_id)).map((e: { action: string }) => e.action);
      expect(actions.filter((a: string) => a === "grant_approved")).toHaveLength(1);
      expect(actions.filter((a: string) => a === "grant_first_approved")).toHaveLength(1);
    }
  });
});
