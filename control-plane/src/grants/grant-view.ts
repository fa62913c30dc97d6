// A grant as callers see it (spec 2.4's public fields plus the call it covers), and the columns a
// requested call is stored in on a grant or a need request.
import type { GrantWithItem, RequestedCall } from "./grants.repo.ts";

/** Spec 2.4's public fields, plus the names a listing needs. Never a value. */
export interface PublicGrant {
  grant_id: string;
  policy: string;
  status: string;
  environment_id: string;
  item_name: string;
  agent_id: string;
  /** Who asked, by the name its client was issued or registered with (locally: the MCP client's name). */
  agent_name: string;
  tool_id: string;
  expires_at: string | null;
  created_at: string;
  approved_at: string | null;
  consumed_at: string | null;
  task_id: string | null;
  task_description: string | null;
  /** What a standing grant covers; null covers every call with the credential. */
  scope: { host: string | null; method: string | null; path: string | null } | null;
  /**
   * The exact call the grant was asked for, as the operator approves it (DECISIONS "Approvals");
   * null: asked for the whole item (request_grant), any call.
   */
  call: { method: string; host: string; path: string; body_sha256: string | null } | null;
}

function iso(date: Date | null): string | null {
  return date ? date.toISOString() : null;
}

export function toPublicGrant(row: GrantWithItem, now: Date): PublicGrant {
  const isExpired = row.status === "active" && row.expires_at !== null && row.expires_at <= now;
  return {
    grant_id: row.id,
    policy: row.policy,
    status: isExpired ? "expired" : row.status,
    environment_id: row.environment,
    item_name: row.item_name,
    agent_id: row.agent_id,
    agent_name: row.agent_name ?? row.agent_id,
    tool_id: row.tool_id,
    expires_at: iso(row.expires_at),
    created_at: row.created_at.toISOString(),
    approved_at: iso(row.approved_at),
    consumed_at: iso(row.consumed_at),
    task_id: row.task_id,
    task_description: row.task_description,
    scope:
      row.scope_host || row.scope_method || row.scope_path
        ? { host: row.scope_host, method: row.scope_method, path: row.scope_path }
        : null,
    call: toPublicCall(row),
  };
}

/** The columns a requested call is stored in, on a grant or a need request. */
export interface RequestedCallColumns {
  call_method: string | null;
  call_host: string | null;
  call_path: string | null;
  call_body_sha256: string | null;
}

/** The requested call of a row as callers see it (PublicGrant.call); null: the whole item. */
export function toPublicCall(row: RequestedCallColumns): PublicGrant["call"] {
  return row.call_method && row.call_host && row.call_path != null
    ? { method: row.call_method, host: row.call_host, path: row.call_path, body_sha256: row.call_body_sha256 }
    : null;
}

/** The requested call a row records, back in the shape grants are asked with. */
export function requestedCallOfRow(row: RequestedCallColumns): RequestedCall | undefined {
  return row.call_method && row.call_host && row.call_path != null
    ? { method: row.call_method, host: row.call_host, path: row.call_path, bodySha256: row.call_body_sha256 }
    : undefined;
}

/** The row columns for a requested call (none: the whole item). */
export function requestedCallColumns(call: RequestedCall | undefined): RequestedCallColumns {
  return {
    call_method: call?.method ?? null,
    call_host: call?.host ?? null,
    call_path: call?.path ?? null,
    call_body_sha256: call?.bodySha256 ?? null,
  };
}
