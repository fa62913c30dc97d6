// Prometheus /metrics of the control plane: requests by route template and status, MCP tool calls
// by tool and outcome, approvals by outcome, egress RPC latency; on its own listener, and with no
// path as sent, token, host or value in any label.
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createControlPlaneMetrics, serveMetrics } from "../src/metrics/metrics.ts";
import { connectAgent, type HostedHarness, operatorWithClient, startHosted, toolAnswer } from "./hosted.ts";

const SECRET = "sk_live_metrics_canary_51ac";
const metrics = createControlPlaneMetrics();
let h: HostedHarness;
let url: string;
let server: Server;
let metricsUrl: string;

beforeAll(async () => {
  h = await startHosted({ metrics });
  url = await h.app.listen({ host: "127.0.0.1", port: 0 });
  h.egress.setHandler((_req, res) => res.end("{}"));
  server = await serveMetrics(metrics, "127.0.0.1:0");
  metricsUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
}, 60_000);
afterAll(async () => {
  server?.close();
  await h?.close();
});

/** The value of one sample line, 0 when absent. */
function sample(text: string, line: string): number {
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  return found ? Number(found.slice(line.length + 1)) : 0;
}

describe("the control plane's /metrics", () => {
  it("counts requests, tool calls, approvals and egress RPCs with bounded labels", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: SECRET,
      items: [{ name: "API_KEY" }],
      clientName: "metrics agent",
    });
    const agent = await connectAgent(url, token);
    const asked = toolAnswer(
      await agent.callTool({ name: "request_grant", arguments: { item_name: "API_KEY" } }),
    );
    expect(asked.status).toBe("pending");
    await op.request("POST", `/api/grants/${asked.grant_id}/approve`, { policy: "item_standing" });
    const answer = toolAnswer(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", path: "/v1/x", item_name: "API_KEY" },
      }),
    );
    expect(answer.origin_status).toBe(200);
    // A tool call that throws (a path with a backslash is refused before anything is looked up)
    // is counted by its code, like every other answer.
    const thrown = await agent.callTool({
      name: "http_request",
      arguments: { method: "GET", path: "/v1/a\\b", item_name: "API_KEY" },
    });
    expect(thrown.isError).toBe(true);
    await agent.close();
    // A path no route matches, and a single-use token in a query: neither may become a label.
    await fetch(`${url}/no/such/route-9f2c`);
    await fetch(`${url}/approve?token=tok_metrics_secret_77`);

    const response = await fetch(metricsUrl);
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(
      sample(text, 'latch_http_requests_total{route="/mcp",method="POST",status="200"}'),
    ).toBeGreaterThan(0);
    expect(sample(text, 'latch_http_requests_total{route="unmatched",method="GET",status="404"}')).toBe(1);
    expect(sample(text, 'latch_mcp_tool_calls_total{tool="request_grant",outcome="pending"}')).toBe(1);
    expect(sample(text, 'latch_mcp_tool_calls_total{tool="http_request",outcome="ok"}')).toBe(1);
    const thrownCode = toolAnswer(thrown).error as { code: string };
    expect(sample(text, `latch_mcp_tool_calls_total{tool="http_request",outcome="${thrownCode.code}"}`)).toBe(
      1,
    );
    // The proxy replica as the balancer sees it.
    expect(sample(text, 'latch_egress_replicas{state="serving"}')).toBe(1);
    expect(sample(text, 'latch_egress_replicas{state="unreachable"}')).toBe(0);
    expect(sample(text, 'latch_approvals_total{outcome="requested",policy=""}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'latch_approvals_total{outcome="approved",policy="item_standing"}')).toBe(1);
    expect(
      sample(text, 'latch_egress_rpc_duration_seconds_count{method="execute",outcome="ok"}'),
    ).toBeGreaterThanOrEqual(1);
    for (const leak of [SECRET, "tok_metrics_secret_77", "route-9f2c", "api.latch.test", "API_KEY", token]) {
      expect(text).not.toContain(leak);
    }
    // The public port does not serve them.
    expect((await fetch(`${url}/metrics`)).status).toBe(404);
  });
});
