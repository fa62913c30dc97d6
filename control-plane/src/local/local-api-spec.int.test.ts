// The local operator API to the letter of spec 4.4, against `vault serve` on a loopback port with
// the official MCP SDK client as the agent: POST /api/grants takes tool_id beside grant_id, and a
// credential may be stored without allowed_hosts (found by name, refused at call time until hosts
// are added, with the command that adds them).
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EgressHarness, startEgressHarness } from "../../test/egress-harness.ts";
import {
  connectLocalAgent as connectAgent,
  localOperator,
  toolPayload as payloadOf,
  startLocalVault,
  type LocalRig as Vault,
} from "../../test/local.ts";

const SECRET = "ghp_localspec_0123456789abcdef";

let harness: EgressHarness;

const startVault = () => startLocalVault(harness);

/** The fields of the local operator API's answers that these tests read. */
interface OperatorAnswer {
  secret?: unknown;
  item?: unknown;
  secrets?: unknown[];
  grant?: unknown;
  grants?: unknown[];
  error?: { code: string; message: string };
}

const operator = (v: Vault, method: string, path: string, body?: unknown) =>
  localOperator<OperatorAnswer>(v, method, path, body);

const call = (client: Client, args: Record<string, unknown>) =>
  client.callTool({ name: "http_request", arguments: { method: "GET", path: "/v1/echo", ...args } });

beforeAll(async () => {
  harness = await startEgressHarness();
  harness.setHandler((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  });
}, 60_000);

afterAll(async () => {
  await harness?.close();
});

describe("POST /api/grants with tool_id (spec 4.4: tool_id http_request for agent calls)", () => {
  it("approves a pending grant named by grant_id with tool_id http_request", async () => {
    const v = await startVault();
    await operator(v, "POST", "/api/secrets", {
      name: "GITHUB_TOKEN",
      value: SECRET,
      allowed_hosts: ["api.latch.test"],
    });
    const agent = await connectAgent(v.url, "tool-id-agent");
    const pending = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN" }));
    expect(pending.status).toBe("pending");

    const approved = await operator(v, "POST", "/api/grants", {
      grant_id: pending.grant_id,
      scope: "once",
      tool_id: "http_request",
    });
    expect(approved.status, JSON.stringify(approved.json)).toBe(200);
    expect(approved.json.grant).toMatchObject({ status: "active", tool_id: "http_request" });
    expect(payloadOf(await call(agent, { item_name: "GITHUB_TOKEN" })).origin_status).toBe(200);
    await agent.close();
    await v.app.close();
  });

  it("refuses a tool_id other than http_request with 400 naming tool_id, and approves nothing", async () => {
    const v = await startVault();
    await operator(v, "POST", "/api/secrets", {
      name: "GITHUB_TOKEN",
      value: SECRET,
      allowed_hosts: ["api.latch.test"],
    });
    const agent = await connectAgent(v.url, "wrong-tool-agent");
    const pending = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN" }));
    const refused = await operator(v, "POST", "/api/grants", {
      grant_id: pending.grant_id,
      scope: "once",
      tool_id: "find_items",
    });
    expect(refused.status).toBe(400);
    expect(refused.json.error).toMatchObject({ code: "invalid_request" });
    expect(refused.json.error?.message).toContain("tool_id");
    const grants = await operator(v, "GET", "/api/grants");
    expect(grants.json.grants).toContainEqual(
      expect.objectContaining({ grant_id: pending.grant_id, status: "pending" }),
    );
    await agent.close();
    await v.app.close();
  });
});

describe("a credential stored without allowed_hosts (spec 4.4: allowed_hosts?)", () => {
  it("is stored by both routes, listed, found by name, and refused at call time until hosts are added", async () => {
    const v = await startVault();
    const stored = await operator(v, "POST", "/api/secrets", { name: "NO_HOST_TOKEN", value: SECRET });
    expect(stored.status, JSON.stringify(stored.json)).toBe(201);
    expect(stored.json.secret).toMatchObject({ name: "NO_HOST_TOKEN", allowed_hosts: [] });
    const item = await operator(v, "POST", "/api/items", { name: "OTHER_NO_HOST", value: SECRET });
    expect(item.status, JSON.stringify(item.json)).toBe(201);
    expect(item.json.item).toMatchObject({ name: "OTHER_NO_HOST", allowed_hosts: [] });
    const listed = await operator(v, "GET", "/api/secrets");
    expect(listed.json.secrets).toContainEqual(
      expect.objectContaining({ name: "NO_HOST_TOKEN", allowed_hosts: [] }),
    );

    const agent = await connectAgent(v.url, "no-host-agent");
    const found = payloadOf(
      await agent.callTool({ name: "find_items", arguments: { item_name: "NO_HOST_TOKEN" } }),
    );
    expect(found).toMatchObject({ status: "found", item: { name: "NO_HOST_TOKEN", allowed_hosts: [] } });

    const before = harness.origin.requests.length;
    for (const args of [
      { item_name: "NO_HOST_TOKEN" },
      { item_name: "NO_HOST_TOKEN", host: "api.latch.test" },
      { item_name: "NO_HOST_TOKEN", dry_run: true },
    ]) {
      const result = await call(agent, args);
      expect(result.isError, JSON.stringify(args)).toBe(true);
      const answer = payloadOf(result);
      expect(answer).toMatchObject({ status: "host_mismatch" });
      expect(JSON.stringify(answer)).toContain("vault set NO_HOST_TOKEN --host");
    }
    expect(harness.origin.requests.length).toBe(before);
    // No approval was asked for a credential that cannot be used yet.
    expect((await operator(v, "GET", "/api/grants")).json.grants).toEqual([]);

    // `vault set NAME --host HOST` (the same store with hosts) makes it usable.
    const replaced = await operator(v, "POST", "/api/secrets", {
      name: "NO_HOST_TOKEN",
      value: SECRET,
      allowed_hosts: ["api.latch.test"],
    });
    expect(replaced.status).toBe(201);
    const pending = payloadOf(await call(agent, { item_name: "NO_HOST_TOKEN" }));
    expect(pending.status).toBe("pending");
    await operator(v, "POST", "/api/grants", { grant_id: pending.grant_id, scope: "once" });
    expect(payloadOf(await call(agent, { item_name: "NO_HOST_TOKEN" })).origin_status).toBe(200);
    await agent.close();
    await v.app.close();
  });
});
