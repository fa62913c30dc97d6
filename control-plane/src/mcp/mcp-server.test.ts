import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import type { ToolHandlers } from "../tools/tool-answer.ts";
import { LOCAL_TOOL_ALIASES } from "../tools/tool-schemas.ts";
import { createMcpServer } from "./mcp-server.ts";

const calls: string[] = [];
const ok = (name: string) => async (args: unknown) => {
  calls.push(name);
  return { payload: { tool: name, args: args as Record<string, unknown> } };
};
const tools: ToolHandlers = {
  http_request: ok("http_request"),
  find_items: async () => {
    throw new AppError("host_mismatch", "credential X is not allowed for host y");
  },
  setup: async () => {
    throw new Error("database exploded with internal detail");
  },
  list_items: ok("list_items"),
  request_grant: ok("request_grant"),
  list_grants: async () => {
    throw new AppError("internal", "the saved policy could not be read", { cause: new Error("db gone") });
  },
};
const errors: unknown[] = [];
const server = createMcpServer({ instructions: "be careful", tools, logError: (e) => errors.push(e) });
const caller = { agentId: "test-agent" };
const rpc = (method: string, params?: unknown, id = 1) =>
  server.handle({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) }, caller);

describe("MCP method table", () => {
  it("initializes with protocol 2024-11-05, tools capability, serverInfo latch and instructions", async () => {
    expect(await rpc("initialize", { protocolVersion: "2025-06-18", clientInfo: { name: "c" } })).toEqual({
      jsonrpc: "2.0",
      id: 1,
      result: {
        protocolVersion: "2024-11-05",
        capabilities: { tools: {} },
        serverInfo: { name: "latch", version: expect.any(String) },
        instructions: "be careful",
      },
    });
  });

  it("answers ping with an empty object", async () => {
    expect(await rpc("ping")).toEqual({ jsonrpc: "2.0", id: 1, result: {} });
  });

  it("lists the six tools with object schemas that refuse extra properties", async () => {
    const response = (await rpc("tools/list")) as {
      result: { tools: { name: string; inputSchema: Record<string, unknown> }[] };
    };
    expect(response.result.tools.map((t) => t.name)).toEqual([
      "http_request",
      "find_items",
      "setup",
      "list_items",
      "request_grant",
      "list_grants",
    ]);
    for (const tool of response.result.tools) {
      expect(tool.inputSchema.type).toBe("object");
      expect(tool.inputSchema.additionalProperties).toBe(false);
    }
    const http = response.result.tools[0]!.inputSchema as { required: string[] };
    expect(http.required.sort()).toEqual(["method", "path"]);
  });

  it("gives notifications (no id) no response, and answers a notifications/ method sent with an id", async () => {
    expect(
      await server.handle({ jsonrpc: "2.0", method: "notifications/initialized" }, caller),
    ).toBeUndefined();
    // A frame with an id is a request: its client waits for the answer.
    expect(await rpc("notifications/initialized", undefined, 7)).toMatchObject({
      id: 7,
      error: { code: -32601 },
    });
  });

  it("refuses an id JSON cannot carry exactly with -32600 and id null", async () => {
    for (const id of [
      JSON.parse("123456789012345678901234567890") as number,
      2 ** 53,
      Number.NaN,
      Number.POSITIVE_INFINITY,
    ]) {
      expect(await rpc("ping", undefined, id)).toEqual({
        jsonrpc: "2.0",
        id: null,
        error: { code: -32600, message: expect.stringContaining("id") },
      });
    }
    for (const id of [true, {}, [1]]) {
      expect(await server.handle({ jsonrpc: "2.0", id, method: "notifications/x" }, caller)).toMatchObject({
        id: null,
        error: { code: -32600 },
      });
    }
    expect(await rpc("ping", undefined, 2 ** 53 - 1)).toEqual({
      jsonrpc: "2.0",
      id: 2 ** 53 - 1,
      result: {},
    });
    // A fraction may come in rounded, and JSON-RPC says ids should have none.
    expect(await rpc("ping", undefined, 0.5)).toMatchObject({ id: null, error: { code: -32600 } });
  });

  it("refuses a request without an id with -32600 and does not run the tool", async () => {
    const before = calls.length;
    const withoutId = (method: string, params?: unknown) =>
      server.handle({ jsonrpc: "2.0", method, ...(params ? { params } : {}) }, caller);
    expect(await withoutId("tools/call", { name: "list_items", arguments: {} })).toMatchObject({
      id: null,
      error: { code: -32600 },
    });
    expect(calls.length).toBe(before);
    expect(await withoutId("ping")).toMatchObject({ error: { code: -32600 } });
    expect(await withoutId("notifications/initialized")).toBeUndefined();
  });

  it("answers an unknown method with -32601", async () => {
    expect(await rpc("resources/list")).toMatchObject({ error: { code: -32601 } });
  });

  it("refuses an undefined argument with -32602 and does not run the tool", async () => {
    const before = calls.length;
    const response = await rpc("tools/call", { name: "list_items", arguments: { agent_id: "x" } });
    expect(response).toMatchObject({ error: { code: -32602 } });
    expect(JSON.stringify(response)).toContain("agent_id");
    expect(calls.length).toBe(before);
  });

  it("refuses a bad argument value with -32602", async () => {
    expect(
      await rpc("tools/call", { name: "http_request", arguments: { method: "TRACE", path: "/" } }),
    ).toMatchObject({
      error: { code: -32602 },
    });
  });

  it("accepts the http.request alias; list_secrets only on the local server (spec 4.2)", async () => {
    const response = (await rpc("tools/call", {
      name: "http.request",
      arguments: { method: "GET", path: "/v1" },
    })) as {
      result: { content: { text: string }[] };
    };
    expect(JSON.parse(response.result.content[0]!.text)).toMatchObject({ tool: "http_request" });
    expect(await rpc("tools/call", { name: "list_secrets", arguments: {} })).toMatchObject({
      error: { code: -32602 },
    });
    const local = createMcpServer({ instructions: "local", tools, aliases: LOCAL_TOOL_ALIASES });
    const listed = (await local.handle(
      { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "list_secrets", arguments: {} } },
      caller,
    )) as { result: { content: { text: string }[] } };
    expect(JSON.parse(listed.result.content[0]!.text)).toMatchObject({ tool: "list_items" });
    expect(
      await local.handle(
        { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "toString", arguments: {} } },
        caller,
      ),
    ).toMatchObject({ error: { code: -32602 } });
  });

  it("refuses the tools that do not exist", async () => {
    for (const name of ["get_secret", "read_value", "reveal_secret", "revoke_grant"]) {
      expect(await rpc("tools/call", { name, arguments: {} })).toMatchObject({ error: { code: -32602 } });
    }
  });

  it("turns a refusal into an isError result with a code and message", async () => {
    const response = (await rpc("tools/call", { name: "find_items", arguments: { host: "y" } })) as {
      result: { isError: boolean; content: { text: string }[] };
    };
    expect(response.result.isError).toBe(true);
    expect(JSON.parse(response.result.content[0]!.text)).toEqual({
      error: { code: "host_mismatch", message: "credential X is not allowed for host y" },
    });
  });

  it("logs a refusal of ours (5xx), never an agent's (4xx), and answers both as error results", async () => {
    const before = errors.length;
    await rpc("tools/call", { name: "find_items", arguments: { host: "y" } });
    expect(errors).toHaveLength(before);
    const response = (await rpc("tools/call", { name: "list_grants", arguments: {} })) as {
      result: { isError: boolean; content: { text: string }[] };
    };
    expect(response.result.isError).toBe(true);
    expect(JSON.parse(response.result.content[0]!.text).error.code).toBe("internal");
    expect(errors).toHaveLength(before + 1);
    expect((errors.at(-1) as AppError).message).toBe("the saved policy could not be read");
    errors.length = before;
  });

  it("hides an unexpected failure behind -32000 and logs it", async () => {
    const response = await rpc("tools/call", { name: "setup", arguments: { host: "api.example.com" } });
    expect(response).toMatchObject({ error: { code: -32000 } });
    expect(JSON.stringify(response)).not.toContain("internal detail");
    expect(errors).toHaveLength(1);
  });

  it("refuses a frame nested deeper than the limit before any tool runs: -32602 in params, else -32600", async () => {
    const before = calls.length;
    const deepBody = JSON.parse(`${"[".repeat(50_000)}${"]".repeat(50_000)}`);
    const response = await rpc("tools/call", {
      name: "http_request",
      arguments: { method: "POST", path: "/", body: deepBody },
    });
    expect(response).toMatchObject({ id: 1, error: { code: -32602 } });
    expect(JSON.stringify(response)).toContain("params.arguments.body");
    expect(calls.length).toBe(before);
    let deepId: unknown = {};
    for (let i = 0; i < 100; i++) deepId = { deepId };
    expect(await server.handle({ jsonrpc: "2.0", id: deepId, method: "ping" }, caller)).toMatchObject({
      id: null,
      error: { code: -32600 },
    });
  });

  it("refuses unsafe text in a tool argument with -32602 naming it; free text keeps newlines", async () => {
    const before = calls.length;
    for (const [argument, text] of [
      ["task_description", "a\u0000b"],
      ["client_id", "\ud800"],
      ["path", "/a\u001bb"],
    ] as const) {
      const response = await rpc("tools/call", {
        name: "http_request",
        arguments: { method: "GET", path: "/", [argument]: text },
      });
      expect(response).toMatchObject({ error: { code: -32602 } });
      expect(JSON.stringify(response)).toContain(argument);
    }
    expect(calls.length).toBe(before);
    expect(
      await rpc("tools/call", {
        name: "http_request",
        arguments: { method: "GET", path: "/", task_description: "line\n\tline" },
      }),
    ).toMatchObject({ result: {} });
  });

  it("refuses a frame that is not a JSON-RPC object", async () => {
    expect(await server.handle([1, 2], caller)).toMatchObject({ error: { code: -32600 } });
    expect(await server.handle({ jsonrpc: "1.0", id: 1, method: "ping" }, caller)).toMatchObject({
      error: { code: -32600 },
    });
  });
});
