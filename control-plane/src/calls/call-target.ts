// The exact call an approval is asked for and checked against (DECISIONS "Approvals"): method,
// host, the validated path with its query, and the SHA-256 of the exact body bytes that are sent,
// with those bytes kept for the operator to read.
import { createHash } from "node:crypto";
import type { RequestedCall } from "../grants/grants.repo.ts";
import { keepBody } from "../grants/request-body.ts";
import { encodeRequestBody } from "./form-body.ts";

/**
 * The call `args` asks for. The digest is over the same bytes the proxy is handed (JSON or form
 * encoding of the agent's body), so a different body (one changed key, one changed byte) is a
 * different call that a prompt approval does not cover.
 * @example requestedCallOf("api.example.com", "/v1/me", { method: "GET" }).bodySha256 // null
 */
export function requestedCallOf(
  host: string,
  validatedPath: string,
  args: { method: string; body?: unknown; content_type?: string | undefined },
): RequestedCall {
  const call = { method: args.method, host, path: validatedPath };
  if (args.body === undefined) return { ...call, bodySha256: null, body: null };
  const bytes = encodeRequestBody(args.body, args.content_type);
  return {
    ...call,
    bodySha256: createHash("sha256").update(bytes).digest("hex"),
    // What the operator reads: the bytes themselves (the agent's own body; stored secrets are
    // injected by the proxy later, so none is ever in them).
    body: keepBody(bytes, args.content_type ?? "application/json"),
  };
}
