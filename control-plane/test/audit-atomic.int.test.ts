// A members change and its audit row commit together (DECISIONS "Teams", "Audit ledger"): when the
// row cannot be written (the database refuses it, as a full disk or a dropped connection at that
// statement would), the change is not made either: no role changed, no member removed, no
// invitation stored or mailed, no invitation spent. Before, each row was written after its
// change's transaction, and a crash in between lost the row. Then the same change, retried with
// the audit working, goes through once, with one row.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { refuseAuditRows } from "./database.ts";
import { type HostedHarness, signUpOperator, startHosted, uniqueEmail } from "./hosted.ts";
import { lastInviteTokenFor, startTeam, type Team } from "./teams.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

/** Runs `attempt` while the organisation's `action` rows are refused; answers its response. */
async function withAuditRefused<T>(team: Team, action: string, attempt: () => Promise<T>): Promise<T> {
  const restore = await refuseAuditRows(h.plane.database, team.organisationId, action);
  try {
    return await attempt();
  } finally {
    await restore();
  }
}

async function members(team: Team) {
  return (await team.owner.browser.request("GET", "/api/orgs/members")).json() as {
    members: { operator_id: string; email: string; role: string }[];
    invites: { email: string }[];
  };
}

async function auditRows(team: Team, action: string) {
  return (await team.owner.browser.request("GET", `/api/audit?action=${action}`)).json().events as {
    detail: Record<string, unknown>;
  }[];
}

/** The organisation's `action` rows about `email`. */
async function rowsAbout(team: Team, action: string, email: string) {
  return (await auditRows(team, action)).filter((row) => row.detail.email === email);
}

