// Agent- and operator-typed text is judged at the edge (DECISIONS "Approvals", issue 9 section 1):
// a NUL, an unpaired surrogate or a control character in any field, query parameter or path id is
// a 400 naming the argument on the HTTP APIs (hosted and `vault serve`) and -32602 on MCP, never a
// 500 or -32000; free text keeps tab and newline. A JSON body nested past the depth limit is refused
// before anything walks it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildLocalApp } from "../src/local/local-app.ts";
import { createLocalMcpSessions } from "../src/local/local-mcp-sessions.ts";
import type { LocalTokens } from "../src/local/local-tokens.ts";
import { type LocalVault, openLocalVault } from "../src/local/local-vault.ts";
import { newTestOrganisation, testDatabase } from "./database.ts";
import { LogCapture, startEgressHarness } from "./egress-harness.ts";
import {
  type Browser,
  connectAgent,
  type HostedHarness,
  listenHosted,
  operatorWithClient,
  toolAnswer,
} from "./hosted.ts";

const SECRET = "sk_live_edgevalidation_canary_5e1f";

/** The three kinds of unsafe text, as JSON carries them (JSON.stringify escapes "\ud800" as \ud800). */
const UNSAFE = [
  { kind: "NUL", text: "a\u0000b", words: /NUL/ },
  { kind: "unpaired surrogate", text: "a\ud800b", words: /surrogate/ },
  { kind: "control character", text: "a\u001bb", words: /control character/ },
] as const;

/** The same, percent-encoded for a path or a query (a lone surrogate as its 3-byte WTF-8 form). */
const UNSAFE_IN_URL = [
  { kind: "NUL", text: "a%00b" },
  { kind: "unpaired surrogate", text: "a%ED%A0%80b" },
  { kind: "control character", text: "a%1Bb" },
] as const;

/** Free text may keep these. */
const MULTILINE_OK = ["line one\nline two", "col\tcol", "windows\r\nline"];

/** Deeper than any limit the edge keeps: tens of thousands of levels. */
const DEEP = 50_000;
const deepArray = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;

interface Answer {
  status: number;
  body: { error?: { code?: string; message?: string } } & Record<string, unknown>;
}

/** One typed field of an HTTP route: how to send a text in it. */
interface HttpField {
  route: string;
  field: string;
  multiline?: boolean;
  send(text: string): Promise<Answer>;
}

function expectRefused(answer: Answer, field: string, words?: RegExp) {
  expect(answer.status, JSON.stringify(answer.body)).toBe(400);
  expect(answer.body.error?.code).toMatch(/^invalid_/);
  expect(answer.body.error?.message).toContain(field);
  if (words) expect(answer.body.error?.message).toMatch(words);
}

function expectRpcRefused(error: unknown, argument: string, words?: RegExp) {
  expect(error, "the tool call should have been refused").toBeDefined();
  const rpc = error as { code?: number; message?: string };
  expect(rpc.code, rpc.message).toBe(-32602);
  expect(rpc.message).toContain(argument);
  if (words) expect(rpc.message).toMatch(words);
}

async function rpcErrorOf(call: Promise<unknown>): Promise<unknown> {
  try {
    await call;
    return undefined;
  } catch (error) {
    return error;
  }
}

/** Every typed string argument of every MCP tool (spec 4.2), with arguments that are otherwise valid. */
const MCP_ARGUMENTS: {
  tool: string;
  argument: string;
  multiline?: boolean;
  base: Record<string, unknown>;
}[] = [
  ...["task_description", "client_id", "item_name", "host", "path"].map((argument) => ({
    tool: "http_request",
    argument,
    multiline: argument === "task_description",
    base: { method: "GET", path: "/v1/x", item_name: "API_KEY" },
  })),
  ...["host", "task_description"].map((argument) => ({
    tool: "setup",
    argument,
    multiline: argument === "task_description",
    base: { host: "api.latch.test" },
  })),
  ...["item_name", "host", "task_description"].map((argument) => ({
    tool: "find_items",
    argument,
    multiline: argument === "task_description",
    base: { item_name: "API_KEY" },
  })),
  ...["item_name", "task_description"].map((argument) => ({
    tool: "request_grant",
    argument,
    multiline: argument === "task_description",
    base: { item_name: "API_KEY" },
  })),
];

