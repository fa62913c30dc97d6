// JSON-RPC 2.0 framing for MCP: request parsing and the error codes spec 4.1 and 7 name.
import { describeTooDeep, findTooDeep } from "../http/json-depth.ts";

export const RPC_PARSE_ERROR = -32700;
export const RPC_INVALID_REQUEST = -32600;
export const RPC_METHOD_NOT_FOUND = -32601;
export const RPC_INVALID_PARAMS = -32602;
export const RPC_TOOL_ERROR = -32000;

export type RpcId = string | number | null;

export interface RpcRequest {
  id?: RpcId;
  method: string;
  params?: Record<string, unknown>;
}

export type RpcResponse =
  | { jsonrpc: "2.0"; id: RpcId; result: unknown }
  | { jsonrpc: "2.0"; id: RpcId; error: { code: number; message: string; data?: unknown } };

export function rpcResult(id: RpcId, result: unknown): RpcResponse {
  return { jsonrpc: "2.0", id, result };
}

export function rpcError(id: RpcId, code: number, message: string, data?: unknown): RpcResponse {
  return { jsonrpc: "2.0", id, error: data === undefined ? { code, message } : { code, message, data } };
}

/**
 * Whether a number parsed from JSON is one JSON-RPC can echo as it came: an integer outside
 * ±(2^53 - 1) came in rounded (123456789012345678901234567890 is 1.2345678901234568e+29 here), so
 * its answer would carry an id its client never sent and the client waits for ever; a fraction may
 * have been rounded too (0.12345678901234567890), and JSON-RPC says ids SHOULD NOT have one.
 */
function isExactId(id: number): boolean {
  return Number.isSafeInteger(id);
}

/** The id of a frame, when it has a usable one. */
function idOf(frame: Record<string, unknown>): RpcId | undefined {
  const id = frame.id;
  if (typeof id === "number") return isExactId(id) ? id : undefined;
  return typeof id === "string" || id === null ? id : undefined;
}

/**
 * The error for a frame nested deeper than MAX_JSON_DEPTH, before anything walks or serialises it
 * (an http_request `body` of 50,000 levels overflows JSON.stringify): -32602 when the depth is in
 * params (the arguments), else -32600. Undefined for a frame within the limit.
 */
export function refuseDeepFrame(frame: unknown): RpcResponse | undefined {
  const path = findTooDeep(frame);
  if (path === undefined) return undefined;
  const f =
    typeof frame === "object" && frame !== null && !Array.isArray(frame)
      ? (frame as Record<string, unknown>)
      : {};
  const isInParams = path === "params" || path.startsWith("params.");
  return rpcError(
    idOf(f) ?? null,
    isInParams ? RPC_INVALID_PARAMS : RPC_INVALID_REQUEST,
    describeTooDeep(path, "the frame"),
  );
}

/** Parses one frame. A batch or a non-object is an invalid request (MCP sends single objects). */
export function parseRpcRequest(
  frame: unknown,
): { ok: true; request: RpcRequest } | { ok: false; response: RpcResponse } {
  if (typeof frame !== "object" || frame === null || Array.isArray(frame)) {
    return {
      ok: false,
      response: rpcError(null, RPC_INVALID_REQUEST, "a JSON-RPC request must be one object"),
    };
  }
  const tooDeep = refuseDeepFrame(frame);
  if (tooDeep) return { ok: false, response: tooDeep };
  const f = frame as Record<string, unknown>;
  const id = idOf(f);
  // An id we cannot echo exactly is no id at all (JSON-RPC 2.0 section 5: id null when it cannot
  // be detected); the frame is refused, never run or taken for a notification.
  if (id === undefined && f.id !== undefined) {
    return {
      ok: false,
      response: rpcError(
        null,
        RPC_INVALID_REQUEST,
        "id must be a string, null, or a number sent exactly (an integer within ±9007199254740991)",
      ),
    };
  }
  if (f.jsonrpc !== "2.0" || typeof f.method !== "string") {
    return {
      ok: false,
      response: rpcError(id ?? null, RPC_INVALID_REQUEST, 'jsonrpc must be "2.0" and method a string'),
    };
  }
  if (
    f.params !== undefined &&
    (typeof f.params !== "object" || f.params === null || Array.isArray(f.params))
  ) {
    return { ok: false, response: rpcError(id ?? null, RPC_INVALID_PARAMS, "params must be an object") };
  }
  return {
    ok: true,
    request: {
      ...(id === undefined ? {} : { id }),
      method: f.method,
      params: f.params as Record<string, unknown> | undefined,
    },
  };
}
