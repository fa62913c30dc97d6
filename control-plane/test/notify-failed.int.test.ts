// notify_failed: true (spec 3.1, 6; issue 21 item 13): when the approval mail cannot be sent (the
// SMTP server is gone), the pending grant is still made and listed, its answer says notify_failed
// true on every path that asks (http_request, request_grant, POST /api/grants/request), and the
// approval code still approves it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  connectAgent,
  type HostedHarness,
  operatorWithClient,
  startHosted,
  type ToolAnswer,
  toolAnswer,
} from "./hosted.ts";

const SECRET = "sk_live_notify_failed_canary_8e3f";
let h: HostedHarness;
let url: string;
let setUp: Awaited<ReturnType<typeof operatorWithClient>>;

beforeAll(async () => {
  h = await startHosted();
  url = await h.app.listen({ host: "127.0.0.1", port: 0 });
  h.egress.setHandler((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  });
  // Signing up needs the mail; then the mail server goes away.
  setUp = await operatorWithClient(h, {
    secret: SECRET,
    items: [{ name: "API_KEY" }, { name: "OTHER_KEY" }, { name: "THIRD_KEY" }],
    clientName: "notify agent",
  });
  await h.inbox.close();
}, 60_000);
afterAll(async () => {
  await h?.plane.close();
  await h?.egress.close();
});

describe("the approval mail cannot be sent", () => {
  it("answers pending with notify_failed true, and the grant is still there to approve", async () => {
    const agent = await connectAgent(url, setUp.token, "notify-agent");
    const call = { method: "GET", path: "/v1/me", item_name: "API_KEY" };
    const pending = toolAnswer(await agent.callTool({ name: "http_request", arguments: call }));
    expect(pending).toMatchObject({ status: "pending", notify_failed: true });
    expect(pending.approval_code).toMatch(/^\d{8}$/);

    const requested = toolAnswer(
      await agent.callTool({ name: "request_grant", arguments: { item_name: "OTHER_KEY" } }),
    );
    expect(requested).toMatchObject({ status: "pending", notify_failed: true });

    const viaApi = await h.app.inject({
      method: "POST",
      url: "/api/grants/request",
      headers: { authorization: `Bearer ${setUp.token}`, "content-type": "application/json" },
      payload: JSON.stringify({ item_name: "THIRD_KEY" }),
    });
    expect(viaApi.statusCode, viaApi.body).toBe(201);
    expect(viaApi.json()).toMatchObject({ notify_failed: true, grant: { status: "pending" } });

    const inbox = (await setUp.op.request("GET", "/api/inbox")).json().approvals as { grant_id: string }[];
    expect(inbox.map((g) => g.grant_id)).toContain(pending.grant_id);
    const approved = await setUp.op.request("POST", "/api/grants/approve-by-code", {
      code: pending.approval_code,
    });
    expect(approved.statusCode, approved.body).toBe(200);
    const sent: ToolAnswer = toolAnswer(await agent.callTool({ name: "http_request", arguments: call }));
    expect(sent.origin_status).toBe(200);
    await agent.close();
  });
});
