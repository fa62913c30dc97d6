// http_request through the hosted control plane's POST /mcp with an avm_ bearer and a standing
// approval: the hosted call path (bearer, MCP framing, grant check on PostgreSQL, ticket, gRPC
// balanced over the proxies, TLS origin, redaction, audit row).
// Run by loadtest/bench-hosted.ts; -e VUS, ITERATIONS, MCP_URL, MODEL_TOKEN, ITEM, SUMMARY_PATH.
import { check } from "k6";
import http from "k6/http";
import { env, sharedIterations, writeSummary } from "./lib/summary.js";

export const options = {
  scenarios: sharedIterations("hosted"),
  noConnectionReuse: false,
  thresholds: { checks: ["rate==1"] },
};

const url = env("MCP_URL");
const headers = { authorization: `Bearer ${env("MODEL_TOKEN")}`, "content-type": "application/json" };

/** initialize once; the hosted endpoint keeps no session (a Mcp-Session-Id is sent back if given). */
export function setup() {
  const init = http.post(
    url,
    JSON.stringify({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: {
        protocolVersion: "2024-11-05",
        capabilities: {},
        clientInfo: { name: "k6-bench", version: "1" },
      },
    }),
    { headers },
  );
  if (init.status !== 200) throw new Error(`initialize answered ${init.status}`);
  return { session: init.headers["Mcp-Session-Id"] ?? "" };
}

const call = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "tools/call",
  params: { name: "http_request", arguments: { method: "GET", path: "/v1/echo", item_name: env("ITEM") } },
});

export default function (data) {
  const res = http.post(url, call, {
    headers: data.session ? { ...headers, "mcp-session-id": data.session } : headers,
  });
  check(res, {
    "MCP answered 200": (r) => r.status === 200,
    "origin answered 200, redacted": (r) => {
      const text = r.json("result.content.0.text");
      return typeof text === "string" && text.includes('"origin_status":200') && text.includes("[redacted]");
    },
  });
}

export function handleSummary(data) {
  return writeSummary(data);
}