describe("a members change whose audit row cannot be written", () => {
  it("changes no role, and the retry changes it once, with one row", async () => {
    const team = await startTeam(h);
    const url = `/api/orgs/members/${team.approver.operatorId}/role`;
    const refused = await withAuditRefused(team, "member_role_changed", () =>
      team.owner.browser.request("POST", url, { role: "auditor" }),
    );
    expect(refused.statusCode, refused.body).toBe(500);
    expect(refused.json().error.code).toBe("internal");
    const after = (await members(team)).members.find((m) => m.operator_id === team.approver.operatorId);
    expect(after?.role).toBe("approver");
    expect(await auditRows(team, "member_role_changed")).toHaveLength(0);

    const retried = await team.owner.browser.request("POST", url, { role: "auditor" });
    expect(retried.statusCode, retried.body).toBe(200);
    const rows = await auditRows(team, "member_role_changed");
    expect(rows).toHaveLength(1);
    expect(rows[0]?.detail).toMatchObject({ from: "approver", to: "auditor" });
  });

  it("removes no member (whose session still works), and hands no ownership over", async () => {
    const team = await startTeam(h);
    const removed = await withAuditRefused(team, "member_removed", () =>
      team.owner.browser.request("DELETE", `/api/orgs/members/${team.approver.operatorId}`),
    );
    expect(removed.statusCode, removed.body).toBe(500);
    expect((await members(team)).members.map((m) => m.operator_id)).toContain(team.approver.operatorId);
    const still = (await team.approver.browser.request("GET", "/api/auth/me")).json();
    expect(still.organisation.id).toBe(team.organisationId);

    const left = await withAuditRefused(team, "member_removed", () =>
      team.auditor.browser.request("POST", "/api/orgs/leave", {}),
    );
    expect(left.statusCode, left.body).toBe(500);
    expect((await members(team)).members.map((m) => m.operator_id)).toContain(team.auditor.operatorId);

    const transferred = await withAuditRefused(team, "ownership_transferred", () =>
      team.owner.browser.request("POST", "/api/orgs/transfer", { operator_id: team.admin.operatorId }),
    );
    expect(transferred.statusCode, transferred.body).toBe(500);
    const roles = new Map((await members(team)).members.map((m) => [m.operator_id, m.role]));
    expect(roles.get(team.owner.operatorId)).toBe("owner");
    expect(roles.get(team.admin.operatorId)).toBe("admin");

    const retried = await team.owner.browser.request(
      "DELETE",
      `/api/orgs/members/${team.approver.operatorId}`,
    );
    expect(retried.statusCode, retried.body).toBe(200);
    expect(await auditRows(team, "member_removed")).toHaveLength(1);
    const me = (await team.approver.browser.request("GET", "/api/auth/me")).json();
    expect(me.organisation?.id).not.toBe(team.organisationId);
  });

  it("stores and mails no invitation, and withdraws none", async () => {
    const team = await startTeam(h);
    const email = uniqueEmail("not-invited");
    const mailsBefore = h.inbox.mails.length;
    const invited = await withAuditRefused(team, "member_invited", () =>
      team.owner.browser.request("POST", "/api/orgs/members/invite", { email, role: "auditor" }),
    );
    expect(invited.statusCode, invited.body).toBe(500);
    expect((await members(team)).invites.map((i) => i.email)).not.toContain(email);
    expect(h.inbox.mails.slice(mailsBefore).filter((m) => m.to === email)).toHaveLength(0);

    const sent = await team.owner.browser.request("POST", "/api/orgs/members/invite", {
      email,
      role: "auditor",
    });
    expect(sent.statusCode, sent.body).toBe(201);
    const inviteId = sent.json().invite.id as string;
    const withdrawn = await withAuditRefused(team, "invite_withdrawn", () =>
      team.owner.browser.request("DELETE", `/api/orgs/invites/${inviteId}`),
    );
    expect(withdrawn.statusCode, withdrawn.body).toBe(500);
    expect((await members(team)).invites.map((i) => i.email)).toContain(email);
    expect(await rowsAbout(team, "member_invited", email)).toHaveLength(1);
    expect(await rowsAbout(team, "invite_withdrawn", email)).toHaveLength(0);
  });

  it("spends no invitation and adds no member; the same link then works once", async () => {
    const team = await startTeam(h);
    const joiner = await signUpOperator(h, { label: "joiner" });
    const sent = await team.owner.browser.request("POST", "/api/orgs/members/invite", {
      email: joiner.email,
      role: "approver",
    });
    expect(sent.statusCode, sent.body).toBe(201);
    const token = lastInviteTokenFor(h.inbox, joiner.email);
    const refused = await withAuditRefused(team, "member_joined", () =>
      joiner.browser.request("POST", "/invite", { token }),
    );
    expect(refused.statusCode, refused.body).toBe(500);
    expect((await members(team)).members.map((m) => m.email)).not.toContain(joiner.email);

    const joined = await joiner.browser.request("POST", "/invite", { token });
    expect(joined.statusCode, joined.body).toBe(200);
    expect((await members(team)).members.map((m) => m.email)).toContain(joiner.email);
    expect(
      (await auditRows(team, "member_joined")).filter((r) => r.detail.email === joiner.email),
    ).toHaveLength(1);
    const again = await joiner.browser.request("POST", "/invite", { token });
    expect(again.statusCode).toBe(409);
  });
});

/** A grant's status as the operator's listing shows it. */
async function grantStatus(team: Team, grantId: string): Promise<string | undefined> {
  const listed = (await team.owner.browser.request("GET", "/api/grants")).json().grants as {
    grant_id: string;
    status: string;
  }[];
  return listed.find((g) => g.grant_id === grantId)?.status;
}

/** The organisation's `action` rows about grant `grantId`. */
async function rowsOfGrant(team: Team, action: string, grantId: string) {
  return (await auditRows(team, action)).filter((row) => row.detail.grant_id === grantId);
}