function describeMcpArguments(agentOf: () => Client) {
  for (const { tool, argument, multiline, base } of MCP_ARGUMENTS) {
    for (const bad of UNSAFE) {
      it(`${tool} ${argument} with a ${bad.kind} is -32602 naming the argument`, async () => {
        const error = await rpcErrorOf(
          agentOf().callTool({ name: tool, arguments: { ...base, [argument]: bad.text } }),
        );
        expectRpcRefused(error, argument, bad.words);
      });
    }
    if (multiline) {
      it(`${tool} ${argument} keeps tab and newline`, async () => {
        for (const text of MULTILINE_OK.slice(0, 2)) {
          const result = await agentOf().callTool({
            name: tool,
            arguments: { ...base, [argument]: text, ...(tool === "http_request" ? { dry_run: true } : {}) },
          });
          expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false);
        }
      });
    }
  }
}

describe("hosted", () => {
  let h: HostedHarness;
  let url: string;
  let op: Browser;
  let agent: Client;
  let modelToken: string;
  let trustedToken: string;
  let itemId: string;
  let grantId: string;
  let needId: string;

  const asAnswer = (response: { statusCode: number; json(): unknown }): Answer => ({
    status: response.statusCode,
    body: response.json() as Answer["body"],
  });
  const operatorRequest = async (method: "GET" | "POST" | "DELETE", path: string, body?: unknown) =>
    asAnswer(await op.request(method, path, body));
  const bearerRequest = async (token: string, path: string, body: unknown) =>
    asAnswer(
      await h.app.inject({
        method: "POST",
        url: path,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        payload: JSON.stringify(body),
      }),
    );
  const item = (extra: Record<string, unknown>) => ({
    name: "EDGE_KEY",
    value: SECRET,
    environment: "staging",
    allowed_hosts: ["api.latch.test"],
    ...extra,
  });

  beforeAll(async () => {
    ({ h, url } = await listenHosted((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    }));
    let clientId: string;
    ({
      op,
      token: modelToken,
      clientId,
    } = await operatorWithClient(h, {
      secret: SECRET,
      items: [{ name: "API_KEY", folder_name: "apis" }],
      clientName: "edge agent",
    }));
    expect(clientId).toMatch(/^cli_/);
    trustedToken = (await op.request("POST", "/api/clients/trusted", { name: "runtime" })).json().token;
    itemId = (await op.request("GET", "/api/items")).json().items[0].id;
    agent = await connectAgent(url, modelToken);
    grantId = toolAnswer(await agent.callTool({ name: "request_grant", arguments: { item_name: "API_KEY" } }))
      .grant_id as string;
    needId = toolAnswer(await agent.callTool({ name: "setup", arguments: { host: "missing.latch.test" } }))
      .need_id as string;
    expect(grantId).toBeTruthy();
    expect(needId).toBeTruthy();
  }, 60_000);
  afterAll(async () => {
    await agent?.close();
    await h?.close();
  });

  const fields: HttpField[] = [
    {
      route: "POST /api/items",
      field: "name",
      send: (t) => operatorRequest("POST", "/api/items", item({ name: t })),
    },
    {
      route: "POST /api/items",
      field: "username",
      send: (t) => operatorRequest("POST", "/api/items", item({ username: t })),
    },
    {
      route: "POST /api/items",
      field: "folder_name",
      send: (t) => operatorRequest("POST", "/api/items", item({ folder_name: t })),
    },
    {
      route: "POST /api/items",
      field: "allowed_hosts",
      send: (t) => operatorRequest("POST", "/api/items", item({ allowed_hosts: [t] })),
    },
    {
      route: "POST /api/items",
      field: "inject",
      send: (t) => operatorRequest("POST", "/api/items", item({ inject: `header:${t}` })),
    },
    {
      route: "POST /api/items/:id",
      field: "username",
      send: (t) => operatorRequest("POST", `/api/items/${itemId}`, { username: t }),
    },
    {
      route: "POST /api/items/:id/meta",
      field: "folder_name",
      send: (t) => operatorRequest("POST", `/api/items/${itemId}/meta`, { folder_name: t }),
    },
    {
      route: "POST /api/folders",
      field: "name",
      send: (t) => operatorRequest("POST", "/api/folders", { name: t }),
    },
    {
      route: "POST /api/folders",
      field: "environment",
      send: (t) => operatorRequest("POST", "/api/folders", { name: "ok", environment: t }),
    },
    {
      route: "POST /api/clients/model",
      field: "name",
      send: (t) => operatorRequest("POST", "/api/clients/model", { name: t }),
    },
    {
      route: "POST /api/clients/trusted",
      field: "environment",
      send: (t) => operatorRequest("POST", "/api/clients/trusted", { name: "x", environment: t }),
    },
    {
      route: "POST /api/orgs",
      field: "name",
      send: (t) => operatorRequest("POST", "/api/orgs", { name: t }),
    },
    {
      route: "POST /api/grants/request (operator)",
      field: "task_description",
      multiline: true,
      send: (t) =>
        operatorRequest("POST", "/api/grants/request", {
          item_name: "API_KEY",
          environment: "staging",
          task_description: t,
        }),
    },
    {
      route: "POST /api/grants/request (operator)",
      field: "agent_id",
      send: (t) =>
        operatorRequest("POST", "/api/grants/request", {
          item_name: "API_KEY",
          environment: "staging",
          agent_id: t,
        }),
    },
    {
      route: "POST /api/grants/request (operator)",
      field: "item_name",
      send: (t) => operatorRequest("POST", "/api/grants/request", { item_name: t, environment: "staging" }),
    },
    {
      route: "POST /api/grants/request (operator)",
      field: "environment",
      send: (t) => operatorRequest("POST", "/api/grants/request", { item_name: "API_KEY", environment: t }),
    },
    {
      route: "POST /api/grants/request (model)",
      field: "task_description",
      multiline: true,
      send: (t) =>
        bearerRequest(modelToken, "/api/grants/request", { item_name: "API_KEY", task_description: t }),
    },
    {
      route: "POST /api/grants/:id/approve",
      field: "confirm_name",
      send: (t) =>
        operatorRequest("POST", `/api/grants/${grantId}/approve`, {
          policy: "folder_standing",
          confirm_name: t,
        }),
    },
    {
      route: "POST /api/grants/approve-by-code",
      field: "code",
      send: (t) => operatorRequest("POST", "/api/grants/approve-by-code", { code: t }),
    },
    {
      route: "POST /api/grants/approve-by-code",
      field: "grant_id",
      send: (t) => operatorRequest("POST", "/api/grants/approve-by-code", { code: "ABCD-1234", grant_id: t }),
    },
    {
      route: "POST /api/need-items/:id/fulfill (collect page)",
      field: "username",
      send: (t) =>
        operatorRequest("POST", `/api/need-items/${needId}/fulfill`, { value: SECRET, username: t }),
    },
    {
      route: "POST /api/need-items/:id/fulfill (collect page)",
      field: "name",
      send: (t) => operatorRequest("POST", `/api/need-items/${needId}/fulfill`, { value: SECRET, name: t }),
    },
    {
      route: "POST /runtime/resolve",
      field: "item_name",
      send: (t) => bearerRequest(trustedToken, "/runtime/resolve", { item_name: t }),
    },
    {
      route: "POST /api/auth/otp/send",
      field: "email",
      send: (t) => operatorRequest("POST", "/api/auth/otp/send", { email: `op${t}@example.test` }),
    },
  ];

  for (const { route, field, multiline, send } of fields) {
    for (const bad of UNSAFE) {
      it(`${route} ${field} with a ${bad.kind} is 400 naming ${field}`, async () => {
        expectRefused(await send(bad.text), field, bad.words);
      });
    }
    if (multiline) {
      it(`${route} ${field} keeps tab and newline`, async () => {
        for (const text of MULTILINE_OK) {
          const answer = await send(text);
          expect(answer.status, JSON.stringify(answer.body)).toBeLessThan(300);
        }
      });
    }
  }

  const queries = [
    { route: "GET /api/audit", parameter: "item_name", url: (t: string) => `/api/audit?item_name=${t}` },
    { route: "GET /api/audit", parameter: "client_id", url: (t: string) => `/api/audit?client_id=${t}` },
    { route: "GET /api/items", parameter: "environment", url: (t: string) => `/api/items?environment=${t}` },
  ];
  for (const { route, parameter, url: urlOf } of queries) {
    for (const bad of UNSAFE_IN_URL) {
      it(`${route}?${parameter} with a ${bad.kind} is 400 naming ${parameter}`, async () => {
        expectRefused(await operatorRequest("GET", urlOf(bad.text)), parameter);
      });
    }
  }
  it("a query parameter given twice is 400, not an array reaching the database", async () => {
    expectRefused(await operatorRequest("GET", "/api/audit?item_name=A&item_name=B"), "item_name");
  });

  const pathIds: { route: string; method: "GET" | "POST" | "DELETE"; url: (id: string) => string }[] = [
    { route: "POST /api/grants/:id/approve", method: "POST", url: (id) => `/api/grants/${id}/approve` },
    { route: "POST /api/grants/:id/revoke", method: "POST", url: (id) => `/api/grants/${id}/revoke` },
    { route: "POST /api/items/:id", method: "POST", url: (id) => `/api/items/${id}` },
    { route: "POST /api/items/:id/rotate", method: "POST", url: (id) => `/api/items/${id}/rotate` },
    { route: "DELETE /api/items/:id", method: "DELETE", url: (id) => `/api/items/${id}` },
    { route: "POST /api/clients/:id/rotate", method: "POST", url: (id) => `/api/clients/${id}/rotate` },
    { route: "POST /api/clients/:id/revoke", method: "POST", url: (id) => `/api/clients/${id}/revoke` },
    { route: "GET /api/need-items/:id", method: "GET", url: (id) => `/api/need-items/${id}` },
    { route: "POST /api/need-items/:id/deny", method: "POST", url: (id) => `/api/need-items/${id}/deny` },
    { route: "POST /api/sessions/:id/revoke", method: "POST", url: (id) => `/api/sessions/${id}/revoke` },
  ];
  for (const { route, method, url: urlOf } of pathIds) {
    for (const bad of UNSAFE_IN_URL) {
      it(`${route} with a ${bad.kind} in the id is 400 or 404, never 500`, async () => {
        const answer = await operatorRequest(method, urlOf(bad.text), method === "GET" ? undefined : {});
        expect([400, 404], JSON.stringify(answer.body)).toContain(answer.status);
        expect(answer.body.error?.code).toBeTruthy();
      });
    }
  }

  describe("MCP tools through the SDK client", () => {
    describeMcpArguments(() => agent);
  });

  describe("deep nesting", () => {
    it(`a JSON body ${DEEP} levels deep is 400 invalid_json on the hosted API`, async () => {
      const csrf = op.cookies.get("latch_csrf") ?? "";
      const response = await h.app.inject({
        method: "POST",
        url: "/api/items",
        headers: {
          origin: "http://localhost:8787",
          cookie: [...op.cookies].map(([k, v]) => `${k}=${v}`).join("; "),
          "x-csrf-token": csrf,
          "content-type": "application/json",
        },
        payload: `{"name":"DEEP_KEY","value":"x","allowed_hosts":${deepArray(DEEP)}}`,
      });
      expect(response.statusCode, response.body).toBe(400);
      expect(response.json().error).toMatchObject({
        code: "invalid_json",
        message: expect.stringMatching(/deep/),
      });
    });

    it("an http_request body nested deeply is -32602 through the SDK client", async () => {
      let body: unknown = {};
      for (let i = 0; i < 1000; i++) body = { a: body };
      const error = await rpcErrorOf(
        agent.callTool({
          name: "http_request",
          arguments: { method: "POST", path: "/v1/x", item_name: "API_KEY", body },
        }),
      );
      expectRpcRefused(error, "body", /deep/);
    });

    it(`a raw JSON-RPC frame ${DEEP} levels deep on /mcp is -32602 for its id`, async () => {
      const response = await fetch(`${url}/mcp`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${modelToken}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"http_request","arguments":{"method":"POST","path":"/v1/x","item_name":"API_KEY","body":${deepArray(DEEP)}}}}`,
      });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ jsonrpc: "2.0", id: 41, error: { code: -32602 } });
    });

    it("a body on /mcp that is not JSON is JSON-RPC's parse error (-32700, id null) with 400", async () => {
      for (const body of ['{"jsonrpc":"2.0","id":1,', "", "\u0000"]) {
        const response = await fetch(`${url}/mcp`, {
          method: "POST",
          headers: { authorization: `Bearer ${modelToken}`, "content-type": "application/json" },
          body,
        });
        expect(response.status, body).toBe(400);
        expect(await response.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } });
      }
      // Without a bearer, the body is never read: 401 as before.
      const anonymous = await fetch(`${url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{",
      });
      expect(anonymous.status).toBe(401);
    });
  });
});

