// What the live inbox may write (DECISIONS "Approvals that reach the operator"). To a member
// removed (DECISIONS "Teams": removing a member ends their sessions' access to the organisation):
// nothing made after the removal, even in the seconds before the stream's periodic check (10 s)
// would have ended it, since the session is checked again before each event. And the agent's name,
// which the console shows in a browser notification, as every approval shows the agent's own
// words: a direction override or a zero-width space as U+FFFD.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectAgent, type HostedHarness, listenHosted, operatorWithClient, toolAnswer } from "./hosted.ts";
import { openEventStream } from "./sse.ts";
import { joinAs } from "./teams.ts";

let h: HostedHarness;
let url: string;

beforeAll(async () => {
  ({ h, url } = await listenHosted((_req, res) => res.end("ok")));
}, 60_000);
afterAll(async () => {
  await h.close();
});

describe("GET /api/inbox/stream of a member removed", () => {
  it("writes no event made after the removal, and ends before the session's next periodic check", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: "sk_live_inbox_removal_canary_7d41",
      items: [{ name: "API_KEY" }],
      clientName: "removal agent",
    });
    const agent = await connectAgent(url, token);
    const ask = (path: string) =>
      agent
        .callTool({
          name: "http_request",
          arguments: { item_name: "API_KEY", method: "POST", path, body: {} },
        })
        .then(toolAnswer);
    const approver = await joinAs(h, op, "approver", "removed-approver");
    const ownerStream = await openEventStream(`${url}/api/inbox/stream`, op);
    const stream = await openEventStream(`${url}/api/inbox/stream`, approver.browser);
    const openedAt = performance.now();
    await ownerStream.next("ready");
    await stream.next("ready");
    await ask("/v1/before-removal");
    expect((await stream.next("approval_requested", 2_000)).data.path).toBe("/v1/before-removal");
    await ownerStream.next("approval_requested", 2_000);

    const removed = await op.request("DELETE", `/api/orgs/members/${approver.operatorId}`);
    expect(removed.statusCode, removed.body).toBe(200);
    await ask("/v1/after-removal");
    // The hub has delivered it: the owner's stream in the same process has it.
    expect((await ownerStream.next("approval_requested", 2_000)).data.path).toBe("/v1/after-removal");
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(stream.events.filter((e) => e.type === "approval_requested").map((e) => e.data.path)).toEqual([
      "/v1/before-removal",
    ]);
    await expect.poll(() => stream.isEnded, { timeout: 2_000, interval: 50 }).toBe(true);
    // All of it well inside the first periodic check: the check before writing ended it.
    expect(performance.now() - openedAt).toBeLessThan(9_000);
    ownerStream.close();
    stream.close();
    await agent.close();
  }, 30_000);
});

describe("GET /api/inbox/stream and the agent's own words", () => {
  it("names an agent whose name hides characters with each one shown as U+FFFD", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: "sk_live_inbox_words_canary_3b80",
      items: [{ name: "API_KEY" }],
      clientName: "Read\u202Eetirw\u200B bot",
    });
    const agent = await connectAgent(url, token);
    const stream = await openEventStream(`${url}/api/inbox/stream`, op);
    await stream.next("ready");
    await agent.callTool({
      name: "http_request",
      arguments: { item_name: "API_KEY", method: "POST", path: "/v1/hidden-words", body: {} },
    });
    const requested = await stream.next("approval_requested", 2_000);
    expect((requested.data.agent as { name: string }).name).toBe("Read\uFFFDetirw\uFFFD bot");
    // The inbox the console loads says the same.
    const inbox = (await op.request("GET", "/api/inbox")).json() as { approvals: { agent_name: string }[] };
    expect(inbox.approvals.map((a) => a.agent_name)).toContain("Read\uFFFDetirw\uFFFD bot");
    stream.close();
    await agent.close();
  }, 30_000);
});
