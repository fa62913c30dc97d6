// JSON-RPC 2.0 framing for MCP: request parsing and the error codes spec 4.1 and 7 name.
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
  const f = frame as Record<string, unknown>;
  const id =
    typeof f.id === "string" || typeof f.id === "number" || f.id === null ? (f.id as RpcId) : undefined;
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
