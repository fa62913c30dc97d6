// What an agent is told when a call fails before or at the network, and where to go after an
// approval (spec 4.1: follow next.for_model, retry with next.arguments), through the official MCP
// SDK client on the hosted plane, a real egress proxy and a real TLS origin on loopback.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  connectAgent,
  type HostedHarness,
  operatorWithClient,
  startHosted,
  type ToolAnswer,
  toolAnswer,
} from "./hosted.ts";

const SECRET = "sk_live_toolanswers_canary_77aa";
/** Routed to the loopback origin, whose certificate does not name it: TLS must fail. */
const WRONG_CERT_HOST = "api.wrongcert.example";
/** Routed to a loopback port nothing listens on: the connection is refused. */
const CLOSED_HOST = "api.closed.example";
/** Resolved through the test DNS server, which knows no such name. */
const NO_SUCH_HOST = "api.nowhere.latch.test";

let h: HostedHarness;
let url: string;
let agent: Client;
let op: Awaited<ReturnType<typeof operatorWithClient>>["op"];

beforeAll(async () => {
  h = await startHosted({ providerHosts: [WRONG_CERT_HOST], closedHosts: [CLOSED_HOST] });
  url = await h.app.listen({ host: "127.0.0.1", port: 0 });
  h.egress.setHandler((req, res) => {
    if (req.url?.startsWith("/v1/slow")) return; // never answers
    if (req.url?.startsWith("/v1/huge")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(`"${"x".repeat(1_200_000)}"`);
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ path: req.url }));
  });
  const setUp = await operatorWithClient(h, {
    secret: SECRET,
    items: [
      { name: "API_KEY", allowed_hosts: ["api.latch.test"] },
      { name: "NOWHERE_KEY", allowed_hosts: [NO_SUCH_HOST] },
      { name: "WRONGCERT_KEY", allowed_hosts: [WRONG_CERT_HOST] },
      { name: "CLOSED_KEY", allowed_hosts: [CLOSED_HOST] },
    ],
    clientName: "answers agent",
  });
  op = setUp.op;
  agent = await connectAgent(url, setUp.token, "answers-agent");
}, 60_000);

afterAll(async () => {
  await agent?.close();
  await h.close();
});

/** http_request, approved for this session on its first pending answer; the raw result and payload. */
async function callApproved(args: Record<string, unknown>) {
  const first = await agent.callTool({ name: "http_request", arguments: args });
  const pending = toolAnswer(first);
  if (pending.status !== "pending") return { result: first, answer: pending };
  const approved = await op.request("POST", "/api/grants/approve-by-code", {
    code: pending.approval_code,
    policy: "session",
  });
  expect(approved.statusCode, approved.body).toBe(200);
  const second = await agent.callTool({ name: "http_request", arguments: args });
  return { result: second, answer: toolAnswer(second) };
}

function expectAdvice(answer: ToolAnswer, code: string, words: RegExp): void {
  expect((answer.error as { code?: string } | undefined)?.code).toBe(code);
  expect(typeof answer.hint).toBe("string");
  expect(answer.hint).toMatch(words);
  expect(answer.next?.for_model).toBe(answer.hint);
  // One or two plain sentences, no secret.
  expect(String(answer.hint).split(/(?<=\.)\s/).length).toBeLessThanOrEqual(2);
  expect(JSON.stringify(answer)).not.toContain(SECRET);
}

