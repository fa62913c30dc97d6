// `vault serve` end to end over HTTP with the official MCP SDK client as the agent, a real egress
// proxy and a real TLS origin on loopback (spec 4.4, 4.2 local rules, 3.1).
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { refuseAuditRows } from "../../test/database.ts";
import { type EgressHarness, LogCapture, startEgressHarness } from "../../test/egress-harness.ts";
import {
  connectLocalAgent as connectAgent,
  localOperator,
  toolPayload as payloadOf,
  startLocalVault,
  LOCAL_TOKENS as tokens,
  type LocalRig as Vault,
} from "../../test/local.ts";
import { SESSION_IDLE_MS } from "../mcp/mcp-sessions.ts";

const SECRET = "ghp_localcanary_0123456789abcdef";

let harness: EgressHarness;
let clock = Date.now();
const logs = new LogCapture();

/** A local vault in its own organisation, listening on a free loopback port. */
const startVault = () => startLocalVault(harness, { logs, sessionClock: () => clock });

/** The fields of the local operator API's answers that these tests read (spec 4.4). */
interface OperatorAnswer {
  secret?: unknown;
  grant?: { grant_id: string; expires_at: string };
  grants?: unknown[];
}

const operator = (v: Vault, method: string, path: string, body?: unknown) =>
  localOperator<OperatorAnswer>(v, method, path, body);

async function storeSecret(v: Vault, name = "GITHUB_TOKEN", extra: Record<string, unknown> = {}) {
  const stored = await operator(v, "POST", "/api/secrets", {
    name,
    value: SECRET,
    allowed_hosts: ["api.latch.test"],
    ...extra,
  });
  expect(stored.status).toBe(201);
  return stored.json.secret;
}

const call = (client: Client, args: Record<string, unknown>) =>
  client.callTool({ name: "http_request", arguments: { method: "GET", path: "/v1/echo", ...args } });

beforeAll(async () => {
  harness = await startEgressHarness();
  harness.setHandler((req, res) => {
    res.writeHead(200, { "content-type": "application/json", "x-request-id": "req-1" });
    res.end(JSON.stringify({ saw: req.headers.authorization ?? null, path: req.url }));
  });
}, 60_000);

afterAll(async () => {
  await harness.close();
});

