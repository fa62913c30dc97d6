// Policies under the two-person rule (DECISIONS "Teams" and "Policies"): with
// standing_approvals_need 2, a list that may allow a call the saved one does not is not applied by
// one member: PUT answers 202 and keeps it as the organisation's proposal until another member who
// may edit policies confirms it (against the version it was made from); lists that only narrow are
// saved at once; need 1 is unchanged. Two confirmations at once apply it once (on PostgreSQL the
// requests truly run side by side).
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabase } from "./database.ts";
import type { Browser, HostedHarness } from "./hosted.ts";
import { startHosted } from "./hosted.ts";
import { joinAs, type Member, startTeam, type Team } from "./teams.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

const ALLOW_READS = { id: "reads", name: "Reads", effect: "allow", match: { methods: ["GET"] } };
const DENY_ADMIN = { id: "no-admin", effect: "deny", match: { paths: ["/admin/**"] } };

/** A team (owner, admin, approver, auditor) and a second admin; `need` its two-person setting. */
async function teamWithNeed(need: 1 | 2): Promise<Team & { admin2: Member }> {
  const team = await startTeam(h);
  if (need === 2) {
    const set = await team.owner.browser.request("PATCH", "/api/orgs/settings", {
      standing_approvals_need: 2,
    });
    expect(set.statusCode, set.body).toBe(200);
  }
  const admin2 = await joinAs(h, team.owner.browser, "admin", "admin2");
  return { ...team, admin2 };
}

async function put(member: Member | Browser, rules: unknown[], ifMatch?: string) {
  const browser = "browser" in member ? member.browser : member;
  const tag = ifMatch ?? ((await browser.request("GET", "/api/policies")).headers.etag as string);
  return browser.request("PUT", "/api/policies", { rules }, { "if-match": tag });
}

async function policies(member: Member) {
  const answer = await member.browser.request("GET", "/api/policies");
  expect(answer.statusCode).toBe(200);
  return { etag: answer.headers.etag, ...answer.json() };
}

/** The agent's dry run of GET api.latch.test/v1/x: which rule would decide it, and whether it would go. */
async function dryRun(team: Team, method = "GET", path = "/v1/x") {
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
        arguments: { item_name: "API_KEY", host: "api.latch.test", method, path, dry_run: true },
      },
    }),
  });
  expect(answer.statusCode, answer.body).toBe(200);
  const text = answer.body.startsWith("{")
    ? answer.body
    : answer.body
        .split("\n")
        .find((line) => line.startsWith("data:"))!
        .slice(5);
  const result = JSON.parse(text).result as { content: { text: string }[] };
  return JSON.parse(result.content[0]!.text) as {
    policy: { rule_id: string; effect: string } | null;
    would_send: boolean;
  };
}

async function auditOf(member: Member, action: string) {
  const events = (await member.browser.request("GET", `/api/audit?action=${action}`)).json().events as {
    action: string;
    actor_name: string | null;
    reason: string | null;
    detail: Record<string, unknown>;
  }[];
  return events.filter((e) => e.action === action);
}

