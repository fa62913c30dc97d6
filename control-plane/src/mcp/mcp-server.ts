// The MCP method table (spec 4.1): initialize, ping, tools/list, tools/call, notifications.
// Transport-free: the HTTP routes and the stdio loop both hand frames to `handle`.
import { AppError } from "@latch/shared/errors";
import { BearerNotLive } from "../auth/principal.ts";
import { describeArgumentProblem } from "../tools/argument-problem.ts";
import type { ToolAnswer, ToolCaller, ToolHandlers } from "../tools/tool-answer.ts";
import { HOSTED_TOOL_ALIASES, listToolDefinitions, TOOL_ARGS, type ToolName } from "../tools/tool-schemas.ts";
import {
  parseRpcRequest,
  RPC_INVALID_PARAMS,
  RPC_INVALID_REQUEST,
  RPC_METHOD_NOT_FOUND,
  RPC_TOOL_ERROR,
  type RpcId,
  type RpcResponse,
  rpcError,
  rpcResult,
} from "./jsonrpc.ts";

export const MCP_PROTOCOL_VERSION = "2024-11-05";
export const SERVER_NAME = "latch";
export const SERVER_VERSION = "0.1.0";

/** Who is calling: set by the transport from its credential, never from the frame. */
export type McpCaller = ToolCaller;

export interface McpServerOptions {
  instructions: string;
  tools: ToolHandlers;
  /** Old tool names and what they stand for; the hosted set unless given (local adds list_secrets). */
  aliases?: Readonly<Record<string, ToolName>>;
  /** Called with each initialize's clientInfo.name (stdio uses it as the agent id). */
  onInitialize?: (clientName: string | undefined) => void;
  logError?: (error: unknown) => void;
}

export interface McpServer {
  /** One frame in; a response, or undefined for a notification (HTTP 202, nothing on stdio). */
  handle(frame: unknown, caller: McpCaller): Promise<RpcResponse | undefined>;
}

export function createMcpServer(options: McpServerOptions): McpServer {
  const aliases = options.aliases ?? HOSTED_TOOL_ALIASES;
  async function callTool(
    id: RpcId,
    params: Record<string, unknown>,
    caller: McpCaller,
  ): Promise<RpcResponse> {
    const requested = typeof params.name === "string" ? params.name : "";
    const name = ((Object.hasOwn(aliases, requested) ? aliases[requested] : undefined) ??
      requested) as ToolName;
    const schema = TOOL_ARGS[name];
    if (!Object.hasOwn(TOOL_ARGS, name) || !schema) {
      return rpcError(id, RPC_INVALID_PARAMS, `unknown tool ${requested.slice(0, 64)}`);
    }
    const parsed = schema.safeParse(params.arguments ?? {});
    if (!parsed.success) {
      return rpcError(
        id,
        RPC_INVALID_PARAMS,
        describeArgumentProblem(name, parsed.error, params.arguments ?? {}),
      );
    }
    try {
      const handler = options.tools[name] as (args: unknown, caller: McpCaller) => Promise<ToolAnswer>;
      const answer = await handler(parsed.data, caller);
      return rpcResult(id, {
        content: [{ type: "text", text: JSON.stringify(answer.payload) }],
        ...(answer.isError ? { isError: true } : {}),
      });
    } catch (error) {
      // The caller's bearer turned out no longer live: the transport answers 401, not a result.
      if (error instanceof BearerNotLive) throw error;
      if (error instanceof AppError) {
        // Ours, not the agent's (a policy that cannot be read, the proxy unreachable): the operator
        // must see it too, as the HTTP API's error handler logs every 5xx.
        if (error.status >= 500) options.logError?.(error);
        // A refusal the agent can act on: an error result carrying the same body as the HTTP API.
        return rpcResult(id, {
          content: [{ type: "text", text: JSON.stringify(error.toBody()) }],
          isError: true,
        });
      }
      options.logError?.(error);
      return rpcError(id, RPC_TOOL_ERROR, "the tool failed; try again later");
    }
  }

  return {
    async handle(frame, caller) {
      const parsed = parseRpcRequest(frame);
      if (!parsed.ok) return parsed.response;
      const { request } = parsed;
      // A notification is a frame without an id (JSON-RPC 2.0 section 4.1): nothing answers it. A
      // frame with an id is a request whatever its method, and is answered (an unknown
      // notifications/... with -32601), or its client waits for ever.
      if (request.id === undefined && request.method.startsWith("notifications/")) return undefined;
      // Every MCP method other than a notification is a request and carries an id: a frame without
      // one is refused, never run (a tool call nobody can receive the answer of).
      if (request.id === undefined || request.id === null) {
        return rpcError(
          null,
          RPC_INVALID_REQUEST,
          `${request.method.slice(0, 64)} is a request and needs an id`,
        );
      }
      const id = request.id;
      switch (request.method) {
        case "initialize": {
          const clientInfo = request.params?.clientInfo as { name?: unknown } | undefined;
          options.onInitialize?.(typeof clientInfo?.name === "string" ? clientInfo.name : undefined);
          return rpcResult(id, {
            protocolVersion: MCP_PROTOCOL_VERSION,
            capabilities: { tools: {} },
            serverInfo: { name: SERVER_NAME, version: SERVER_VERSION },
            instructions: options.instructions,
          });
        }
        case "ping":
          return rpcResult(id, {});
        case "tools/list":
          return rpcResult(id, { tools: listToolDefinitions() });
        case "tools/call":
          return callTool(id, request.params ?? {}, caller);
        default:
          return rpcError(id, RPC_METHOD_NOT_FOUND, `method ${request.method.slice(0, 64)} does not exist`);
      }
    },
  };
}