describe("an approval decision or a setting whose audit row cannot be written", () => {
  it("approves, revokes and denies nothing; each retried goes through once, with one row", async () => {
    const team = await startTeam(h);
    const asked = await team.requestGrant("/v1/atomic-approve");
    const approve = () =>
      team.owner.browser.request("POST", `/api/grants/${asked.grant_id}/approve`, { policy: "prompt" });
    const refusedApproval = await withAuditRefused(team, "grant_approved", approve);
    expect(refusedApproval.statusCode, refusedApproval.body).toBe(500);
    expect(await grantStatus(team, asked.grant_id)).toBe("pending");
    expect((await approve()).statusCode).toBe(200);
    expect(await rowsOfGrant(team, "grant_approved", asked.grant_id)).toHaveLength(1);

    const revoke = () => team.owner.browser.request("POST", `/api/grants/${asked.grant_id}/revoke`);
    const refusedRevoke = await withAuditRefused(team, "grant_revoked", revoke);
    expect(refusedRevoke.statusCode, refusedRevoke.body).toBe(500);
    expect(await grantStatus(team, asked.grant_id)).toBe("active");
    expect((await revoke()).statusCode).toBe(200);
    expect(await grantStatus(team, asked.grant_id)).toBe("revoked");
    expect(await rowsOfGrant(team, "grant_revoked", asked.grant_id)).toHaveLength(1);

    const other = await team.requestGrant("/v1/atomic-deny");
    const deny = () => team.owner.browser.request("POST", `/api/grants/${other.grant_id}/revoke`);
    const refusedDenial = await withAuditRefused(team, "grant_denied", deny);
    expect(refusedDenial.statusCode, refusedDenial.body).toBe(500);
    expect(await grantStatus(team, other.grant_id)).toBe("pending");
    expect((await deny()).statusCode).toBe(200);
    expect(await rowsOfGrant(team, "grant_denied", other.grant_id)).toHaveLength(1);
  });

  it("records no first approval of two, and changes no setting", async () => {
    const team = await startTeam(h);
    const settings = () =>
      team.owner.browser.request("PATCH", "/api/orgs/settings", { standing_approvals_need: 2 });
    const refusedSetting = await withAuditRefused(team, "setting_changed", settings);
    expect(refusedSetting.statusCode, refusedSetting.body).toBe(500);
    const before = (await team.owner.browser.request("GET", "/api/orgs/settings")).json();
    expect(before.organisation.standing_approvals_need).toBe(1);
    expect((await settings()).statusCode).toBe(200);
    expect(await auditRows(team, "setting_changed")).toHaveLength(1);

    const asked = await team.requestGrant("/v1/atomic-first");
    const first = () =>
      team.owner.browser.request("POST", `/api/grants/${asked.grant_id}/approve`, {
        policy: "item_standing",
      });
    const refusedFirst = await withAuditRefused(team, "grant_first_approved", first);
    expect(refusedFirst.statusCode, refusedFirst.body).toBe(500);
    // Not "1 of 2": the same member may still give the first approval, once.
    const retried = await first();
    expect(retried.statusCode, retried.body).toBe(200);
    expect(retried.json().grant.approvals).toBe("1 of 2");
    expect(await rowsOfGrant(team, "grant_first_approved", asked.grant_id)).toHaveLength(1);
  });
});

describe("a need request's denial whose audit row cannot be written", () => {
  it("denies nothing: the request still waits in the inbox, and the retry denies it once", async () => {
    const team = await startTeam(h);
    const asked = await h.app.inject({
      method: "POST",
      url: "/mcp",
      headers: { authorization: `Bearer ${team.token}`, "content-type": "application/json" },
      payload: {
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: {
          name: "http_request",
          arguments: { method: "GET", path: "https://atomic-need.latch.test/v1/x" },
        },
      },
    });
    const answer = JSON.parse(asked.json().result.content[0].text) as { status: string; need_id: string };
    expect(answer.status).toBe("need_item");
    const waiting = async () =>
      ((await team.owner.browser.request("GET", "/api/inbox")).json().requests as { need_id: string }[]).some(
        (r) => r.need_id === answer.need_id,
      );
    const deny = () => team.owner.browser.request("POST", `/api/need-items/${answer.need_id}/deny`, {});
    const refused = await withAuditRefused(team, "need_denied", deny);
    expect(refused.statusCode, refused.body).toBe(500);
    expect(await waiting()).toBe(true);
    expect((await deny()).statusCode).toBeLessThan(300);
    expect(await waiting()).toBe(false);
    expect(
      (await auditRows(team, "need_denied")).filter((r) => r.detail.need_id === answer.need_id),
    ).toHaveLength(1);
  });
});

