// The agent's words in GET /api/grants (the operator's listing, also `vault grants`): invisible
// characters (a direction override, a zero-width space) as U+FFFD, as the inbox, the Approvals
// section and the approval link's page show them, so "Read\u202Eetirw" cannot pass for another
// task. The agent's own list_grants answer (spec 2.4) keeps the words it wrote.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectAgent, type HostedHarness, listenHosted, operatorWithClient, toolAnswer } from "./hosted.ts";

const WRITTEN = "Read\u202Eetirw the\u200B repo";
const SHOWN = "Read\uFFFDetirw the\uFFFD repo";

let h: HostedHarness;
let url: string;
beforeAll(async () => {
  ({ h, url } = await listenHosted((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  }));
}, 60_000);
afterAll(async () => {
  await h?.close();
});

describe("the grants listing", () => {
  it("shows an operator the agent's invisible characters as U+FFFD, and the agent its own words", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: "sk_live_listing_text_6c2d",
      items: [{ name: "API_KEY" }],
      clientName: "listing agent",
    });
    const asked = await h.app.inject({
      method: "POST",
      url: "/api/grants/request",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      payload: JSON.stringify({ item_name: "API_KEY", task_description: WRITTEN }),
    });
    expect(asked.statusCode, asked.body).toBe(201);
    const grantId = asked.json().grant.grant_id as string;

    const listed = await op.request("GET", "/api/grants");
    expect(listed.statusCode, listed.body).toBe(200);
    const shown = listed.json().grants.find((g: { grant_id: string }) => g.grant_id === grantId);
    expect(shown.task_description).toBe(SHOWN);
    // The same words as the inbox shows them.
    const inbox = (await op.request("GET", "/api/inbox")).json().approvals;
    expect(inbox.find((g: { grant_id: string }) => g.grant_id === grantId).task_description).toBe(SHOWN);

    const agent = await connectAgent(url, token, "listing-agent");
    try {
      const own = toolAnswer(await agent.callTool({ name: "list_grants", arguments: {} })).grants as {
        grant_id: string;
        task_description: string;
      }[];
      expect(own.find((g) => g.grant_id === grantId)?.task_description).toBe(WRITTEN);
    } finally {
      await agent.close();
    }
  });
});
