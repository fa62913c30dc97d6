// Need requests end to end (spec 2.5, 3.1, 3.2): what an agent writes into one is shown as it will
// read, fulfilling always activates the asking agent's approval (under the two-person rule too, and
// when the agent named no call), and the inbox lists a bounded number of them.
import { newId } from "@latch/shared/ids";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newTestOrganisation } from "../../test/database.ts";
import { type HostedHarness, startHosted } from "../../test/hosted.ts";
import { startTeam, type Team } from "../../test/teams.ts";
import { createNeedsRepo, MAX_PENDING_NEEDS } from "./needs.repo.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

/** The agent's request_grant, in one JSON-RPC POST to /mcp, as a client without a session sends it. */
async function requestGrant(team: Team, args: Record<string, unknown>) {
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
      params: { name: "request_grant", arguments: args },
    }),
  });
  expect(answer.statusCode, answer.body).toBe(200);
  return JSON.parse(answer.json().result.content[0].text) as { status: string; need_id: string };
}

describe("a request the agent named by item_name alone", () => {
  it("fulfilled with Always under the two-person rule: the Always waits, the agent's one call is approved", async () => {
    const team = await startTeam(h);
    const set = await team.owner.browser.request("PATCH", "/api/orgs/settings", {
      standing_approvals_need: 2,
    });
    expect(set.statusCode, set.body).toBe(200);
    const asked = await requestGrant(team, { item_name: "NEW_TOKEN" });
    expect(asked.status).toBe("need_item");
    const fulfilled = await team.owner.browser.request("POST", `/api/need-items/${asked.need_id}/fulfill`, {
      value: "new-token-value",
      allowed_hosts: ["api.new.test"],
      always_allow: true,
    });
    expect(fulfilled.statusCode, fulfilled.body).toBe(200);
    expect(fulfilled.json().grant).toMatchObject({ status: "pending", approvals: "1 of 2" });
    const grants = (await team.owner.browser.request("GET", "/api/grants"))
      .json()
      .grants.filter((g: { item_name: string }) => g.item_name === "NEW_TOKEN");
    expect(grants.map((g: { policy: string; status: string }) => `${g.policy}:${g.status}`).sort()).toEqual([
      "prompt:active",
      "prompt:pending",
    ]);
    // As the collect page tells the operator: the agent's retry goes, once, whatever call it makes.
    const once = grants.find((g: { status: string }) => g.status === "active");
    expect(once).toMatchObject({ agent_id: team.clientId, call: null, consumed_at: null });
  });
});

describe("what the agent writes into a request", () => {
  it("is shown with its direction overrides, isolates and zero-width characters as U+FFFD, its name replaced by a credential name", async () => {
    const team = await startTeam(h);
    const name = "DEPLOY\u202E_YEK\u2066_X\u2069\u200B";
    const message = "rotate the\u2067 key\u200D\nthen deploy\u202Enur";
    // The client's name as a member may write it (safeString refuses control characters only).
    await h.plane.database.db
      .updateTable("clients")
      .set({ name: "Deploy\u202Etob\u200B" })
      .where("id", "=", team.clientId)
      .execute();
    const asked = await requestGrant(team, { item_name: name, task_description: message });
    expect(asked.status).toBe("need_item");
    // No credential name: the request carries one a value can be stored under (tools/tool-context.ts).
    const read = async () =>
      (await team.owner.browser.request("GET", `/api/need-items/${asked.need_id}`)).json().need;
    expect(await read()).toMatchObject({
      suggested_name: "API_TOKEN",
      client_name: "Deploy\uFFFDtob\uFFFD",
      message: "rotate the\uFFFD key\uFFFD\nthen deploy\uFFFDnur",
    });
    // The agent's retry finds the same request, not a second one.
    const again = await requestGrant(team, { item_name: name, task_description: message });
    expect(again.need_id).toBe(asked.need_id);
    const inbox = (await team.owner.browser.request("GET", "/api/inbox")).json().requests;
    expect(inbox.find((n: { need_id: string }) => n.need_id === asked.need_id)).toMatchObject({
      suggested_name: "API_TOKEN",
    });
  });
});

describe("the inbox's listing of pending requests", () => {
  it(`lists the newest ${MAX_PENDING_NEEDS}`, async () => {
    const organisationId = await newTestOrganisation(h.plane.database);
    const start = Date.UTC(2026, 0, 1);
    const rows = Array.from({ length: MAX_PENDING_NEEDS + 1 }, (_, i) => ({
      id: newId("ned"),
      organisation_id: organisationId,
      environment: "staging",
      kind: "secret",
      host: `api${i}.latch.test`,
      suggested_name: `TOKEN_${i}`,
      agent_id: "cli_agent",
      message: null,
      status: "pending",
      item_id: null,
      created_at: new Date(start + i * 1000),
      closed_at: null,
    }));
    await h.plane.database.db.insertInto("need_requests").values(rows).execute();
    const listed = await createNeedsRepo(h.plane.database.db).findPendingNeeds(organisationId);
    expect(listed).toHaveLength(MAX_PENDING_NEEDS);
    expect(listed[0]!.id).toBe(rows.at(-1)!.id);
    expect(listed.some((row) => row.id === rows[0]!.id)).toBe(false);
  });
});