describe("a list that may allow more, under standing_approvals_need 2", () => {
  it("is 202 pending from one admin, changes nothing, and applies once a second admin confirms", async () => {
    const team = await teamWithNeed(2);
    const proposed = await put(team.admin, [ALLOW_READS], '"0"');
    expect(proposed.statusCode, proposed.body).toBe(202);
    expect(proposed.headers.etag).toBe('"0"');
    const body = proposed.json();
    expect(body).toMatchObject({
      status: "pending",
      approvals: "1 of 2",
      proposal: {
        base_version: 0,
        rules: [{ id: "reads", effect: "allow" }],
        proposed_by: `operator:${team.admin.operatorId}`,
      },
    });
    expect(body.proposal.id).toMatch(/^ppl_[a-z0-9]{16}$/);
    expect(typeof body.proposal.proposed_at).toBe("string");

    // Nothing applied: the list is still empty and the agent's call still needs an approval.
    const listed = await policies(team.auditor);
    expect(listed).toMatchObject({ etag: '"0"', version: 0, rules: [], proposal: body.proposal });
    expect(await dryRun(team)).toMatchObject({ policy: null, would_send: false });
    const [row] = await auditOf(team.owner, "policy_proposed");
    expect(row).toMatchObject({
      actor_name: team.admin.email,
      detail: {
        proposal_id: body.proposal.id,
        base_version: 0,
        allow: 1,
        proposed_rules: body.proposal.rules,
      },
    });
    expect(await auditOf(team.owner, "policies_changed")).toEqual([]);

    // The proposer cannot be their own second member.
    const self = await team.admin.browser.request("POST", "/api/policies/proposal/confirm", {
      proposal_id: body.proposal.id,
    });
    expect(self.statusCode).toBe(409);
    expect(self.json().error.code).toBe("second_member_required");
    expect((await policies(team.owner)).proposal?.id).toBe(body.proposal.id);

    // An approver may not edit policies, so may not confirm either.
    const approver = await team.approver.browser.request("POST", "/api/policies/proposal/confirm", {
      proposal_id: body.proposal.id,
    });
    expect(approver.json().error.code).toBe("forbidden_role");

    const confirmed = await team.admin2.browser.request("POST", "/api/policies/proposal/confirm", {
      proposal_id: body.proposal.id,
    });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    expect(confirmed.headers.etag).toBe('"1"');
    expect(confirmed.json()).toMatchObject({
      version: 1,
      rules: [{ id: "reads" }],
      updated_by: `operator:${team.admin2.operatorId}`,
    });
    expect(await policies(team.owner)).toMatchObject({ version: 1, proposal: null });
    expect(await dryRun(team)).toMatchObject({
      policy: { rule_id: "reads", effect: "allow" },
      would_send: true,
    });
    const [changed] = await auditOf(team.owner, "policies_changed");
    expect(changed).toMatchObject({
      actor_name: team.admin2.email,
      detail: {
        version: 1,
        proposal_id: body.proposal.id,
        proposed_by: `operator:${team.admin.operatorId}`,
        confirmed_by: `operator:${team.admin2.operatorId}`,
        saved_rules: confirmed.json().rules,
      },
    });

    // Gone once applied.
    const again = await team.owner.browser.request("POST", "/api/policies/proposal/confirm", {
      proposal_id: body.proposal.id,
    });
    expect(again.statusCode).toBe(404);
    expect(again.json().error.code).toBe("not_found");
  });

  it("is also pending from the owner, and keeps the If-Match and stale rules", async () => {
    const team = await teamWithNeed(2);
    const stale = await put(team.owner, [ALLOW_READS], '"3"');
    expect(stale.statusCode).toBe(409);
    expect(stale.json().error.code).toBe("stale_version");
    const blind = await team.owner.browser.request("PUT", "/api/policies", { rules: [ALLOW_READS] });
    expect(blind.statusCode).toBe(428);
    const proposed = await put(team.owner, [ALLOW_READS], "*");
    expect(proposed.statusCode, proposed.body).toBe(202);
    expect(await policies(team.admin)).toMatchObject({ version: 0, rules: [] });
  });

  it("is refused as stale_version and dropped when the list moved on before the confirmation", async () => {
    const team = await teamWithNeed(2);
    const proposal = (await put(team.admin, [ALLOW_READS], '"0"')).json().proposal;
    // A narrowing save applies at once and drops the proposal made against the old version.
    const narrowed = await put(team.owner, [DENY_ADMIN], '"0"');
    expect(narrowed.statusCode, narrowed.body).toBe(200);
    expect((await policies(team.owner)).proposal).toBeNull();
    const superseded = await auditOf(team.owner, "policy_proposal_discarded");
    expect(superseded[0]).toMatchObject({ reason: "superseded", detail: { proposal_id: proposal.id } });
    expect(
      (
        await team.admin2.browser.request("POST", "/api/policies/proposal/confirm", {
          proposal_id: proposal.id,
        })
      ).statusCode,
    ).toBe(404);
  });

  it("a confirmation against a version that is no longer saved is 409 stale_version and drops it", async () => {
    const team = await teamWithNeed(2);
    expect((await put(team.owner, [DENY_ADMIN], '"0"')).statusCode).toBe(200);
    const proposal = (await put(team.admin, [DENY_ADMIN, ALLOW_READS], '"1"')).json().proposal;
    expect(proposal.base_version).toBe(1);
    // A save on another replica that raced the proposal: committed after the proposal read
    // version 1, so its drop of the waiting proposal came before the proposal was written.
    const { db } = await testDatabase();
    await db
      .updateTable("policy_lists")
      .set({ version: sql`version + 1` })
      .where("organisation_id", "=", team.organisationId)
      .execute();
    const stale = await team.admin2.browser.request("POST", "/api/policies/proposal/confirm", {
      proposal_id: proposal.id,
    });
    expect(stale.statusCode, stale.body).toBe(409);
    expect(stale.json().error).toMatchObject({ code: "stale_version", version: 2 });
    expect(await policies(team.owner)).toMatchObject({
      version: 2,
      rules: [{ id: "no-admin" }],
      proposal: null,
    });
    expect((await auditOf(team.owner, "policy_proposal_discarded"))[0]).toMatchObject({
      reason: "stale_version",
      detail: { proposal_id: proposal.id, base_version: 1, version: 2 },
    });
    expect(await dryRun(team)).toMatchObject({ policy: null, would_send: false });
  });

  it("two confirmations at once apply it once", async () => {
    const team = await teamWithNeed(2);
    const proposal = (await put(team.admin, [ALLOW_READS], '"0"')).json().proposal;
    const answers = await Promise.all(
      [team.owner, team.admin2].map((m) =>
        m.browser.request("POST", "/api/policies/proposal/confirm", { proposal_id: proposal.id }),
      ),
    );
    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 404]);
    expect(await policies(team.owner)).toMatchObject({ version: 1, proposal: null });
    expect(await auditOf(team.owner, "policies_changed")).toHaveLength(1);
  });

  it("a newer wider list replaces the proposal; discarding it is audited", async () => {
    const team = await teamWithNeed(2);
    const first = (await put(team.admin, [ALLOW_READS], '"0"')).json().proposal;
    const second = (await put(team.admin2, [{ ...ALLOW_READS, match: {} }], '"0"')).json().proposal;
    expect(second.id).not.toBe(first.id);
    expect((await policies(team.owner)).proposal.id).toBe(second.id);
    expect((await auditOf(team.owner, "policy_proposed"))[0]?.detail.replaced_proposal_id).toBe(first.id);
    expect(
      (await team.owner.browser.request("POST", "/api/policies/proposal/confirm", { proposal_id: first.id }))
        .statusCode,
    ).toBe(404);

    const auditor = await team.auditor.browser.request("DELETE", "/api/policies/proposal");
    expect(auditor.json().error.code).toBe("forbidden_role");
    const discarded = await team.admin2.browser.request("DELETE", "/api/policies/proposal");
    expect(discarded.statusCode, discarded.body).toBe(200);
    expect((await policies(team.owner)).proposal).toBeNull();
    expect((await auditOf(team.owner, "policy_proposal_discarded"))[0]).toMatchObject({
      actor_name: team.admin2.email,
      detail: { proposal_id: second.id },
    });
    expect((await team.admin2.browser.request("DELETE", "/api/policies/proposal")).statusCode).toBe(404);
    expect(await policies(team.owner)).toMatchObject({ version: 0, rules: [] });
  });

  it("moving an allow rule above a deny rule is wider", async () => {
    const team = await teamWithNeed(2);
    expect((await put(team.owner, [{ effect: "allow" }], '"0"')).statusCode).toBe(202);
    await team.owner.browser.request("DELETE", "/api/policies/proposal");
    const both = [DENY_ADMIN, ALLOW_READS];
    const saved = await put(team.owner, both, '"0"');
    expect(saved.statusCode).toBe(202);
    const applied = await team.admin.browser.request("POST", "/api/policies/proposal/confirm", {
      proposal_id: saved.json().proposal.id,
    });
    expect(applied.statusCode, applied.body).toBe(200);
    const moved = await put(team.admin, [ALLOW_READS, DENY_ADMIN], '"1"');
    expect(moved.statusCode).toBe(202);
    expect(await dryRun(team, "GET", "/admin/x")).toMatchObject({
      policy: { rule_id: "no-admin", effect: "deny" },
    });
  });

  it("loosening an allow rule's rate limit is wider", async () => {
    const team = await teamWithNeed(2);
    const limited = { ...ALLOW_READS, rate_limit: { calls: 5, per: "hour" } };
    const proposal = (await put(team.owner, [limited], '"0"')).json().proposal;
    expect(
      (
        await team.admin.browser.request("POST", "/api/policies/proposal/confirm", {
          proposal_id: proposal.id,
        })
      ).statusCode,
    ).toBe(200);
    const looser = await put(team.admin, [{ ...limited, rate_limit: { calls: 500, per: "hour" } }], '"1"');
    expect(looser.statusCode).toBe(202);
    expect((await policies(team.owner)).rules[0].rate_limit).toEqual({ calls: 5, per: "hour" });
  });
});

