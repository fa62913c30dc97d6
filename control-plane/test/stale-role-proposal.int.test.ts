// A policy proposal under the two-person rule speaks for the member who made it, as a first
// approval does (DECISIONS "Teams"): once that member is removed, or demoted to a role that may not
// edit policies, their proposal is the first of no one. A confirmation then finds it gone (404), it
// is discarded (audited `policy_proposal_discarded`, reason `proposer_gone`) and the saved list
// stays as it was: one member alone never applies a list that allows more.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, startHosted } from "./hosted.ts";
import { type Member, startTeam, type Team } from "./teams.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

const ALLOW_READS = { id: "reads", name: "Reads", effect: "allow", match: { methods: ["GET"] } };

async function auditOf(member: Member, action: string) {
  const answer = await member.browser.request("GET", `/api/audit?action=${action}`);
  expect(answer.statusCode, answer.body).toBe(200);
  return (
    answer.json().events as { action: string; reason: string | null; detail: Record<string, unknown> }[]
  ).filter((event) => event.action === action);
}

/** A team under standing_approvals_need 2 whose admin proposed a list that allows more. */
async function teamWithProposal(): Promise<{ team: Team; proposalId: string; version: number }> {
  const team = await startTeam(h);
  const set = await team.owner.browser.request("PATCH", "/api/orgs/settings", { standing_approvals_need: 2 });
  expect(set.statusCode, set.body).toBe(200);
  const saved = await team.admin.browser.request("GET", "/api/policies");
  const proposed = await team.admin.browser.request(
    "PUT",
    "/api/policies",
    { rules: [ALLOW_READS] },
    { "if-match": saved.headers.etag as string },
  );
  expect(proposed.statusCode, proposed.body).toBe(202);
  return { team, proposalId: proposed.json().proposal.id, version: saved.json().version };
}

describe("a proposal whose proposer may no longer edit policies", () => {
  for (const how of ["removed", "demoted to auditor"] as const) {
    it(`is gone for the confirming owner when its admin was ${how}`, async () => {
      const { team, proposalId, version } = await teamWithProposal();
      const gone =
        how === "removed"
          ? await team.owner.browser.request("DELETE", `/api/orgs/members/${team.admin.operatorId}`)
          : await team.owner.browser.request("POST", `/api/orgs/members/${team.admin.operatorId}/role`, {
              role: "auditor",
            });
      expect(gone.statusCode, gone.body).toBe(200);
      const confirmed = await team.owner.browser.request("POST", "/api/policies/proposal/confirm", {
        proposal_id: proposalId,
      });
      expect(confirmed.statusCode, confirmed.body).toBe(404);
      expect(confirmed.json().error.code).toBe("not_found");
      const list = (await team.owner.browser.request("GET", "/api/policies")).json();
      expect(list.version).toBe(version);
      expect(list.rules).toEqual([]);
      expect(list.proposal ?? null).toBeNull();
      expect(await auditOf(team.owner, "policies_changed")).toEqual([]);
      const discarded = await auditOf(team.owner, "policy_proposal_discarded");
      expect(discarded).toHaveLength(1);
      expect(discarded[0]).toMatchObject({
        reason: "proposer_gone",
        detail: { proposal_id: proposalId, proposed_by: `operator:${team.admin.operatorId}` },
      });
      // Gone for good: a second confirmation finds nothing either.
      const again = await team.owner.browser.request("POST", "/api/policies/proposal/confirm", {
        proposal_id: proposalId,
      });
      expect(again.statusCode, again.body).toBe(404);
    });
  }

  it("is still confirmed by another member while its proposer may edit policies", async () => {
    const { team, proposalId, version } = await teamWithProposal();
    const confirmed = await team.owner.browser.request("POST", "/api/policies/proposal/confirm", {
      proposal_id: proposalId,
    });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    expect(confirmed.json().version).toBe(version + 1);
    expect(confirmed.json().rules).toMatchObject([{ id: "reads" }]);
  });
});

describe("a save or a confirmation is judged by the member's role in its own transaction", () => {
  // The request's role was judged when it arrived (operator-guard.ts, after its body); these call
  // the service as a request that passed then would, once the member was demoted or removed.
  it("refuses a demoted member's save and confirmation, and a removed member's save", async () => {
    const { team, proposalId, version } = await teamWithProposal();
    const policies = h.plane.services.policies;
    const demoted = await team.owner.browser.request(
      "POST",
      `/api/orgs/members/${team.admin.operatorId}/role`,
      {
        role: "auditor",
      },
    );
    expect(demoted.statusCode, demoted.body).toBe(200);
    await expect(
      policies.savePolicies(team.organisationId, `operator:${team.admin.operatorId}`, "any", [
        { id: "d", effect: "deny" },
      ]),
    ).rejects.toMatchObject({ code: "forbidden_role" });
    await expect(
      policies.confirmProposal(team.organisationId, `operator:${team.auditor.operatorId}`, proposalId),
    ).rejects.toMatchObject({ code: "forbidden_role" });
    const removed = await team.owner.browser.request(
      "DELETE",
      `/api/orgs/members/${team.approver.operatorId}`,
    );
    expect(removed.statusCode, removed.body).toBe(200);
    await expect(
      policies.savePolicies(team.organisationId, `operator:${team.approver.operatorId}`, "any", [
        { id: "d", effect: "deny" },
      ]),
    ).rejects.toMatchObject({ code: "forbidden" });
    const list = (await team.owner.browser.request("GET", "/api/policies")).json();
    expect(list.version).toBe(version);
    expect(list.rules).toEqual([]);
  });
});
