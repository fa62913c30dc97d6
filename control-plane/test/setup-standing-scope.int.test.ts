// setup's `ready` (spec 4.2) after the Inbox's default "Always allow" (DECISIONS "The approval,
// readable and reversible"): a standing approval scoped to the request's method and host under its
// path prefix is a standing approval, so setup answers ready for that host, not ready_prompt. On
// the hosted plane through the official MCP SDK client.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectAgent, type HostedHarness, listenHosted, operatorWithClient, toolAnswer } from "./hosted.ts";

const SECRET = "sk_live_setupscope_canary_7d02";
let h: HostedHarness;
let url: string;

beforeAll(async () => {
  ({ h, url } = await listenHosted((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ ok: true }));
  }));
}, 60_000);
afterAll(async () => {
  await h.close();
});

const tool = (agent: Client, name: string, args: Record<string, unknown>) =>
  agent.callTool({ name, arguments: args }).then(toolAnswer);

describe("setup after Always allow with a scope", () => {
  it("answers ready on a path_prefix standing approval, for its host only, and ready_prompt once it is revoked", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: SECRET,
      items: [{ name: "API_KEY", allowed_hosts: ["api.latch.test", "second.latch.test"] }],
      clientName: "setup scope agent",
    });
    const agent = await connectAgent(url, token);
    expect((await tool(agent, "setup", { host: "api.latch.test" })).status).toBe("ready_prompt");

    const asked = await tool(agent, "http_request", {
      item_name: "API_KEY",
      method: "POST",
      path: "https://api.latch.test/repos/acme/app/issues",
      body: { title: "a" },
    });
    expect(asked.status).toBe("pending");
    const approved = await op.request("POST", `/api/grants/${asked.grant_id}/approve`, {
      policy: "item_standing",
      scope: "path_prefix",
    });
    expect(approved.statusCode, approved.body).toBe(200);
    expect(approved.json().grant.scope).toMatchObject({ host: "api.latch.test", path: "/repos/acme/app/" });

    const ready = await tool(agent, "setup", { host: "api.latch.test" });
    expect(ready).toMatchObject({ status: "ready", item: { name: "API_KEY" } });
    expect(ready.next?.for_model).toBe("Call http_request with item_name API_KEY.");
    // The approval covers no call to the credential's other host: that one still needs Always allow.
    expect((await tool(agent, "setup", { host: "second.latch.test" })).status).toBe("ready_prompt");

    const revoked = await op.request("POST", `/api/grants/${asked.grant_id}/revoke`);
    expect(revoked.statusCode, revoked.body).toBe(200);
    expect((await tool(agent, "setup", { host: "api.latch.test" })).status).toBe("ready_prompt");
    await agent.close();
  });

  it("answers ready on a credential-wide standing approval for every host of the credential", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: SECRET,
      items: [{ name: "API_KEY", allowed_hosts: ["api.latch.test", "second.latch.test"] }],
      clientName: "setup whole agent",
    });
    const agent = await connectAgent(url, token);
    const asked = await tool(agent, "http_request", {
      item_name: "API_KEY",
      method: "GET",
      path: "https://api.latch.test/v1/me",
    });
    const approved = await op.request("POST", `/api/grants/${asked.grant_id}/approve`, {
      policy: "item_standing",
      scope: "credential",
    });
    expect(approved.statusCode, approved.body).toBe(200);
    expect((await tool(agent, "setup", { host: "api.latch.test" })).status).toBe("ready");
    expect((await tool(agent, "setup", { host: "second.latch.test" })).status).toBe("ready");
    await agent.close();
  });
});
