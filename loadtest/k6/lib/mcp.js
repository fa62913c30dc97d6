// The MCP half of the MCP benches (hosted-mcp.js, local-mcp.js): initialize once in setup, then one
// tools/call of http_request per iteration, checked for the origin's 200 and the redaction marker.
import { check } from "k6";
import http from "k6/http";

/**
 * initialize; answers the Mcp-Session-Id to send back ("" when the server keeps none). With
 * `requireSession`, a missing one fails the run (vault serve holds the session grant on it).
 */
export function initialize(url, headers, requireSession) {
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
  const session = init.headers["Mcp-Session-Id"] ?? "";
  if (init.status !== 200 || (requireSession && !session)) {
    throw new Error(`initialize answered ${init.status}${session ? "" : " with no Mcp-Session-Id"}`);
  }
  return session;
}

/** One http_request of GET /v1/echo with `item`, checked: MCP 200, origin 200, value redacted. */
export function callEcho(url, headers, session, item) {
  const call = JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "tools/call",
    params: { name: "http_request", arguments: { method: "GET", path: "/v1/echo", item_name: item } },
  });
  const res = http.post(url, call, {
    headers: session ? { ...headers, "mcp-session-id": session } : headers,
  });
  check(res, {
    "MCP answered 200": (r) => r.status === 200,
    "origin answered 200, redacted": (r) => {
      const text = r.json("result.content.0.text");
      return typeof text === "string" && text.includes('"origin_status":200') && text.includes("[redacted]");
    },
  });
}
