// http_request through the hosted control plane's POST /mcp with an avm_ bearer and a standing
// approval: the hosted call path (bearer, MCP framing, grant check on PostgreSQL, ticket, gRPC
// balanced over the proxies, TLS origin, redaction, audit row).
// Run by loadtest/bench-hosted.ts; -e VUS, ITERATIONS, MCP_URL, MODEL_TOKEN, ITEM, SUMMARY_PATH.

import { callEcho, initialize } from "./lib/mcp.js";
import { env, sharedIterations, writeSummary } from "./lib/summary.js";

export const options = {
  scenarios: sharedIterations("hosted"),
  noConnectionReuse: false,
  thresholds: { checks: ["rate==1"] },
};

const url = env("MCP_URL");
const headers = { authorization: `Bearer ${env("MODEL_TOKEN")}`, "content-type": "application/json" };
const item = env("ITEM");

/** initialize once: the hosted endpoint keeps no session (a Mcp-Session-Id is sent back if given). */
export function setup() {
  return { session: initialize(url, headers, false) };
}

export default function (data) {
  callEcho(url, headers, data.session, item);
}

export function handleSummary(data) {
  return writeSummary(data);
}