describe("the approval cycle", () => {
  it("answers pending, then after approval calls once with a redacted answer, then pending again", async () => {
    const v = await startVault();
    await storeSecret(v);
    const agent = await connectAgent(v.url);

    const first = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN" }));
    expect(first).toMatchObject({
      status: "pending",
      item_name: "GITHUB_TOKEN",
      grant_id: expect.any(String),
    });
    expect((first.next as { for_model: string }).for_model).toContain(`vault approve ${first.grant_id}`);
    const before = harness.origin.requests.length;

    const approved = await operator(v, "POST", "/api/grants", { grant_id: first.grant_id, scope: "once" });
    expect(approved.json.grant).toMatchObject({ status: "active", policy: "prompt", agent_id: "test-agent" });

    const answer = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN" }));
    expect(answer).toMatchObject({
      origin_status: 200,
      status: 200,
      origin_headers: { "x-request-id": "req-1" },
    });
    expect(answer.body).toContain("Bearer [redacted]");
    expect(JSON.stringify(answer)).not.toContain(SECRET);
    expect(harness.origin.requests.length).toBe(before + 1);
    expect(harness.origin.requests.at(-1)!.headers.authorization).toBe(`Bearer ${SECRET}`);

    const grants = payloadOf(await agent.callTool({ name: "list_grants", arguments: {} }));
    expect(grants.grants).toEqual([
      expect.objectContaining({ grant_id: first.grant_id, status: "consumed" }),
    ]);

    const again = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN" }));
    expect(again.status).toBe("pending");
    expect(again.grant_id).not.toBe(first.grant_id);
    await agent.close();
    await v.app.close();
  });

  it("keeps a session grant for many calls and stops when it is revoked", async () => {
    const v = await startVault();
    await storeSecret(v);
    const agent = await connectAgent(v.url, "session-agent");
    const granted = await operator(v, "POST", "/api/grants", {
      item_name: "GITHUB_TOKEN",
      agent_id: "session-agent",
      scope: "session",
    });
    expect(granted.status).toBe(201);
    expect(Date.parse(granted.json.grant!.expires_at) - Date.now()).toBeGreaterThan(7.9 * 3600_000);
    for (let i = 0; i < 3; i++) {
      expect(payloadOf(await call(agent, { host: "api.latch.test" })).origin_status).toBe(200);
    }
    // Another agent's approval does not carry over.
    const other = await connectAgent(v.url, "other-agent");
    expect(payloadOf(await call(other, { item_name: "GITHUB_TOKEN" })).status).toBe("pending");

    await operator(v, "POST", `/api/grants/${granted.json.grant!.grant_id}/revoke`);
    expect(payloadOf(await call(agent, { item_name: "GITHUB_TOKEN" })).status).toBe("pending");
    const listed = await operator(v, "GET", "/api/grants");
    expect(listed.json.grants).toContainEqual(
      expect.objectContaining({ grant_id: granted.json.grant!.grant_id, status: "revoked" }),
    );
    await agent.close();
    await other.close();
    await v.app.close();
  });

  it("sends exactly one request upstream for two simultaneous calls on one once grant", async () => {
    const v = await startVault();
    await storeSecret(v);
    const agent = await connectAgent(v.url, "racer");
    const pending = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN" }));
    await operator(v, "POST", "/api/grants", { grant_id: pending.grant_id, scope: "once" });
    const before = harness.origin.requests.length;
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => call(agent, { item_name: "GITHUB_TOKEN" }).then(payloadOf)),
    );
    expect(answers.filter((a) => a.origin_status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === "pending")).toHaveLength(5);
    expect(harness.origin.requests.length).toBe(before + 1);
    await agent.close();
    await v.app.close();
  });

  it("gives a once grant back when the request never left (the proxy refused the destination)", async () => {
    const v = await startVault();
    // Allowed by the item, but it resolves nowhere public: the proxy refuses before sending.
    await storeSecret(v, "INTERNAL_TOKEN", { allowed_hosts: ["nowhere.invalid"] });
    const agent = await connectAgent(v.url, "refused-agent");
    const pending = payloadOf(await call(agent, { item_name: "INTERNAL_TOKEN" }));
    await operator(v, "POST", "/api/grants", { grant_id: pending.grant_id, scope: "once" });
    const refused = payloadOf(await call(agent, { item_name: "INTERNAL_TOKEN" }));
    expect(refused.error).toBeDefined();
    const grants = await operator(v, "GET", "/api/grants");
    expect(grants.json.grants).toContainEqual(
      expect.objectContaining({ grant_id: pending.grant_id, status: "active", consumed_at: null }),
    );
    await agent.close();
    await v.app.close();
  });
});

