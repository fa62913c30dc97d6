// Whether a grant covers a call (spec 3.1, DECISIONS "Approvals"): inside the standing scope the
// operator gave, and inside the call it was approved for. Pure functions, tested by table.
import type { CallScope, GrantWithItem } from "./grants.repo.ts";

/**
 * The policies that stand until revoked. Spec 3.1: only these make a request active at once (a
 * one-call or 8-hour session approval covers the calls it was given for, never a new request).
 */
export function isStandingPolicy(policy: string | null | undefined): boolean {
  return policy === "item_standing" || policy === "folder_standing";
}

/** A call as coverage judges it: its path with the query; the body digest where the call has one. */
export type CallTarget = CallScope & { bodySha256?: string | null | undefined };

type CoverageRow = {
  scope_host: string | null;
  scope_method: string | null;
  scope_path: string | null;
} & Partial<Pick<GrantWithItem, "policy" | "call_method" | "call_host" | "call_path" | "call_body_sha256">>;

/**
 * Whether a grant covers a call: inside its standing scope, and inside the call it was approved
 * for (a prompt approval: exactly that call; a session approval: that host and method under the
 * path's prefix up to its last `/`). Standing policies keep only the scope the operator gave.
 */
export function isCovering(row: CoverageRow, call: CallTarget | undefined): boolean {
  // A one-call or 8-hour approval of a named call covers what its approved call says (the inbox
  // words it so); the scope its request carried (the exact path, asked outside a standing scope)
  // would narrow an 8-hour approval to that one path.
  const isCallBound = (row.policy === "prompt" || row.policy === "session") && Boolean(row.call_method);
  return (isCallBound || isInsideScope(row, call)) && isInsideApprovedCall(row, call);
}

function withoutQuery(path: string): string {
  const at = path.indexOf("?");
  return at === -1 ? path : path.slice(0, at);
}

/**
 * DECISIONS "Approvals": what the operator saw is what is covered. The path with its query is
 * compared byte for byte (the path was validated once, spec 4.2 rule 1) and so is the body digest:
 * a GET approval does not send a DELETE, and an approved body cannot be swapped for another.
 */
function isInsideApprovedCall(row: CoverageRow, call: CallTarget | undefined): boolean {
  if (!row.call_method || !row.call_host || row.call_path == null) return true;
  if (row.policy === "item_standing" || row.policy === "folder_standing") return true;
  if (!call) return false;
  if (call.host !== row.call_host || call.method !== row.call_method) return false;
  if (row.policy === "session") {
    const approved = withoutQuery(row.call_path);
    const prefix = approved.slice(0, approved.lastIndexOf("/") + 1);
    return withoutQuery(call.path ?? "").startsWith(prefix);
  }
  return call.path === row.call_path && (call.bodySha256 ?? null) === (row.call_body_sha256 ?? null);
}

/**
 * Spec 3.1: a standing grant covers a call by host, method and path. A scope part left unset covers
 * everything; a path scope covers itself and everything below it (segment by segment, so /v1/rep
 * does not cover /v1/repos).
 */
function isInsideScope(row: CoverageRow, call: CallTarget | undefined): boolean {
  if (!row.scope_host && !row.scope_method && !row.scope_path) return true;
  if (!call) return false;
  if (row.scope_host && row.scope_host !== call.host) return false;
  if (row.scope_method && row.scope_method !== call.method) return false;
  if (row.scope_path) {
    const path = (call.path ?? "").split("?")[0]!;
    const prefix = row.scope_path.endsWith("/") ? row.scope_path : `${row.scope_path}/`;
    if (path !== row.scope_path && !path.startsWith(prefix)) return false;
  }
  return true;
}
