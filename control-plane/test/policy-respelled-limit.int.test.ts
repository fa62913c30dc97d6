// A rate-limited allow rule's path, respelled (DECISIONS "Policies"), hosted, through the official
// MCP SDK client and the real proxy: an allow rule reads the path exactly, so `/v1/search/` or
// `/V1/Search` is not its call and falls to the rules below it; the rule's limit still counts it,
// so an agent cannot step past `/v1/search`'s limit to a broader allow rule by respelling the path.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Browser,
  connectAgent,
  type HostedHarness,
  listenHosted,
  operatorWithClient,
  toolAnswer,
} from "./hosted.ts";

let h: HostedHarness;
let url: string;

beforeAll(async () => {
  ({ h, url } = await listenHosted((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ path: req.url }));
  }));
}, 60_000);
afterAll(async () => {
  await h.close();
});

async function setUp() {
  const { op, token } = await operatorWithClient(h, {
    secret: "sk_live_respelled_canary_5c2e",
    items: [{ name: "API_KEY" }],
    clientName: "search agent",
  });
  return { op, agent: await connectAgent(url, token) };
}

const call = (agent: Client, args: Record<string, unknown>) =>
  agent
    .callTool({ name: "http_request", arguments: { item_name: "API_KEY", method: "GET", ...args } })
    .then(toolAnswer);

async function savePolicy(op: Browser, rules: unknown[]) {
  const current = await op.request("GET", "/api/policies");
  const saved = await op.request(
    "PUT",
    "/api/policies",
    { rules },
    { "if-match": current.headers.etag as string },
  );
  expect(saved.statusCode, saved.body).toBe(200);
}

const SEARCH = {
  id: "search",
  effect: "allow",
  match: { paths: ["/v1/search"] },
  rate_limit: { calls: 2, per: "hour" },
};

describe("a rate-limited allow rule", () => {
  it("counts the calls that respell its path, under a broader allow rule below it", async () => {
    const { op, agent } = await setUp();
    await savePolicy(op, [SEARCH, { id: "rest", effect: "allow" }]);
    expect((await call(agent, { path: "/v1/search" })).origin_status).toBe(200);
    expect((await call(agent, { path: "/v1/search/" })).origin_status).toBe(200);
    const before = h.egress.origin.requests.length;
    for (const path of ["/v1/search", "/v1/search/", "/V1/Search", "/v1//search", "/v1/search;x"]) {
      expect(await call(agent, { path }), path).toMatchObject({
        status: "rate_limited",
        policy: { rule_id: "search" },
      });
    }
    expect(h.egress.origin.requests.length).toBe(before);
    // Another path is the broader rule's alone.
    expect((await call(agent, { path: "/v1/other" })).origin_status).toBe(200);
    await agent.close();
  });

  it("asks for an approval for a respelling no rule below decides, and counts it once approved", async () => {
    const { op, agent } = await setUp();
    await savePolicy(op, [{ ...SEARCH, rate_limit: { calls: 1, per: "hour" } }]);
    expect((await call(agent, { path: "/v1/search" })).origin_status).toBe(200);
    const asked = await call(agent, { path: "/v1/search/" });
    expect(asked).toMatchObject({ status: "pending", policy: { rule_id: "search", effect: "ask" } });
    const approved = await op.request("POST", `/api/grants/${asked.grant_id}/approve`, { policy: "prompt" });
    expect(approved.statusCode, approved.body).toBe(200);
    const before = h.egress.origin.requests.length;
    expect(await call(agent, { path: "/v1/search/" })).toMatchObject({
      status: "rate_limited",
      policy: { rule_id: "search" },
    });
    expect(h.egress.origin.requests.length).toBe(before);
    await agent.close();
  });
});
