// One request id from the edge to the origin call: the control plane's log lines for an MCP
// http_request and the proxy's line for the Execute it sent carry the same `request_id`.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectAgent, type HostedHarness, listenHosted, operatorWithClient, toolAnswer } from "./hosted.ts";

let h: HostedHarness;
let url: string;

beforeAll(async () => {
  ({ h, url } = await listenHosted((_req, res) => res.end("{}")));
}, 60_000);
afterAll(() => h.close());

const requestIds = (text: string) =>
  new Set([...text.matchAll(/"request_id":"(req_[0-9a-f]{16})"/g)].map((m) => m[1]!));

describe("the request id travels from the control plane to the proxy", () => {
  it("appears in both tiers' log lines for one call", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: "sk_live_requestid_canary_9d1e",
      items: [{ name: "API_KEY" }],
      clientName: "request id agent",
    });
    const agent = await connectAgent(url, token);
    const asked = toolAnswer(
      await agent.callTool({ name: "request_grant", arguments: { item_name: "API_KEY" } }),
    );
    await op.request("POST", `/api/grants/${asked.grant_id}/approve`, { policy: "item_standing" });

    const proxyBefore = h.egress.logs.text().length;
    const answer = toolAnswer(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", path: "/v1/ping", item_name: "API_KEY" },
      }),
    );
    expect(answer.origin_status).toBe(200);
    const onProxy = requestIds(h.egress.logs.text().slice(proxyBefore));
    expect(onProxy.size).toBe(1);
    const [id] = [...onProxy];
    // The control plane logged the same id for the MCP request that made the call.
    expect(requestIds(h.logs.text()).has(id!)).toBe(true);
    await agent.close();
  });
});