describe("a credential change whose audit row cannot be written", () => {
  it("stores, rotates and deletes nothing, and the retries go through once, each with one row", async () => {
    const team = await startTeam(h);
    const op = team.owner.browser;
    const item = {
      name: "ATOMIC_KEY",
      value: "sk_atomic_first_0001",
      environment: "staging",
      allowed_hosts: ["api.latch.test"],
    };
    const refusedStore = await withAuditRefused(team, "item_created", () =>
      op.request("POST", "/api/items", item),
    );
    expect(refusedStore.statusCode, refusedStore.body).toBe(500);
    const names = async () =>
      ((await op.request("GET", "/api/items")).json().items as { name: string }[]).map((i) => i.name);
    expect(await names()).not.toContain("ATOMIC_KEY");

    const stored = await op.request("POST", "/api/items", item);
    expect(stored.statusCode, stored.body).toBe(201);
    const id = stored.json().item.id as string;
    const last4 = async () =>
      ((await op.request("GET", "/api/items")).json().items as { id: string; last4: string }[]).find(
        (i) => i.id === id,
      )?.last4;
    const refusedRotate = await withAuditRefused(team, "item_rotated", () =>
      op.request("POST", `/api/items/${id}/rotate`, { value: "sk_atomic_second_0002" }),
    );
    expect(refusedRotate.statusCode, refusedRotate.body).toBe(500);
    expect(await last4()).toBe("0001");
    const refusedDelete = await withAuditRefused(team, "item_deleted", () =>
      op.request("DELETE", `/api/items/${id}`),
    );
    expect(refusedDelete.statusCode, refusedDelete.body).toBe(500);
    expect(await names()).toContain("ATOMIC_KEY");

    expect(
      (await op.request("POST", `/api/items/${id}/rotate`, { value: "sk_atomic_second_0002" })).statusCode,
    ).toBe(200);
    expect(await last4()).toBe("0002");
    expect((await op.request("DELETE", `/api/items/${id}`)).statusCode).toBe(200);
    for (const action of ["item_created", "item_rotated", "item_deleted"]) {
      const rows = (await auditRows(team, action)) as unknown as { item_name: string | null }[];
      expect(
        rows.filter((row) => row.item_name === "ATOMIC_KEY"),
        action,
      ).toHaveLength(1);
    }
  });
});

describe("an approval request whose audit row cannot be written", () => {
  it("leaves no pending request behind; the retry asks once, with one row and one mail", async () => {
    const team = await startTeam(h);
    const ask = () =>
      h.app.inject({
        method: "POST",
        url: "/api/grants/request",
        headers: { authorization: `Bearer ${team.token}`, "content-type": "application/json" },
        payload: JSON.stringify({
          item_name: "API_KEY",
          host: "api.latch.test",
          method: "GET",
          path: "/v1/atomic-request",
        }),
      });
    const mailsBefore = h.inbox.mails.length;
    const refused = await withAuditRefused(team, "grant_requested", ask);
    expect(refused.statusCode, refused.body).toBe(500);
    const pending = async () =>
      ((await team.owner.browser.request("GET", "/api/inbox")).json().approvals as { grant_id: string }[])
        .length;
    expect(await pending()).toBe(0);

    const retried = await ask();
    expect(retried.statusCode, retried.body).toBe(201);
    const grantId = retried.json().grant.grant_id as string;
    expect(await pending()).toBe(1);
    expect(await rowsOfGrant(team, "grant_requested", grantId)).toHaveLength(1);
    // Announced: the operator's mail for it went out (the retry found no request waiting).
    await expect.poll(() => h.inbox.mails.length).toBeGreaterThan(mailsBefore);
  });
});

describe("a credential request whose audit row cannot be written", () => {
  it("leaves no pending request behind; the retry asks once, with one row", async () => {
    const team = await startTeam(h);
    const ask = () =>
      h.app.inject({
        method: "POST",
        url: "/mcp",
        headers: { authorization: `Bearer ${team.token}`, "content-type": "application/json" },
        payload: {
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: {
            name: "http_request",
            arguments: { method: "GET", path: "https://atomic-need-request.latch.test/v1/x" },
          },
        },
      });
    const refused = await withAuditRefused(team, "need_requested", ask);
    expect(JSON.stringify(refused.json())).not.toContain("need_item");
    const requests = async () =>
      (await team.owner.browser.request("GET", "/api/inbox")).json().requests as { need_id: string }[];
    expect(await requests()).toHaveLength(0);

    const retried = JSON.parse((await ask()).json().result.content[0].text) as {
      status: string;
      need_id: string;
    };
    expect(retried.status).toBe("need_item");
    expect((await requests()).map((r) => r.need_id)).toEqual([retried.need_id]);
    expect(
      (await auditRows(team, "need_requested")).filter((r) => r.detail.need_id === retried.need_id),
    ).toHaveLength(1);
  });
});