describe("a call that failed before or at the network is an error result that says what to do", () => {
  it("DNS: check the host's spelling", async () => {
    const { result, answer } = await callApproved({ method: "GET", path: "/v1/x", item_name: "NOWHERE_KEY" });
    expect(result.isError).toBe(true);
    expect(["dns_failure", "dns_no_address"]).toContain((answer.error as { code: string }).code);
    expectAdvice(answer, (answer.error as { code: string }).code, /spelling of host/);
  });

  it("connection refused: retry once later, then tell the user the API looks down", async () => {
    const { result, answer } = await callApproved({ method: "GET", path: "/v1/x", item_name: "CLOSED_KEY" });
    expect(result.isError).toBe(true);
    expectAdvice(answer, "connect_failed", /did not accept a connection/);
  });

  it("TLS: do not retry, tell the user", async () => {
    const { result, answer } = await callApproved({
      method: "GET",
      path: "/v1/x",
      item_name: "WRONGCERT_KEY",
    });
    expect(result.isError).toBe(true);
    expectAdvice(answer, "tls_failure", /Do not retry/);
  });

  it("timeout: retry once with a longer timeout_ms, carried in next.arguments", async () => {
    const args = { method: "GET", path: "/v1/slow", item_name: "API_KEY", timeout_ms: 1000 };
    const { result, answer } = await callApproved(args);
    expect(result.isError).toBe(true);
    expectAdvice(answer, "timeout", /longer timeout_ms/);
    expect(answer.next).toMatchObject({ tool: "http_request", arguments: { ...args, timeout_ms: 2000 } });
  });

  it("body_too_large: origin_status 502, narrow the call before any retry", async () => {
    const { result, answer } = await callApproved({ method: "GET", path: "/v1/huge", item_name: "API_KEY" });
    expect(result.isError).toBe(true);
    expect(answer.origin_status).toBe(502);
    expectAdvice(answer, "body_too_large", /Do not retry unchanged/);
  });

  it("an API's own answer is not an error result", async () => {
    const { result, answer } = await callApproved({ method: "GET", path: "/v1/fine", item_name: "API_KEY" });
    expect(result.isError ?? false).toBe(false);
    expect(answer.origin_status).toBe(200);
    expect(answer).not.toHaveProperty("hint");
  });
});

describe("an answer that says to retry with next.arguments carries them", () => {
  it("http_request pending: next.tool and next.arguments are the call to make again", async () => {
    const args = { method: "POST", path: "/v1/orders?x=1", item_name: "API_KEY", body: { n: 1 } };
    const pending = toolAnswer(await agent.callTool({ name: "http_request", arguments: args }));
    expect(pending.status).toBe("pending");
    expect(pending.next).toMatchObject({ tool: "http_request", arguments: args });
    expect(pending.next?.for_model).toContain("next.arguments");
    expect(pending.notify_failed).toBe(false);
  });

  it("request_grant: next names http_request with the item, and for_model says what to add", async () => {
    const answer = toolAnswer(
      await agent.callTool({ name: "request_grant", arguments: { item_name: "NOWHERE_KEY" } }),
    );
    expect(answer.status).toBe("pending");
    expect(answer.next).toMatchObject({ tool: "http_request", arguments: { item_name: "NOWHERE_KEY" } });
    expect(answer.next?.for_model).toMatch(/Latch inbox.*next\.arguments.*method and path/);
    expect(answer.notify_failed).toBe(false);
  });

  it("every for_model that names next.arguments comes with them", async () => {
    const answers = [
      toolAnswer(
        await agent.callTool({
          name: "http_request",
          arguments: { method: "GET", path: "/v1/a", item_name: "WRONGCERT_KEY", timeout_ms: 1000 },
        }),
      ),
      toolAnswer(await agent.callTool({ name: "request_grant", arguments: { item_name: "API_KEY" } })),
    ];
    for (const answer of answers) {
      if (String(answer.next?.for_model).includes("next.arguments")) {
        expect(answer.next, JSON.stringify(answer)).toHaveProperty("arguments");
        expect(answer.next, JSON.stringify(answer)).toHaveProperty("tool");
      }
    }
  });
});

describe("a wrong argument over MCP", () => {
  it("is -32602 with one sentence naming the argument and its shape", async () => {
    await expect(
      agent.callTool({ name: "http_request", arguments: { method: "TRACE", path: "/v1" } }),
    ).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining("`method` must be one of GET, POST, PUT, PATCH, DELETE."),
    });
  });
});