describe("the approvals the local console shows (DECISIONS: the approval, readable and reversible)", () => {
  it("keeps a request's body, records the local operator's decisions, and hears a Deny", async () => {
    const v = await startVault();
    await storeSecret(v);
    const agent = await connectAgent(v.url);
    const ask = { method: "POST", path: "/v1/issues", item_name: "GITHUB_TOKEN", body: { title: "Ship it" } };
    const first = payloadOf(await call(agent, ask));
    type Listed = { grant_id: string; body: { text: string } | null; after_deny_at: string | null } & Record<
      string,
      unknown
    >;
    const listed = async () => (await operator(v, "GET", "/api/grants")).json.grants as Listed[];
    expect((await listed()).find((g) => g.grant_id === first.grant_id)?.body?.text).toBe(
      '{\n  "title": "Ship it"\n}',
    );

    // Denied from the console (revoke of a pending request), then asked again: pending, marked,
    // and the agent is told the operator refused it a moment ago.
    expect((await operator(v, "POST", `/api/grants/${first.grant_id}/revoke`, {})).status).toBe(200);
    const again = payloadOf(await call(agent, ask));
    expect(again.status).toBe("pending");
    expect((again.next as { for_model: string }).for_model).toMatch(
      /refused this exact request a moment ago/,
    );
    expect((again.next as { for_model: string }).for_model).toContain("vault approve");
    const repeated = (await listed()).find((g) => g.grant_id === again.grant_id)!;
    expect(repeated.after_deny_at).toBeTruthy();
    expect((await listed()).find((g) => g.grant_id === first.grant_id)).toMatchObject({
      status: "revoked",
      revoked_by: "local",
    });

    // Approved: the local operator is who approved it; a use marks its last use.
    await operator(v, "POST", "/api/grants", { grant_id: again.grant_id, scope: "session" });
    expect(payloadOf(await call(agent, ask)).origin_status).toBe(200);
    expect((await listed()).find((g) => g.grant_id === again.grant_id)).toMatchObject({
      status: "active",
      approved_by: { operator_id: "local", email: null },
      last_used_at: expect.any(String),
    });
    await agent.close();
    await v.app.close();
  });
});

describe("the local operator's decisions and the hourly limit (spec 8, DECISIONS Ledger)", () => {
  it("an approval whose audit row the database refuses approves nothing, and the retry approves it once", async () => {
    const v = await startVault();
    await storeSecret(v);
    const agent = await connectAgent(v.url, "atomic-agent");
    const pending = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN" }));
    const restore = await refuseAuditRows(v.vault.database, v.vault.organisationId, "grant_approved");
    const refused = await operator(v, "POST", "/api/grants", { grant_id: pending.grant_id, scope: "once" });
    expect(refused.status).toBe(500);
    await restore();
    const listed = (await operator(v, "GET", "/api/grants")).json.grants as {
      grant_id: string;
      status: string;
    }[];
    expect(listed.find((g) => g.grant_id === pending.grant_id)?.status).toBe("pending");
    // Nothing was approved, so the agent is still waiting, and nothing left.
    const before = harness.origin.requests.length;
    expect(payloadOf(await call(agent, { item_name: "GITHUB_TOKEN" })).status).toBe("pending");
    expect(harness.origin.requests.length).toBe(before);

    const approved = await operator(v, "POST", "/api/grants", { grant_id: pending.grant_id, scope: "once" });
    expect(approved.json.grant).toMatchObject({ status: "active" });
    const rows = await v.vault.audit.findAuditEvents(v.vault.organisationId);
    expect(rows.filter((e) => e.action === "grant_approved")).toHaveLength(1);
    await agent.close();
    await v.app.close();
  });

  it("answers the 31st new approval request in an hour with 429, by API and by MCP, and again after the hour", async () => {
    let now = Date.now();
    const v = await startLocalVault(harness, { logs, now: () => new Date(now) });
    await storeSecret(v);
    for (let i = 0; i < 30; i++) {
      const asked = await operator(v, "POST", "/api/grants/request", {
        item_name: "GITHUB_TOKEN",
        agent_id: `agent-${i}`,
        tool_id: "http_request",
      });
      expect(asked.status).toBe(201);
    }
    // Asking again for one already waiting is not a new request.
    const repeated = await operator(v, "POST", "/api/grants/request", {
      item_name: "GITHUB_TOKEN",
      agent_id: "agent-0",
      tool_id: "http_request",
    });
    expect(repeated.status).toBe(201);
    const limited = await localOperator<{ error: { code: string; retry_after: number } }>(
      v,
      "POST",
      "/api/grants/request",
      {
        item_name: "GITHUB_TOKEN",
        agent_id: "agent-31",
        tool_id: "http_request",
      },
    );
    expect(limited.status).toBe(429);
    expect(limited.json.error).toMatchObject({ code: "rate_limited", retry_after: expect.any(Number) });

    const agent = await connectAgent(v.url, "flooding-agent");
    const flooded = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN", path: "/v1/echo?n=31" }));
    expect(JSON.stringify(flooded)).toContain("rate_limited");
    expect(flooded.status).not.toBe("pending");
    const grants = (await operator(v, "GET", "/api/grants")).json.grants as unknown[];
    expect(grants).toHaveLength(30);

    now += 60 * 60_000 + 1000;
    expect(payloadOf(await call(agent, { item_name: "GITHUB_TOKEN" })).status).toBe("pending");
    await agent.close();
    await v.app.close();
  });
});

