// `vault serve`: the agent id is the MCP client's name (spec 4.4), one name, one id. A client whose
// name only differs by characters the id cannot hold does not use another name's approvals.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EgressHarness, startEgressHarness } from "../../test/egress-harness.ts";
import {
  connectLocalAgent,
  type LocalRig,
  localOperator,
  startLocalVault,
  toolPayload,
} from "../../test/local.ts";
import { agentIdFromClientName } from "../mcp/mcp-sessions.ts";

let harness: EgressHarness;

beforeAll(async () => {
  harness = await startEgressHarness();
  harness.setHandler((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  });
}, 60_000);

afterAll(async () => {
  await harness.close();
});

interface GrantAnswer {
  grant?: { grant_id: string; agent_id: string; status: string };
  grants?: { grant_id: string; agent_id: string; status: string }[];
}

const operator = (v: LocalRig, method: string, path: string, body?: unknown) =>
  localOperator<GrantAnswer>(v, method, path, body);

describe("local agent identity (spec 4.4)", () => {
  it("does not let a client named my-agent! use the approval given to my-agent", async () => {
    const v = await startLocalVault(harness);
    const stored = await operator(v, "POST", "/api/secrets", {
      name: "GITHUB_TOKEN",
      value: "ghp_identitycanary_0123456789abcdef",
      allowed_hosts: ["api.latch.test"],
    });
    expect(stored.status).toBe(201);
    const granted = await operator(v, "POST", "/api/grants", {
      item_name: "GITHUB_TOKEN",
      agent_id: "my-agent",
      scope: "session",
    });
    expect(granted.status).toBe(201);

    const call = {
      name: "http_request",
      arguments: { item_name: "GITHUB_TOKEN", method: "GET", path: "/v1/echo" },
    };
    const approved = await connectLocalAgent(v.url, "my-agent");
    expect(toolPayload(await approved.callTool(call)).origin_status).toBe(200);

    const lookalike = await connectLocalAgent(v.url, "my-agent!");
    const sent = harness.origin.requests.length;
    const answer = toolPayload(await lookalike.callTool(call));
    expect(answer).toMatchObject({ status: "pending", grant_id: expect.any(String) });
    expect(harness.origin.requests.length).toBe(sent);

    // The operator sees the look-alike under its own printable id, and can approve it by that id.
    const foldedId = agentIdFromClientName("my-agent!");
    expect(foldedId).toMatch(/^my-agent~[0-9a-f]{12}$/);
    const listed = await operator(v, "GET", "/api/grants");
    expect(listed.json.grants).toContainEqual(
      expect.objectContaining({ grant_id: answer.grant_id, agent_id: foldedId, status: "pending" }),
    );
    const byName = await operator(v, "POST", "/api/grants", {
      item_name: "GITHUB_TOKEN",
      agent_id: foldedId,
      scope: "session",
    });
    expect(byName.status).toBe(201);
    expect(toolPayload(await lookalike.callTool(call)).origin_status).toBe(200);

    await approved.close();
    await lookalike.close();
    await v.app.close();
  });

  it("gives two clients whose names have no id characters two identities", async () => {
    const v = await startLocalVault(harness);
    await operator(v, "POST", "/api/secrets", {
      name: "GITHUB_TOKEN",
      value: "ghp_identitycanary_0123456789abcdef",
      allowed_hosts: ["api.latch.test"],
    });
    const call = {
      name: "http_request",
      arguments: { item_name: "GITHUB_TOKEN", method: "GET", path: "/v1/echo" },
    };
    const helper = await connectLocalAgent(v.url, "助手");
    const pending = toolPayload(await helper.callTool(call));
    expect(pending.status).toBe("pending");
    const approved = await operator(v, "POST", "/api/grants", {
      grant_id: pending.grant_id,
      scope: "session",
    });
    expect(approved.json.grant?.agent_id).toBe(agentIdFromClientName("助手"));
    expect(toolPayload(await helper.callTool(call)).origin_status).toBe(200);

    const other = await connectLocalAgent(v.url, "ヘルパー");
    expect(toolPayload(await other.callTool(call)).status).toBe("pending");

    await helper.close();
    await other.close();
    await v.app.close();
  });
});
