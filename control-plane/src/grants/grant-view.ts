// A grant as callers see it (spec 2.4's public fields plus the call it covers), and the columns a
// requested call is stored in on a grant or a need request.
import type { ApprovalRow, GrantWithItem, RequestedCall } from "./grants.repo.ts";
import { type BodyView, showHidden, viewBody } from "./request-body.ts";

/** Spec 2.4's public fields, plus the names a listing needs. Never a value. */
export type PublicGrant = {
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
  /**
   * The two-person rule (DECISIONS "Teams"): "1 of 2" while a standing approval waits for a
   * second member, "2 of 2" once one confirmed it; null when one approval is all it took.
   */
  approvals: string | null;
};

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
    approvals: row.first_approved_by
      ? row.status === "pending"
        ? "1 of 2"
        : row.approved_by
          ? "2 of 2"
          : null
      : null,
  };
}

/**
 * The agent's own words (its task, its client's name) as an operator reads them wherever an
 * approval is shown: invisible characters (direction overrides, zero-width, controls) as U+FFFD,
 * as in the body, so "Read\u202Eetirw" cannot read as something else than what the agent wrote.
 */
export function shownToOperator(grant: PublicGrant): PublicGrant {
  return {
    ...grant,
    agent_name: showHidden(grant.agent_name).text,
    task_description: grant.task_description === null ? null : showHidden(grant.task_description).text,
  };
}

/** The columns a requested call is stored in, on a grant or a need request. */
export interface RequestedCallColumns {
  call_method: string | null;
  call_host: string | null;
  call_path: string | null;
  call_body_sha256: string | null;
  call_body: string | null;
  call_body_bytes: number | null;
  call_content_type: string | null;
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
    ? {
        method: row.call_method,
        host: row.call_host,
        path: row.call_path,
        bodySha256: row.call_body_sha256,
        body: keptBodyOfRow(row),
      }
    : undefined;
}

function keptBodyOfRow(row: RequestedCallColumns) {
  return row.call_body !== null && row.call_body_bytes !== null
    ? { text: row.call_body, bytes: row.call_body_bytes, contentType: row.call_content_type ?? "" }
    : null;
}

/** The body a row keeps, as an operator reads it; null for a call without one (or none kept). */
export function bodyViewOfRow(row: RequestedCallColumns): BodyView | null {
  const kept = keptBodyOfRow(row);
  return kept && row.call_body_sha256 ? viewBody(kept, row.call_body_sha256) : null;
}

/** The row columns for a requested call (none: the whole item). */
export function requestedCallColumns(call: RequestedCall | undefined): RequestedCallColumns {
  return {
    call_method: call?.method ?? null,
    call_host: call?.host ?? null,
    call_path: call?.path ?? null,
    call_body_sha256: call?.bodySha256 ?? null,
    call_body: call?.body?.text ?? null,
    call_body_bytes: call?.body?.bytes ?? null,
    call_content_type: call?.body?.contentType ?? null,
  };
}

/** A request waiting in the inbox: its grant, the body it would send, and whether it follows a Deny. */
export type PendingApproval = PublicGrant & {
  body: BodyView | null;
  /** The item's hosts: what approving the whole credential reaches. */
  allowed_hosts: string[];
  /** When the operator denied this same call from this agent, if within the last 10 minutes. */
  after_deny_at: string | null;
  /**
   * The first of two approvals (the two-person rule): who gave it, what it approves (policy and
   * scope choice) and when; null while none was given.
   */
  first_approval: {
    operator_id: string;
    email: string | null;
    policy: string;
    scope: string | null;
    at: string | null;
  } | null;
};

export function toPendingApproval(
  row: GrantWithItem & { allowed_hosts?: string[]; first_approved_by_email?: string | null },
  now: Date,
): PendingApproval {
  return {
    ...shownToOperator(toPublicGrant(row, now)),
    body: bodyViewOfRow(row),
    allowed_hosts: row.allowed_hosts ?? [],
    after_deny_at: iso(row.after_deny_at),
    first_approval:
      row.first_approved_by && row.first_policy
        ? {
            operator_id: row.first_approved_by,
            email: row.first_approved_by_email ?? null,
            policy: row.first_policy,
            scope: row.first_scope,
            at: iso(row.first_approved_at),
          }
        : null,
  };
}

/**
 * An approval as the Approvals section and the access snapshot list it: the grant, its item, who
 * approved it (operator id and email; revoked_by for one withdrawn) and when it was last used.
 */
export type ApprovalView = PublicGrant & {
  item_id: string;
  /** The item's hosts: what "the whole credential" reaches. */
  allowed_hosts: string[];
  approved_by: { operator_id: string; email: string | null } | null;
  /** Under the two-person rule, the member who approved first; the second is approved_by. */
  first_approved_by: { operator_id: string; email: string | null } | null;
  revoked_by: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
};

export function toApprovalView(row: ApprovalRow, now: Date): ApprovalView {
  return {
    ...shownToOperator(toPublicGrant(row, now)),
    item_id: row.item_id,
    allowed_hosts: row.allowed_hosts,
    approved_by: row.approved_by ? { operator_id: row.approved_by, email: row.approved_by_email } : null,
    first_approved_by: row.first_approved_by
      ? { operator_id: row.first_approved_by, email: row.first_approved_by_email }
      : null,
    revoked_by: row.revoked_by,
    revoked_at: iso(row.revoked_at),
    last_used_at: iso(row.last_used_at),
  };
}
