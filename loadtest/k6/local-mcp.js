// http_request through `vault serve`'s POST /mcp with a session grant: the local variant's whole
// call path (MCP framing, grant check, ticket, gRPC, proxy, TLS origin, redaction).
// Run by loadtest/bench-local.ts; -e VUS, ITERATIONS, MCP_URL, MODEL_TOKEN, ITEM, SUMMARY_PATH.
import { check } from "k6";
import http from "k6/http";
import { env, sharedIterations, writeSummary } from "./lib/summary.js";

export const options = {
  scenarios: sharedIterations("local"),
  noConnectionReuse: false,
  thresholds: { checks: ["rate==1"] },
};

const url = env("MCP_URL");
const headers = { authorization: `Bearer ${env("MODEL_TOKEN")}`, "content-type": "application/json" };

/** One MCP session for the run: the agent id (k6-bench) holds the session grant. */
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
  const session = init.headers["Mcp-Session-Id"];
  if (!session) throw new Error(`initialize gave no Mcp-Session-Id (status ${init.status})`);
  return { session };
}

const call = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "tools/call",
  params: { name: "http_request", arguments: { method: "GET", path: "/v1/echo", item_name: env("ITEM") } },
});

export default function (data) {
  const res = http.post(url, call, { headers: { ...headers, "mcp-session-id": data.session } });
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