describe("an approval is for the call it was asked for, and spent exactly once (vault serve)", () => {
  it("a once approval for GET /v1/echo does not send a DELETE, another path or another body", async () => {
    const v = await startVault();
    await storeSecret(v);
    const agent = await connectAgent(v.url, "binding-agent");
    const pending = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN", path: "/v1/echo?x=1" }));
    const listed = await operator(v, "GET", "/api/grants");
    expect(listed.json.grants).toContainEqual(
      expect.objectContaining({
        grant_id: pending.grant_id,
        call: { method: "GET", host: "api.latch.test", path: "/v1/echo?x=1", body_sha256: null },
      }),
    );
    await operator(v, "POST", "/api/grants", { grant_id: pending.grant_id, scope: "once" });
    const before = harness.origin.requests.length;
    for (const attempt of [
      { method: "DELETE", path: "/v1/admin/everything" },
      { method: "GET", path: "/v1/echo?x=2" },
      { method: "POST", path: "/v1/echo?x=1", body: { a: 1 } },
    ]) {
      const answer = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN", ...attempt }));
      expect(answer.status, JSON.stringify(attempt)).toBe("pending");
    }
    expect(harness.origin.requests.length).toBe(before);
    const answer = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN", path: "/v1/echo?x=1" }));
    expect(answer.origin_status).toBe(200);
    expect(harness.origin.requests.length).toBe(before + 1);
    await agent.close();
    await v.app.close();
  });

  it("a NUL or unpaired surrogate in client_id never reaches the origin nor spends the approval, however often it is sent", async () => {
    const v = await startVault();
    await storeSecret(v);
    const agent = await connectAgent(v.url, "nul-agent");
    const pending = payloadOf(
      await call(agent, { item_name: "GITHUB_TOKEN", method: "DELETE", path: "/v1/x" }),
    );
    await operator(v, "POST", "/api/grants", { grant_id: pending.grant_id, scope: "once" });
    const before = harness.origin.requests.length;
    for (const clientId of ["x\u0000y", "\ud800", "a\u001bb"]) {
      const refused = await agent
        .callTool({
          name: "http_request",
          arguments: { item_name: "GITHUB_TOKEN", method: "DELETE", path: "/v1/x", client_id: clientId },
        })
        .then(
          () => undefined,
          (error: { code?: number; message?: string }) => error,
        );
      expect(refused?.code, JSON.stringify(clientId)).toBe(-32602);
      expect(refused?.message).toContain("client_id");
    }
    expect(harness.origin.requests.length).toBe(before);
    // The approval is still there, for exactly the call the operator saw, once.
    const sent = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN", method: "DELETE", path: "/v1/x" }));
    expect(sent.origin_status).toBe(200);
    const again = payloadOf(
      await call(agent, { item_name: "GITHUB_TOKEN", method: "DELETE", path: "/v1/x" }),
    );
    expect(again.status).toBe("pending");
    expect(harness.origin.requests.length).toBe(before + 1);
    await agent.close();
    await v.app.close();
  });
});