describe("a list that only narrows, under standing_approvals_need 2", () => {
  it("is saved at once: a deny rule added, an allow rule removed or disabled, a name changed", async () => {
    const team = await teamWithNeed(2);
    const proposal = (await put(team.admin, [ALLOW_READS, { id: "api", effect: "allow" }], '"0"')).json()
      .proposal;
    await team.owner.browser.request("POST", "/api/policies/proposal/confirm", { proposal_id: proposal.id });
    const steps: unknown[][] = [
      [DENY_ADMIN, ALLOW_READS, { id: "api", effect: "allow" }],
      [DENY_ADMIN, { ...ALLOW_READS, name: "Reads, renamed" }, { id: "api", effect: "allow" }],
      [DENY_ADMIN, { ...ALLOW_READS, enabled: false }, { id: "api", effect: "allow" }],
      [DENY_ADMIN, { id: "api", effect: "allow" }, { id: "tail", effect: "ask" }],
      [DENY_ADMIN],
    ];
    for (const [index, rules] of steps.entries()) {
      const saved = await put(team.admin, rules);
      expect(saved.statusCode, `step ${index}: ${saved.body}`).toBe(200);
      expect(saved.json().version).toBe(index + 2);
    }
    expect(await dryRun(team)).toMatchObject({ policy: null, would_send: false });
  });
});

describe("standing_approvals_need 1", () => {
  it("saves any list at once, as before, and has no proposal", async () => {
    const team = await teamWithNeed(1);
    const saved = await put(team.admin, [ALLOW_READS], '"0"');
    expect(saved.statusCode, saved.body).toBe(200);
    expect(saved.json()).toMatchObject({ version: 1, rules: [{ id: "reads" }] });
    expect(await policies(team.owner)).toMatchObject({ version: 1, proposal: null });
    expect(await dryRun(team)).toMatchObject({
      policy: { rule_id: "reads", effect: "allow" },
      would_send: true,
    });
    expect((await team.owner.browser.request("DELETE", "/api/policies/proposal")).statusCode).toBe(404);
  });
});
