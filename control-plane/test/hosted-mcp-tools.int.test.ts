// The six hosted MCP tools against the letter of spec 4.2 (setup, request_grant, find_items,
// aliases, the music provider's playlist path rewrite), through the official MCP SDK client.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectAgent, type HostedHarness, listenHosted, operatorWithClient, toolAnswer } from "./hosted.ts";

const SECRET = "sk_live_mcptools_canary_31bb";
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

async function setUp(items: Record<string, unknown>[]) {
  const { op, clientId, token } = await operatorWithClient(h, {
    secret: SECRET,
    items,
    clientName: "tools agent",
  });
  return { op, agent: await connectAgent(url, token), clientId, token };
}

const tool = (agent: Client, name: string, args: Record<string, unknown>) =>
  agent.callTool({ name, arguments: args }).then(toolAnswer);

describe("setup", () => {
  it("is ready only on a standing approval; a session approval is ready_prompt pointing at Always allow in the inbox", async () => {
    const { op, agent } = await setUp([{ name: "API_KEY" }]);
    const first = await tool(agent, "setup", { host: "api.latch.test" });
    expect(first).toMatchObject({ status: "ready_prompt", item: { name: "API_KEY" } });
    expect(first.next?.for_model).toMatch(/Always allow/);
    expect(first.next?.for_model).toMatch(/inbox/);

    const pending = await tool(agent, "request_grant", { item_name: "API_KEY" });
    await op.request("POST", `/api/grants/${pending.grant_id}/approve`, { policy: "session" });
    expect((await tool(agent, "setup", { host: "api.latch.test" })).status).toBe("ready_prompt");

    // Spec 3.1: only a standing policy is returned at once; the session approval still covers calls.
    const next = await tool(agent, "http_request", { method: "GET", path: "/x", item_name: "API_KEY" });
    expect(next.origin_status).toBe(200);
    await agent.close();

    const { op: op2, agent: agent2 } = await setUp([{ name: "API_KEY" }]);
    const asked = await tool(agent2, "request_grant", { item_name: "API_KEY" });
    await op2.request("POST", `/api/grants/${asked.grant_id}/approve`, { policy: "item_standing" });
    expect((await tool(agent2, "setup", { host: "api.latch.test" })).status).toBe("ready");
    await agent2.close();
  });

  it("sees a folder_standing approval, in setup and in request_grant", async () => {
    const { op, agent } = await setUp([
      { name: "API_KEY", folder_name: "apis" },
      { name: "SECOND_KEY", folder_name: "apis", allowed_hosts: ["second.latch.test"] },
    ]);
    const pending = await tool(agent, "request_grant", { item_name: "API_KEY" });
    const approved = await op.request("POST", `/api/grants/${pending.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "apis",
    });
    expect(approved.statusCode, approved.body).toBe(200);
    expect(await tool(agent, "setup", { host: "second.latch.test" })).toMatchObject({
      status: "ready",
      item: { name: "SECOND_KEY" },
    });
    const covering = await tool(agent, "request_grant", { item_name: "SECOND_KEY" });
    expect(covering).toMatchObject({
      grant_id: pending.grant_id,
      status: "active",
      policy: "folder_standing",
    });
    const inbox = (await op.request("GET", "/api/inbox")).json();
    expect(inbox.approvals).toEqual([]);
    // Spec 6: answered by the standing approval, and audited so, as POST /api/grants/request is.
    const events = (await op.request("GET", "/api/audit?action=auto_approved")).json().events;
    expect(events).toContainEqual(
      expect.objectContaining({
        action: "auto_approved",
        item_name: "SECOND_KEY",
        host: "second.latch.test",
        detail: expect.objectContaining({ grant_id: pending.grant_id, policy: "folder_standing" }),
      }),
    );
    await agent.close();
  });

  it("writes nothing on dry_run (setup or http_request): no collect request in the inbox", async () => {
    const { op, agent } = await setUp([]);
    const dry = await tool(agent, "setup", { host: "fresh.latch.test", dry_run: true });
    expect(dry).toMatchObject({ status: "need_item", host: "fresh.latch.test", dry_run: true });
    expect(dry.collect_url).toBeUndefined();
    const dryCall = await tool(agent, "http_request", {
      method: "GET",
      path: "https://fresh.latch.test/v1",
      dry_run: true,
    });
    expect(dryCall).toMatchObject({ status: "need_item", host: "fresh.latch.test", dry_run: true });
    expect(dryCall.collect_url).toBeUndefined();
    expect((await op.request("GET", "/api/inbox")).json().requests).toEqual([]);
    const real = await tool(agent, "setup", { host: "fresh.latch.test" });
    expect(real.collect_url).toBe(`http://localhost:8787/collect/${real.need_id}`);
    await agent.close();
  });
});

describe("need_item", () => {
  it("names the client by its name in client_name", async () => {
    const { agent } = await setUp([]);
    const miss = await tool(agent, "find_items", { host: "missing.latch.test" });
    expect(miss).toMatchObject({ status: "need_item", client_name: "tools agent" });
    await agent.close();
  });

  it("shows the agent's task description in the inbox, cut to 500 characters", async () => {
    const { op, agent } = await setUp([]);
    const task = `Sync the invoices for the quarter. ${"x".repeat(600)}`;
    const miss = await tool(agent, "find_items", { host: "tasks.latch.test", task_description: task });
    expect(miss.status).toBe("need_item");
    const requests = (await op.request("GET", "/api/inbox")).json().requests as {
      need_id: string;
      message: string;
    }[];
    expect(requests.find((r) => r.need_id === miss.need_id)?.message).toBe(task.slice(0, 500));
    await agent.close();
  });

  it("carries the public recipe of a known provider host, in need_item and in setup's other answers", async () => {
    const { op, agent } = await setUp([]);
    const miss = await tool(agent, "setup", { provider: "github" });
    expect(miss).toMatchObject({ status: "need_item", host: "api.github.com" });
    const recipe = miss.recipe as { steps: string[]; next: string };
    expect(recipe.steps.length).toBeGreaterThan(0);
    expect(recipe.next).toEqual(expect.any(String));
    const dry = await tool(agent, "setup", { host: "api.github.com", dry_run: true });
    expect(dry.recipe).toEqual(recipe);
    const stored = await op.request("POST", "/api/items", {
      name: "GITHUB_TOKEN",
      value: SECRET,
      environment: "staging",
      allowed_hosts: ["api.github.com"],
    });
    expect(stored.statusCode, stored.body).toBe(201);
    const ready = await tool(agent, "setup", { host: "api.github.com" });
    expect(ready).toMatchObject({ status: "ready_prompt", recipe });
    // A host no provider owns has no recipe.
    expect((await tool(agent, "setup", { host: "plain.latch.test" })).recipe).toBeUndefined();
    await agent.close();
  });
});

describe("need_item by item_name alone (issue 21 item 6, spec 4.2)", () => {
  it("http_request, find_items and request_grant open one collect request; the operator names the host", async () => {
    const { op, agent } = await setUp([]);
    const asked = await tool(agent, "http_request", {
      method: "GET",
      path: "/v1/me",
      item_name: "NAMED_KEY",
    });
    expect(asked).toMatchObject({ status: "need_item", suggested_name: "NAMED_KEY" });
    expect(asked.host).toBeUndefined();
    expect(asked.collect_url).toBe(`http://localhost:8787/collect/${asked.need_id}`);
    expect(asked.message).toContain(String(asked.collect_url));
    // The same agent asking for the same name again, by any of the three tools, is the same request.
    for (const [name, args] of [
      ["find_items", { item_name: "NAMED_KEY" }],
      ["request_grant", { item_name: "NAMED_KEY" }],
    ] as const) {
      const again = await tool(agent, name, args);
      expect(again, name).toMatchObject({ status: "need_item", need_id: asked.need_id });
      expect(again.collect_url).toBe(asked.collect_url);
    }
    const requests = (await op.request("GET", "/api/inbox")).json().requests as { need_id: string }[];
    expect(requests.map((r) => r.need_id)).toEqual([asked.need_id]);
    const need = (await op.request("GET", `/api/need-items/${asked.need_id}`)).json().need;
    expect(need).toMatchObject({ host: null, suggested_name: "NAMED_KEY" });

    // The collect page sends the host the operator typed; without one there is nowhere to send it.
    const noHost = await op.request("POST", `/api/need-items/${asked.need_id}/fulfill`, { value: SECRET });
    expect(noHost.statusCode).toBe(400);
    expect(noHost.json().error.code).toBe("invalid_host");
    const fulfilled = await op.request("POST", `/api/need-items/${asked.need_id}/fulfill`, {
      value: SECRET,
      allowed_hosts: ["api.latch.test"],
    });
    expect(fulfilled.statusCode, fulfilled.body).toBe(200);
    expect(fulfilled.json().item).toMatchObject({ name: "NAMED_KEY", allowed_hosts: ["api.latch.test"] });
    const sent = await tool(agent, "http_request", { method: "GET", path: "/v1/me", item_name: "NAMED_KEY" });
    expect(sent.origin_status).toBe(200);
    await agent.close();
  });
});

describe("request_grant (issue 21 item 9, spec 3.1)", () => {
  it("returns an active grant at once only for a standing policy; a session approval asks again", async () => {
    const { op, agent } = await setUp([{ name: "API_KEY" }]);
    const first = await tool(agent, "request_grant", { item_name: "API_KEY" });
    await op.request("POST", `/api/grants/${first.grant_id}/approve`, { policy: "session" });
    const again = await tool(agent, "request_grant", { item_name: "API_KEY" });
    expect(again).toMatchObject({ status: "pending" });
    expect(again.grant_id).not.toBe(first.grant_id);
    expect(again.approval_code).toMatch(/^\d{8}$/);
    await op.request("POST", `/api/grants/${again.grant_id}/approve`, { policy: "item_standing" });
    const standing = await tool(agent, "request_grant", { item_name: "API_KEY" });
    expect(standing).toMatchObject({ grant_id: again.grant_id, status: "active", policy: "item_standing" });
    await agent.close();
  });

  it("POST /api/grants/request does the same for a model client", async () => {
    const { op, agent, token } = await setUp([{ name: "API_KEY" }]);
    const asModel = (body: Record<string, unknown>) =>
      h.app.inject({
        method: "POST",
        url: "/api/grants/request",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        payload: JSON.stringify(body),
      });
    const first = await asModel({ item_name: "API_KEY" });
    expect(first.statusCode).toBe(201);
    await op.request("POST", `/api/grants/${first.json().grant.grant_id}/approve`, { policy: "session" });
    const again = await asModel({ item_name: "API_KEY" });
    expect(again.statusCode, again.body).toBe(201);
    expect(again.json().grant).toMatchObject({ status: "pending" });
    await op.request("POST", `/api/grants/${again.json().grant.grant_id}/approve`, {
      policy: "item_standing",
    });
    const standing = await asModel({ item_name: "API_KEY" });
    expect(standing.statusCode).toBe(200);
    expect(standing.json().grant).toMatchObject({ status: "active", policy: "item_standing" });
    await agent.close();
  });
});

describe("setup with dry_run answers what setup would (issue 21 item 8)", () => {
  it("user_connect_required for an app secret without a connected account, writing nothing", async () => {
    const { op, agent } = await setUp([
      {
        name: "SPOTIFY",
        kind: "client_secret",
        inject: "client_credentials",
        username: "spotify-client-id",
        allowed_hosts: ["api.spotify.com", "accounts.spotify.com"],
      },
    ]);
    const dry = await tool(agent, "setup", { provider: "spotify", dry_run: true });
    expect(dry).toMatchObject({
      status: "user_connect_required",
      provider: "spotify",
      item_name: "SPOTIFY",
      refresh_item_name: "SPOTIFY_REFRESH",
      dry_run: true,
    });
    expect(dry.connect_url).toBeUndefined();
    expect((await op.request("GET", "/api/inbox")).json().requests).toEqual([]);
    const real = await tool(agent, "setup", { provider: "spotify" });
    expect(real.status).toBe("user_connect_required");
    expect(real.connect_url).toEqual(expect.any(String));
    await agent.close();
  });
});

describe("find_items (issue 21 item 13, spec 4.2)", () => {
  it("answers ambiguous with up to five items, truncated when more, and no value", async () => {
    const { agent } = await setUp(
      ["ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX"].map((name) => ({ name: `${name}_KEY` })),
    );
    const answer = await tool(agent, "find_items", { host: "api.latch.test" });
    expect(answer.status).toBe("ambiguous");
    expect((answer.items as unknown[]).length).toBe(5);
    expect(answer.truncated).toBe(true);
    expect(JSON.stringify(answer)).not.toContain(SECRET);
    const { agent: two } = await setUp([{ name: "A_KEY" }, { name: "B_KEY" }]);
    const pair = await tool(two, "find_items", { host: "api.latch.test" });
    expect(pair).toMatchObject({ status: "ambiguous" });
    expect((pair.items as { name: string }[]).map((i) => i.name).sort()).toEqual(["A_KEY", "B_KEY"]);
    expect(pair.truncated).toBeUndefined();
    await agent.close();
    await two.close();
  });

  it("with neither item_name nor host is not an error and returns nothing from the vault", async () => {
    const { op, agent } = await setUp([{ name: "API_KEY" }]);
    const result = await agent.callTool({ name: "find_items", arguments: {} });
    expect(result.isError).toBeFalsy();
    const answer = toolAnswer(result);
    expect(answer.items).toEqual([]);
    expect(JSON.stringify(answer)).not.toContain("API_KEY");
    expect((await op.request("GET", "/api/inbox")).json().requests).toEqual([]);
    await agent.close();
  });
});

describe("setup with both provider and host (issue 21 item 13, spec 4.2)", () => {
  it("is refused, even when they agree, and writes nothing", async () => {
    const { op, agent } = await setUp([]);
    for (const host of ["api.github.com", "api.latch.test"]) {
      const result = await agent.callTool({ name: "setup", arguments: { provider: "github", host } });
      expect(result.isError, host).toBe(true);
      const answer = toolAnswer(result) as { error?: { code: string; message: string } };
      expect(answer.error?.code).toBe("invalid_request");
      expect(answer.error?.message).toMatch(/exactly one of provider or host/);
    }
    const neither = await agent.callTool({ name: "setup", arguments: {} });
    expect(neither.isError).toBe(true);
    expect((await op.request("GET", "/api/inbox")).json().requests).toEqual([]);
    await agent.close();
  });
});

describe("aliases", () => {
  it("accepts http.request hosted; list_secrets is a local alias only", async () => {
    const { agent } = await setUp([{ name: "API_KEY" }]);
    expect(
      (await tool(agent, "http.request", { method: "GET", path: "/x", item_name: "API_KEY" })).status,
    ).toBe("pending");
    await expect(agent.callTool({ name: "list_secrets", arguments: {} })).rejects.toThrow(/-32602/);
    await agent.close();
  });
});

describe("the playlist path rewrite (spec 4.2 rule 3)", () => {
  it("reports /tracks on the music provider's API as /items, and leaves other /tracks paths alone", async () => {
    const { agent } = await setUp([{ name: "SPOTIFY_TOKEN", allowed_hosts: ["api.spotify.com"] }]);
    const rewritten = await tool(agent, "http_request", {
      method: "GET",
      path: "https://api.spotify.com/v1/playlists/37i9dQZF1DXcBWIGoYBM5M/tracks?limit=5",
      dry_run: true,
    });
    expect(rewritten).toMatchObject({
      path: "/v1/playlists/37i9dQZF1DXcBWIGoYBM5M/items?limit=5",
      path_rewritten: { from: "/v1/playlists/37i9dQZF1DXcBWIGoYBM5M/tracks?limit=5" },
    });
    const albums = await tool(agent, "http_request", {
      method: "GET",
      path: "https://api.spotify.com/v1/albums/abc/tracks",
      dry_run: true,
    });
    expect(albums.path).toBe("/v1/albums/abc/tracks");
    expect(albums.path_rewritten).toBeUndefined();
    await agent.close();
  });
});

describe("sigv4 (issue 21 item 4)", () => {
  it("refuses a presigned URL's parameters, and a pair the signer cannot sign, in the agent's query before asking for an approval", async () => {
    const { op, agent } = await setUp([
      {
        name: "AWS_SQS",
        inject: "sigv4",
        username: "AKIDLATCHTEST0000001",
        allowed_hosts: ["sqs.eu-west-1.amazonaws.com"],
      },
    ]);
    for (const parameter of ["X-Amz-Signature", "X-Amz-Credential", "x-amz-security-token"]) {
      const result = await agent.callTool({
        name: "http_request",
        arguments: {
          method: "GET",
          item_name: "AWS_SQS",
          path: `/?Action=ListQueues&${parameter}=chosen`,
        },
      });
      expect(result.isError, parameter).toBe(true);
      const answer = toolAnswer(result) as { error?: { code: string; message: string } };
      expect(answer.error?.code).toBe("invalid_path");
      expect(answer.error?.message).toMatch(/presigned URL/);
    }
    // A pair AWS's signer cannot sign as it is sent: refused before an approval is spent on it.
    for (const name of ["__proto__", "%5F%5Fproto%5F%5F"]) {
      const result = await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", item_name: "AWS_SQS", path: `/?Action=ListQueues&${name}=1` },
      });
      expect(result.isError, name).toBe(true);
      const answer = toolAnswer(result) as { error?: { code: string; message: string } };
      expect(answer.error).toMatchObject({
        code: "invalid_path",
        message: expect.stringMatching(/__proto__/),
      });
    }
    expect((await op.request("GET", "/api/inbox")).json().approvals).toEqual([]);
    await agent.close();
  });
});