describe("tool answers", () => {
  it("answers need_item with the vault set command when nothing is stored", async () => {
    const v = await startVault();
    const agent = await connectAgent(v.url);
    const answer = payloadOf(await call(agent, { host: "api.example.com" }));
    expect(answer).toMatchObject({
      status: "need_item",
      suggested_name: "EXAMPLE_TOKEN",
      host: "api.example.com",
      command: "vault set EXAMPLE_TOKEN --host api.example.com",
    });
    expect(answer.message).toContain("vault set EXAMPLE_TOKEN --host api.example.com");
    expect(answer).not.toHaveProperty("collect_url");
    const setup = payloadOf(await agent.callTool({ name: "setup", arguments: { host: "api.example.com" } }));
    expect(setup).toMatchObject({
      status: "need_item",
      command: "vault set EXAMPLE_TOKEN --host api.example.com",
    });
    await agent.close();
    await v.app.close();
  });

  it("flags host_mismatch as an error result and sends nothing", async () => {
    const v = await startVault();
    await storeSecret(v);
    const agent = await connectAgent(v.url);
    const before = harness.origin.requests.length;
    const result = await call(agent, { item_name: "GITHUB_TOKEN", host: "api.other.test" });
    expect(result.isError).toBe(true);
    expect(payloadOf(result)).toMatchObject({ status: "host_mismatch" });
    expect(harness.origin.requests.length).toBe(before);
    await agent.close();
    await v.app.close();
  });

  it("reports a dry run without sending, with scope_denied when no approval covers it", async () => {
    const v = await startVault();
    await storeSecret(v);
    const agent = await connectAgent(v.url, "dry-agent");
    const before = harness.origin.requests.length;
    const dry = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN", dry_run: true }));
    expect(dry).toMatchObject({
      status: "dry_run",
      item_name: "GITHUB_TOKEN",
      host: "api.latch.test",
      method: "GET",
      path: "/v1/echo",
      inject: "bearer",
      reason: "scope_denied",
    });
    await operator(v, "POST", "/api/grants", {
      item_name: "GITHUB_TOKEN",
      agent_id: "dry-agent",
      scope: "once",
    });
    const covered = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN", dry_run: true }));
    expect(covered).toMatchObject({ would_send: true, approval: { status: "active", policy: "prompt" } });
    expect(covered).not.toHaveProperty("reason");
    expect(harness.origin.requests.length).toBe(before);
    // The dry run did not spend the once grant.
    expect(payloadOf(await call(agent, { item_name: "GITHUB_TOKEN" })).origin_status).toBe(200);
    await agent.close();
    await v.app.close();
  });

  it("lists items, finds them and never shows a value", async () => {
    const v = await startVault();
    await storeSecret(v);
    const agent = await connectAgent(v.url);
    const listed = payloadOf(await agent.callTool({ name: "list_items", arguments: {} }));
    expect(listed.items).toEqual([
      expect.objectContaining({ name: "GITHUB_TOKEN", last4: "cdef", inject: "bearer", kind: "secret" }),
    ]);
    const alias = payloadOf(await agent.callTool({ name: "list_secrets", arguments: {} }));
    expect(alias).toEqual(listed);
    const found = payloadOf(
      await agent.callTool({ name: "find_items", arguments: { host: "api.latch.test" } }),
    );
    expect(found).toMatchObject({ status: "found", item: { name: "GITHUB_TOKEN" } });
    const mismatch = await agent.callTool({
      name: "find_items",
      arguments: { item_name: "GITHUB_TOKEN", host: "api.other.test" },
    });
    expect(mismatch.isError).toBe(true);
    const ready = payloadOf(await agent.callTool({ name: "setup", arguments: { host: "api.latch.test" } }));
    expect(ready.status).toBe("ready_prompt");
    // Locally there is no inbox: the hint names the `vault approve` command.
    expect((ready.next as { for_model: string }).for_model).toContain("vault approve");
    const requested = payloadOf(
      await agent.callTool({
        name: "request_grant",
        arguments: { item_name: "GITHUB_TOKEN", task_description: "x".repeat(900) },
      }),
    );
    expect(requested).toMatchObject({ status: "pending", policy: "prompt" });
    // Nobody is mailed locally: no notify_failed to report.
    expect(requested).not.toHaveProperty("notify_failed");
    expect((requested.task_description as string).length).toBe(500);
    for (const answer of [listed, found, ready, requested])
      expect(JSON.stringify(answer)).not.toContain(SECRET);
    await agent.close();
    await v.app.close();
  });

  it("answers in the local vault's own words: no notify_failed, no inbox, mail, organisation or console Connect", async () => {
    const v = await startVault();
    await storeSecret(v);
    const agent = await connectAgent(v.url, "words-agent");
    const hostedOnly = /notify_failed|inbox|e-?mail|organi[sz]ation|collect_url|connect_url|sign[ -]in/i;
    const pending = payloadOf(await call(agent, { item_name: "GITHUB_TOKEN" }));
    expect(pending.status).toBe("pending");
    expect(pending.next).toMatchObject({
      tool: "http_request",
      arguments: { method: "GET", path: "/v1/echo", item_name: "GITHUB_TOKEN" },
    });
    expect((pending.next as { for_model: string }).for_model).toContain(`vault approve ${pending.grant_id}`);
    const requested = payloadOf(
      await agent.callTool({ name: "request_grant", arguments: { item_name: "GITHUB_TOKEN" } }),
    );
    expect(requested.next).toMatchObject({ tool: "http_request", arguments: { item_name: "GITHUB_TOKEN" } });
    const missing = payloadOf(await call(agent, { host: "api.example.com" }));
    expect(missing.status).toBe("need_item");
    for (const answer of [pending, requested, missing])
      expect(JSON.stringify(answer)).not.toMatch(hostedOnly);
    // A network failure is advised locally too, in the same words as hosted.
    await operator(v, "POST", "/api/grants", { grant_id: pending.grant_id, scope: "session" });
    harness.setHandler(() => undefined);
    const slow = await call(agent, { item_name: "GITHUB_TOKEN", timeout_ms: 1000 });
    harness.setHandler((req, res) => {
      res.writeHead(200, { "content-type": "application/json", "x-request-id": "req-1" });
      res.end(JSON.stringify({ saw: req.headers.authorization ?? null, path: req.url }));
    });
    expect(slow.isError).toBe(true);
    const timedOut = payloadOf(slow);
    expect(timedOut).toMatchObject({ error: { code: "timeout" }, next: { arguments: { timeout_ms: 2000 } } });
    expect(JSON.stringify(timedOut)).not.toMatch(hostedOnly);
    await agent.close();
    await v.app.close();
  });

  it("refuses an argument the schema does not define with -32602", async () => {
    const v = await startVault();
    const agent = await connectAgent(v.url);
    await expect(
      agent.callTool({
        name: "http_request",
        arguments: { method: "GET", path: "/x", host: "a.test", agent_id: "me" },
      }),
    ).rejects.toMatchObject({ code: -32602 });
    const tools = await agent.listTools();
    expect(tools.tools.map((t) => t.name).sort()).toEqual(
      ["find_items", "http_request", "list_grants", "list_items", "request_grant", "setup"].sort(),
    );
    for (const tool of tools.tools) expect(tool.description?.length).toBeGreaterThan(40);
    await agent.close();
    await v.app.close();
  });
});

