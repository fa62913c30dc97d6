// An approval means exactly what the operator saw (DECISIONS "Approvals", spec 4.2 rule 1): tried
// as an agent would try to widen one, through the official MCP SDK client against the hosted
// plane, a real egress proxy and a TLS origin that records every request it receives.
import { createHash } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectAgent, type HostedHarness, listenHosted, operatorWithClient, toolAnswer } from "./hosted.ts";

const SECRET = "sk_live_binding_canary_7d21";
const HOST = "api.latch.test";
let h: HostedHarness;
let url: string;
/** What reached the origin: "METHOD /path?query body". */
const received: string[] = [];

beforeAll(async () => {
  ({ h, url } = await listenHosted((_req, res, recorded) => {
    const body = recorded.body.toString("utf8");
    received.push(`${recorded.method} ${recorded.url}${body ? ` ${body}` : ""}`);
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ ok: true }));
  }));
}, 60_000);
afterAll(async () => {
  await h.close();
});

async function setUp() {
  const { op, token } = await operatorWithClient(h, {
    secret: SECRET,
    items: [{ name: "API_KEY" }],
    clientName: "binding agent",
  });
  return { op, agent: await connectAgent(url, token) };
}

const http = (agent: Client, args: Record<string, unknown>) =>
  agent.callTool({ name: "http_request", arguments: { item_name: "API_KEY", ...args } }).then(toolAnswer);

/** How many requests reached the origin for `line` (exact "METHOD /path body"). */
const arrivals = (line: string) => received.filter((r) => r === line).length;

interface InboxGrant {
  grant_id: string;
  call: { method: string; host: string; path: string; body_sha256: string | null } | null;
}

async function approve(op: Awaited<ReturnType<typeof setUp>>["op"], grantId: string, policy = "prompt") {
  const approved = await op.request("POST", `/api/grants/${grantId}/approve`, { policy });
  expect(approved.statusCode, approved.body).toBe(200);
}

describe("a one-call approval covers exactly the call it was asked for", () => {
  it("GET /v1/me approved: a DELETE, another path or another query asks again; the approved call goes out once", async () => {
    const { op, agent } = await setUp();
    const asked = await http(agent, { method: "GET", path: "/v1/me" });
    expect(asked.status).toBe("pending");
    expect(asked.message).toContain("GET api.latch.test/v1/me");

    // The inbox shows the request, not a hidden field: method, host, path, no body.
    const inbox = (await op.request("GET", "/api/inbox")).json().approvals as InboxGrant[];
    expect(inbox.find((g) => g.grant_id === asked.grant_id)?.call).toEqual({
      method: "GET",
      host: HOST,
      path: "/v1/me",
      body_sha256: null,
    });
    await approve(op, asked.grant_id!);

    // The attack of the issue: the approval for GET /v1/me does not send a DELETE elsewhere.
    const before = received.length;
    for (const attempt of [
      { method: "DELETE", path: "/v1/admin/everything" },
      { method: "DELETE", path: "/v1/me" },
      { method: "GET", path: "/v1/me/../admin" },
      { method: "GET", path: "/v1/me?include=billing" },
      { method: "GET", path: "/v1/me/" },
      { method: "GET", path: "/v1/Me" },
      { method: "POST", path: "/v1/me", body: {} },
    ]) {
      const answer = await http(agent, attempt);
      expect(answer.origin_status, JSON.stringify(attempt)).toBeUndefined();
      expect(answer.grant_id).not.toBe(asked.grant_id);
    }
    expect(received.slice(before)).toEqual([]);

    expect((await http(agent, { method: "GET", path: "/v1/me" })).origin_status).toBe(200);
    expect(arrivals("GET /v1/me")).toBeGreaterThanOrEqual(1);
    const sent = received.length;
    // Spent: the same call again asks again.
    expect((await http(agent, { method: "GET", path: "/v1/me" })).status).toBe("pending");
    expect(received.length).toBe(sent);
    await agent.close();
  });

  it("binds the body by its SHA-256: a changed body is a new request; the approved bytes go out", async () => {
    const { op, agent } = await setUp();
    const body = { amount: 100, currency: "eur" };
    const asked = await http(agent, { method: "POST", path: "/v1/refunds?dry=1", body });
    expect(asked.status).toBe("pending");
    const digest = createHash("sha256").update(JSON.stringify(body)).digest("hex");
    const inbox = (await op.request("GET", "/api/inbox")).json().approvals as InboxGrant[];
    expect(inbox.find((g) => g.grant_id === asked.grant_id)?.call).toEqual({
      method: "POST",
      host: HOST,
      path: "/v1/refunds?dry=1",
      body_sha256: digest,
    });
    await approve(op, asked.grant_id!);

    const before = received.length;
    for (const changed of [
      { amount: 100000, currency: "eur" },
      { currency: "eur", amount: 100 },
      { amount: 100, currency: "eur", extra: true },
    ]) {
      const answer = await http(agent, { method: "POST", path: "/v1/refunds?dry=1", body: changed });
      expect(answer.status, JSON.stringify(changed)).toBe("pending");
    }
    // The same body form-encoded is other bytes, so another request too.
    const form = await http(agent, {
      method: "POST",
      path: "/v1/refunds?dry=1",
      body,
      content_type: "application/x-www-form-urlencoded",
    });
    expect(form.status).toBe("pending");
    expect(received.length).toBe(before);

    expect((await http(agent, { method: "POST", path: "/v1/refunds?dry=1", body })).origin_status).toBe(200);
    expect(received.at(-1)).toBe(`POST /v1/refunds?dry=1 ${JSON.stringify(body)}`);
    await agent.close();
  });

  it("a pending request is reused only for the same call; another call is another approval to see", async () => {
    const { op, agent } = await setUp();
    const first = await http(agent, { method: "GET", path: "/v1/a" });
    const again = await http(agent, { method: "GET", path: "/v1/a" });
    const other = await http(agent, { method: "DELETE", path: "/v1/a" });
    expect(again.grant_id).toBe(first.grant_id);
    expect(other.grant_id).not.toBe(first.grant_id);
    // Approving the first one never lets the DELETE through.
    await approve(op, first.grant_id!);
    expect((await http(agent, { method: "DELETE", path: "/v1/a" })).status).toBe("pending");
    expect(arrivals("DELETE /v1/a")).toBe(0);
    await agent.close();
  });
});

