// http_request through `vault serve`'s POST /mcp with a session grant: the local variant's whole
// call path (MCP framing, grant check, ticket, gRPC, proxy, TLS origin, redaction).
// Run by loadtest/bench-local.ts; -e VUS, ITERATIONS, MCP_URL, MODEL_TOKEN, ITEM, SUMMARY_PATH.

import { callEcho, initialize } from "./lib/mcp.js";
import { env, sharedIterations, writeSummary } from "./lib/summary.js";

export const options = {
  scenarios: sharedIterations("local"),
  noConnectionReuse: false,
  thresholds: { checks: ["rate==1"] },
};

const url = env("MCP_URL");
const headers = { authorization: `Bearer ${env("MODEL_TOKEN")}`, "content-type": "application/json" };
const item = env("ITEM");

/** initialize once: one MCP session for the run: the agent id (k6-bench) holds the session grant. */
export function setup() {
  return { session: initialize(url, headers, true) };
}

export default function (data) {
  callEcho(url, headers, data.session, item);
}

export function handleSummary(data) {
  return writeSummary(data);
}