describe("the walls of vault serve", () => {
  let v: Vault;
  beforeAll(async () => {
    v = await startVault();
  });
  afterAll(async () => {
    await v.app.close();
  });

  const raw = (
    path: string,
    init: { method?: string; headers?: Record<string, string>; body?: unknown } = {},
  ) =>
    v.app.inject({
      method: (init.method ?? "GET") as "GET",
      url: path,
      headers: { host: "127.0.0.1:8788", ...init.headers },
      ...(init.body === undefined ? {} : { payload: JSON.stringify(init.body) }),
    });
  const initialize = {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2024-11-05", capabilities: {}, clientInfo: { name: "raw" } },
  };
  const mcpHeaders = { authorization: `Bearer ${tokens.model}`, "content-type": "application/json" };

  it("answers /health with the product name and nothing else", async () => {
    const response = await raw("/health");
    expect(response.json()).toEqual({ ok: true, product: "Latch" });
  });

  it.each(["evil.example", "127.0.0.1.nip.io:8788", "attacker.test:8788", "0x7f000001:8788"])(
    "refuses the Host %s (DNS rebinding)",
    async (host) => {
      const response = await raw("/api/items", {
        headers: { host, authorization: `Bearer ${tokens.operator}` },
      });
      expect(response.statusCode).toBe(403);
      expect(response.json().error.code).toBe("forbidden");
    },
  );

  it("refuses a foreign browser Origin on the API and MCP", async () => {
    const api = await raw("/api/items", {
      headers: { origin: "https://evil.example", authorization: `Bearer ${tokens.operator}` },
    });
    expect(api.statusCode).toBe(403);
    expect(api.headers["access-control-allow-origin"]).toBeUndefined();
    const mcp = await raw("/mcp", {
      method: "POST",
      headers: { ...mcpHeaders, origin: "http://localhost:3000" },
      body: initialize,
    });
    expect(mcp.statusCode).toBe(403);
    const own = await raw("/api/items", {
      headers: { origin: "http://127.0.0.1:8788", authorization: `Bearer ${tokens.operator}` },
    });
    expect(own.statusCode).toBe(200);
  });

  it("keeps each bearer on its own surface", async () => {
    const modelOnApi = await raw("/api/items", { headers: { authorization: `Bearer ${tokens.model}` } });
    expect(modelOnApi.statusCode).toBe(403);
    const operatorOnMcp = await raw("/mcp", {
      method: "POST",
      headers: { ...mcpHeaders, authorization: `Bearer ${tokens.operator}` },
      body: initialize,
    });
    expect(operatorOnMcp.statusCode).toBe(403);
    expect((await raw("/api/items")).statusCode).toBe(401);
    expect((await raw("/api/items", { headers: { authorization: "Bearer lvo_wrong" } })).statusCode).toBe(
      401,
    );
    expect(
      (
        await raw("/mcp", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: initialize,
        })
      ).statusCode,
    ).toBe(401);
  });

  it.each(["/%61pi/items", "/%61%70%69/grants", "/%2561pi/items"])(
    "keeps the operator API behind the operator bearer when the path is percent-encoded (%s)",
    async (path) => {
      // The router decodes the path; the wall must judge the route it reaches, not the raw text.
      expect((await raw(path)).statusCode).not.toBe(200);
      const modelOnApi = await raw(path, { headers: { authorization: `Bearer ${tokens.model}` } });
      expect(modelOnApi.statusCode).not.toBe(200);
      const approve = await raw(path.replace(/items$/, "grants"), {
        method: "POST",
        headers: { authorization: `Bearer ${tokens.model}`, "content-type": "application/json" },
        body: { item_name: "GITHUB_TOKEN", agent_id: "evil-agent", scope: "session" },
      });
      expect([401, 403, 404]).toContain(approve.statusCode);
    },
  );

  it("requires the Mcp-Session-Id: 400 without it, 404 unknown or idle for 8 hours", async () => {
    const init = await raw("/mcp", { method: "POST", headers: mcpHeaders, body: initialize });
    expect(init.statusCode).toBe(200);
    const sessionId = init.headers["mcp-session-id"] as string;
    expect(sessionId).toMatch(/^[A-Za-z0-9_-]{32}$/);
    const ping = { jsonrpc: "2.0", id: 2, method: "ping" };
    expect((await raw("/mcp", { method: "POST", headers: mcpHeaders, body: ping })).statusCode).toBe(400);
    const unknown = await raw("/mcp", {
      method: "POST",
      headers: { ...mcpHeaders, "mcp-session-id": "nope" },
      body: ping,
    });
    expect(unknown.statusCode).toBe(404);
    const ok = await raw("/mcp", {
      method: "POST",
      headers: { ...mcpHeaders, "mcp-session-id": sessionId },
      body: ping,
    });
    expect(ok.json()).toEqual({ jsonrpc: "2.0", id: 2, result: {} });
    const notification = await raw("/mcp", {
      method: "POST",
      headers: { ...mcpHeaders, "mcp-session-id": sessionId },
      body: { jsonrpc: "2.0", method: "notifications/initialized" },
    });
    expect(notification.statusCode).toBe(202);
    expect(notification.body).toBe("");
    const unknownMethod = await raw("/mcp", {
      method: "POST",
      headers: { ...mcpHeaders, "mcp-session-id": sessionId },
      body: { jsonrpc: "2.0", id: 3, method: "resources/list" },
    });
    expect(unknownMethod.json().error.code).toBe(-32601);
    clock += SESSION_IDLE_MS + 1000;
    const idle = await raw("/mcp", {
      method: "POST",
      headers: { ...mcpHeaders, "mcp-session-id": sessionId },
      body: ping,
    });
    expect(idle.statusCode).toBe(404);
  });

  it("lets no holder of the model bearer end or crowd out another agent's session", async () => {
    const open = (name: string) =>
      raw("/mcp", {
        method: "POST",
        headers: mcpHeaders,
        body: { ...initialize, params: { ...initialize.params, clientInfo: { name } } },
      });
    const ping = { jsonrpc: "2.0", id: 2, method: "ping" };
    const victim = (await open("victim-agent")).headers["mcp-session-id"] as string;
    // Past the 1,000 sessions the store once kept by dropping the least recently used.
    for (let i = 0; i <= 1000; i++) expect((await open(`flood-${i}`)).statusCode).toBe(200);
    // One name re-initializing in a loop gives up its own oldest past its share (100), never another's.
    for (let i = 0; i < 150; i++) expect((await open("flood-loop")).statusCode).toBe(200);
    const stillThere = await raw("/mcp", {
      method: "POST",
      headers: { ...mcpHeaders, "mcp-session-id": victim },
      body: ping,
    });
    expect(stillThere.statusCode).toBe(200);
    expect((await open("another-agent")).statusCode).toBe(200);
  });

  it("serves the console page with a strict CSP and no values", async () => {
    await storeSecret(v, "CONSOLE_TOKEN");
    const page = await raw("/");
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-security-policy"]).toContain("default-src 'none'");
    expect(page.body).toContain("Approvals");
    const items = await raw("/api/items", { headers: { authorization: `Bearer ${tokens.operator}` } });
    expect(items.body).toContain("CONSOLE_TOKEN");
    expect(items.body).not.toContain(SECRET);
  });

  it("refuses non-JSON bodies (415) and bodies over 128 KiB (413)", async () => {
    const text = await v.app.inject({
      method: "POST",
      url: "/api/items",
      headers: {
        host: "127.0.0.1",
        authorization: `Bearer ${tokens.operator}`,
        "content-type": "text/plain",
      },
      payload: "x",
    });
    expect(text.statusCode).toBe(415);
    const big = await raw("/api/items", {
      method: "POST",
      headers: { authorization: `Bearer ${tokens.operator}`, "content-type": "application/json" },
      body: { name: "BIG", value: "x".repeat(140 * 1024), allowed_hosts: ["a.test"] },
    });
    expect(big.statusCode).toBe(413);
  });

  it("wrote no secret to any log line", () => {
    expect(logs.text()).not.toContain(SECRET);
    expect(harness.logs.text()).not.toContain(SECRET);
  });
});