describe("an 8-hour approval covers the approved host and method under the path's prefix", () => {
  it("GET /v1/repos/latch approved for 8 hours covers GET /v1/repos/*, not another method or prefix", async () => {
    const { op, agent } = await setUp();
    const asked = await http(agent, { method: "GET", path: "/v1/repos/latch?page=1" });
    await approve(op, asked.grant_id!, "session");
    expect((await http(agent, { method: "GET", path: "/v1/repos/latch?page=2" })).origin_status).toBe(200);
    expect((await http(agent, { method: "GET", path: "/v1/repos/other/issues" })).origin_status).toBe(200);
    for (const outside of [
      { method: "DELETE", path: "/v1/repos/latch" },
      { method: "GET", path: "/v1/users/me" },
      { method: "GET", path: "/v1/repos" },
      { method: "POST", path: "/v1/repos/latch", body: {} },
    ]) {
      const answer = await http(agent, outside);
      expect(answer.status, JSON.stringify(outside)).toBe("pending");
    }
    expect(arrivals("DELETE /v1/repos/latch")).toBe(0);
    await agent.close();
  });
});

describe("request_grant without a call", () => {
  it("asks for the whole item and says so, to the agent and in the inbox", async () => {
    const { op, agent } = await setUp();
    const asked = toolAnswer(
      await agent.callTool({ name: "request_grant", arguments: { item_name: "API_KEY" } }),
    );
    expect(asked.call).toBeNull();
    expect(asked.message).toMatch(/as a whole/);
    expect(asked.message).toMatch(/any call/);
    const inbox = (await op.request("GET", "/api/inbox")).json().approvals as InboxGrant[];
    expect(inbox.find((g) => g.grant_id === asked.grant_id)?.call).toBeNull();
    await approve(op, asked.grant_id!);
    expect((await http(agent, { method: "DELETE", path: "/v1/anything" })).origin_status).toBe(200);
    expect((await http(agent, { method: "DELETE", path: "/v1/anything" })).status).toBe("pending");
    await agent.close();
  });
});

describe("a collect request binds the approval it activates to the call that asked", () => {
  it("storing the value approves the asking call once; another method or path asks again", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: SECRET,
      items: [],
      clientName: "collect agent",
    });
    const agent = await connectAgent(url, token);
    const ask = { method: "GET", path: "/v1/me?fields=id", host: HOST };
    const need = toolAnswer(await agent.callTool({ name: "http_request", arguments: ask }));
    expect(need.status).toBe("need_item");
    const requests = (await op.request("GET", "/api/inbox")).json().requests as {
      need_id: string;
      call: InboxGrant["call"];
    }[];
    expect(requests.find((r) => r.need_id === need.need_id)?.call).toEqual({
      method: "GET",
      host: HOST,
      path: "/v1/me?fields=id",
      body_sha256: null,
    });
    const fulfilled = await op.request("POST", `/api/need-items/${need.need_id}/fulfill`, { value: SECRET });
    expect(fulfilled.statusCode, fulfilled.body).toBe(200);
    expect(fulfilled.json().grant.call).toMatchObject({ method: "GET", path: "/v1/me?fields=id" });

    const before = received.length;
    const widened = toolAnswer(
      await agent.callTool({ name: "http_request", arguments: { ...ask, method: "DELETE", path: "/v1/me" } }),
    );
    expect(widened.status).toBe("pending");
    expect(received.length).toBe(before);
    expect(toolAnswer(await agent.callTool({ name: "http_request", arguments: ask })).origin_status).toBe(
      200,
    );
    expect(received.at(-1)).toBe("GET /v1/me?fields=id");
    await agent.close();
  });
});