describe("local (vault serve)", () => {
  const tokens: LocalTokens = { operator: "lvo_edge_operator_token", model: "lvm_edge_model_token" };
  let harness: Awaited<ReturnType<typeof startEgressHarness>>;
  let vault: LocalVault;
  let app: FastifyInstance;
  let url: string;
  let agent: Client;

  const operator = async (method: string, path: string, body?: unknown, raw?: string): Promise<Answer> => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${tokens.operator}`,
        ...(body === undefined && raw === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(raw !== undefined ? { body: raw } : body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Answer["body"] };
  };

  beforeAll(async () => {
    harness = await startEgressHarness();
    const database = await testDatabase();
    const logger = pino({ level: "debug" }, new LogCapture());
    vault = await openLocalVault({
      dataDir: harness.dataDir,
      logger,
      database,
      egress: { client: harness.client, sealingKey: async () => harness.proxy.sealingKey },
      organisationId: await newTestOrganisation(database),
    });
    app = buildLocalApp({ vault, tokens, sessions: createLocalMcpSessions(), logger });
    url = await app.listen({ host: "127.0.0.1", port: 0 });
    const stored = await operator("POST", "/api/items", {
      name: "API_KEY",
      value: SECRET,
      allowed_hosts: ["api.latch.test"],
    });
    expect(stored.status).toBe(201);
    agent = new Client({ name: "edge-agent", version: "1.0.0" });
    await agent.connect(
      new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${tokens.model}` } },
      }),
    );
  }, 60_000);
  afterAll(async () => {
    await agent?.close();
    await app?.close();
    await vault?.close();
    await harness?.close();
  });

  const item = (extra: Record<string, unknown>) => ({
    name: "EDGE_KEY",
    value: SECRET,
    allowed_hosts: ["api.latch.test"],
    ...extra,
  });
  const fields: HttpField[] = [
    {
      route: "POST /api/items",
      field: "username",
      send: (t) => operator("POST", "/api/items", item({ username: t })),
    },
    {
      route: "POST /api/secrets",
      field: "folder_name",
      send: (t) => operator("POST", "/api/secrets", item({ folder_name: t })),
    },
    {
      route: "POST /api/grants/request",
      field: "agent_id",
      send: (t) => operator("POST", "/api/grants/request", { item_name: "API_KEY", agent_id: t }),
    },
    {
      route: "POST /api/grants/request",
      field: "item_name",
      send: (t) => operator("POST", "/api/grants/request", { item_name: t, agent_id: "agent" }),
    },
    {
      route: "POST /api/grants/request",
      field: "task_description",
      multiline: true,
      send: (t) =>
        operator("POST", "/api/grants/request", {
          item_name: "API_KEY",
          agent_id: "agent",
          task_description: t,
        }),
    },
    {
      route: "POST /api/grants",
      field: "agent_id",
      send: (t) => operator("POST", "/api/grants", { item_name: "API_KEY", agent_id: t }),
    },
    {
      route: "POST /api/grants",
      field: "grant_id",
      send: (t) => operator("POST", "/api/grants", { grant_id: t }),
    },
  ];
  for (const { route, field, multiline, send } of fields) {
    for (const bad of UNSAFE) {
      it(`${route} ${field} with a ${bad.kind} is 400 naming ${field}`, async () => {
        expectRefused(await send(bad.text), field, bad.words);
      });
    }
    if (multiline) {
      it(`${route} ${field} keeps tab and newline`, async () => {
        for (const text of MULTILINE_OK) {
          const answer = await send(text);
          expect(answer.status, JSON.stringify(answer.body)).toBeLessThan(300);
        }
      });
    }
  }

  for (const bad of UNSAFE_IN_URL) {
    it(`GET /api/audit?item_name with a ${bad.kind} is 400 naming item_name`, async () => {
      expectRefused(await operator("GET", `/api/audit?item_name=${bad.text}`), "item_name");
    });
    it(`path ids with a ${bad.kind} are 400 or 404, never 500`, async () => {
      for (const [method, path] of [
        ["DELETE", `/api/items/${bad.text}`],
        ["POST", `/api/grants/${bad.text}/revoke`],
      ] as const) {
        const answer = await operator(method, path, method === "POST" ? {} : undefined);
        expect([400, 404], `${method} ${path}: ${JSON.stringify(answer.body)}`).toContain(answer.status);
      }
    });
  }

  describe("MCP tools through the SDK client", () => {
    describeMcpArguments(() => agent);
  });

  describe("deep nesting", () => {
    it(`a JSON body ${DEEP} levels deep is 400 invalid_json on the local API`, async () => {
      const answer = await operator(
        "POST",
        "/api/items",
        undefined,
        `{"name":"DEEP_KEY","value":"x","allowed_hosts":${deepArray(DEEP)}}`,
      );
      expect(answer.status, JSON.stringify(answer.body)).toBe(400);
      expect(answer.body.error).toMatchObject({
        code: "invalid_json",
        message: expect.stringMatching(/deep/),
      });
    });

    it("an http_request body nested deeply is -32602 through the SDK client", async () => {
      let body: unknown = [];
      for (let i = 0; i < 1000; i++) body = [body];
      const error = await rpcErrorOf(
        agent.callTool({
          name: "http_request",
          arguments: { method: "POST", path: "/v1/x", item_name: "API_KEY", body },
        }),
      );
      expectRpcRefused(error, "body", /deep/);
    });

    it(`a raw JSON-RPC frame ${DEEP} levels deep on /mcp is -32602 for its id`, async () => {
      const headers = {
        authorization: `Bearer ${tokens.model}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      };
      const initialized = await fetch(`${url}/mcp`, {
        method: "POST",
        headers,
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: {
            protocolVersion: "2024-11-05",
            capabilities: {},
            clientInfo: { name: "raw", version: "1" },
          },
        }),
      });
      const session = initialized.headers.get("mcp-session-id") ?? "";
      expect(session).not.toBe("");
      const response = await fetch(`${url}/mcp`, {
        method: "POST",
        headers: { ...headers, "mcp-session-id": session },
        body: `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"http_request","arguments":{"method":"POST","path":"/v1/x","body":${deepArray(DEEP)}}}}`,
      });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ jsonrpc: "2.0", id: 42, error: { code: -32602 } });
    });

    it("a body on /mcp that is not JSON is JSON-RPC's parse error (-32700, id null) with 400", async () => {
      const response = await fetch(`${url}/mcp`, {
        method: "POST",
        headers: { authorization: `Bearer ${tokens.model}`, "content-type": "application/json" },
        body: '{"jsonrpc":',
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } });
    });
  });
});
