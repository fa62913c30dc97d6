// The shapes of the approvals API at the edge (spec 4.3 "Clients, grants, inbox, audit"): what a
// model client or an operator sends, and the grant (spec 2.4) and audit event every answer carries.
// Checks a call would make (a host's form, a path's, a policy's reach) stay with the route and
// the grants service, which answer invalid_host, invalid_path, not_owner, confirm_name_mismatch.
import { freeText, safeString } from "@latch/shared/text/safe-string";
import { z } from "zod";
import type { AuditFilter } from "../audit/audit.repo.ts";
import { stringJudgedByService } from "../http/route-schemas.ts";

export const GRANT_POLICIES = ["prompt", "session", "item_standing", "folder_standing"] as const;

/**
 * POST /api/grants/request. A model client is its own agent in its own environment, so it sends
 * neither agent_id nor environment; an operator may. host and path are strings, but any value is
 * let through to checkCallScope, which judges them as a call's are: a host that is not one
 * (`42`, `127.0.0.1`, a line break) is invalid_host or ip_literal, a bad path invalid_path.
 */
export const grantRequestInput = z.object({
  item_name: safeString(),
  agent_id: safeString().optional(),
  environment: safeString().optional(),
  host: stringJudgedByService("the host the call goes to"),
  method: safeString().optional(),
  path: stringJudgedByService("the path of the call, from /"),
  task_description: freeText().optional(),
});

/**
 * What a standing approval covers when the operator chooses (DECISIONS "The approval, readable
 * and reversible"): the request's method and host under its path's prefix, or the whole credential.
 * Left out, the grant keeps the scope it was asked with (none: the whole item).
 */
const standingScope = z
  .enum(["path_prefix", "credential"])
  .optional()
  .describe("item_standing and folder_standing only: path_prefix or credential");

/** POST /api/grants/:id/approve. folder_standing needs the folder's name typed back. */
export const grantApproval = z.object({
  policy: z.enum(GRANT_POLICIES).optional(),
  confirm_name: safeString().optional(),
  scope: standingScope,
});

/**
 * POST /api/grants/approve-by-code. A missing or malformed code is the service's to count as a
 * wrong one (spec 4.3: five per approval, twenty per organisation).
 */
export const codeApproval = z.object({
  code: stringJudgedByService("the approval's 8-digit code", { isSafeText: true }),
  grant_id: safeString().optional(),
  policy: z.enum(["prompt", "session", "item_standing"]).optional(),
  scope: standingScope,
});

/**
 * POST /api/grants/find-by-code: the code only, in the body (never in a URL or a log line). A
 * missing or malformed code counts as a wrong one, as on approve-by-code.
 */
export const codeLookup = z.object({
  code: stringJudgedByService("the approval's 8-digit code", { isSafeText: true }),
});

/** GET|POST /approve?token=: the token's form is judged after the caller (approve-link.routes.ts). */
export const approveLinkQuery = z.object({ token: z.string().optional() });

/** Spec 4.3's filters (client_id, item_name) and the console's: action, environment, dates, pages. */
export const auditQuery = z.object({
  client_id: z.string().optional(),
  item_name: z.string().optional(),
  action: safeString().max(64).optional(),
  environment: safeString().max(64).optional(),
  since: z.iso.datetime({ offset: true }).optional().describe("events at or after this instant"),
  until: z.iso.datetime({ offset: true }).optional().describe("events before this instant"),
  before: z
    .string()
    .regex(/^[1-9][0-9]{0,17}$/, "an event id")
    .optional()
    .describe("events older than this one: next_before of the previous page"),
});

/** The audit filter a console query asks for: an agent's events are its own and its trusted twin's. */
export function auditFilterOf(query: Omit<z.infer<typeof auditQuery>, "before">): AuditFilter {
  return {
    itemName: query.item_name,
    actors: query.client_id ? [`agent:${query.client_id}`, `trusted:${query.client_id}`] : undefined,
    actions: query.action ? [query.action] : undefined,
    environment: query.environment,
    since: query.since ? new Date(query.since) : undefined,
    until: query.until ? new Date(query.until) : undefined,
  };
}

/** Spec 2.4's public fields, plus the names a listing needs. Never a value. */
export const publicGrant = z.object({
  grant_id: z.string(),
  policy: z.string(),
  status: z.string(),
  environment_id: z.string(),
  item_name: z.string(),
  agent_id: z.string(),
  agent_name: z.string(),
  tool_id: z.string(),
  expires_at: z.string().nullable(),
  created_at: z.string(),
  approved_at: z.string().nullable(),
  consumed_at: z.string().nullable(),
  task_id: z.string().nullable(),
  task_description: z.string().nullable(),
  scope: z
    .object({ host: z.string().nullable(), method: z.string().nullable(), path: z.string().nullable() })
    .nullable(),
  call: z
    .object({ method: z.string(), host: z.string(), path: z.string(), body_sha256: z.string().nullable() })
    .nullable(),
  approvals: z
    .string()
    .nullable()
    .describe(
      'the two-person rule: "1 of 2" while a standing approval waits for a second member, "2 of 2" once confirmed',
    ),
});

/** A body as an operator reads it (grants/request-body.ts BodyView). */
export const bodyView = z.object({
  content_type: z.string(),
  size: z.number().int(),
  is_cut: z.boolean(),
  format: z.enum(["json", "form", "text"]),
  text: z.string(),
  // Each field a [name, value] pair. Written as a two-string array rather than z.tuple: the
  // tuple's JSON Schema (prefixItems with items: false) is read as an invalid schema by
  // schemathesis, which CI runs against /openapi.json.
  fields: z.array(z.array(z.string()).length(2)).nullable(),
  has_hidden_characters: z.boolean(),
  sha256: z.string(),
});

/** A request waiting in the inbox: the grant, the body it would send, the item's hosts, a Deny it repeats. */
export const pendingApproval = publicGrant.extend({
  body: bodyView.nullable(),
  allowed_hosts: z.array(z.string()),
  after_deny_at: z.string().nullable(),
  first_approval: z
    .object({
      operator_id: z.string(),
      email: z.string().nullable(),
      policy: z.string(),
      scope: z.string().nullable(),
      at: z.string().nullable(),
    })
    .nullable(),
});

/** POST /api/grants/find-by-code: the pending request the code belongs to, as the Inbox shows it. */
export const codeLookupAnswer = z.object({ approval: pendingApproval });

/** An approval as the Approvals section and the access snapshot list it. */
export const approvalView = publicGrant.extend({
  item_id: z.string(),
  allowed_hosts: z.array(z.string()),
  approved_by: z.object({ operator_id: z.string(), email: z.string().nullable() }).nullable(),
  first_approved_by: z.object({ operator_id: z.string(), email: z.string().nullable() }).nullable(),
  revoked_by: z.string().nullable(),
  revoked_at: z.string().nullable(),
  last_used_at: z.string().nullable(),
});

/** GET /api/approvals: the console's filters. */
export const approvalsQuery = z.object({
  environment: safeString().max(64).optional(),
  agent_id: safeString().max(64).optional(),
  item_name: safeString().max(128).optional(),
  policy: z.enum(GRANT_POLICIES).optional(),
});
export const approvalList = z.object({ approvals: z.array(approvalView) });

export const grantAnswer = z.object({ grant: publicGrant });
/** A new pending grant: its 8-digit code when approval codes are on, and whether mailing failed. */
export const requestedGrant = z.object({
  grant: publicGrant,
  approval_code: z.string().optional(),
  notify_failed: z.boolean(),
});
export const grantList = z.object({ grants: z.array(publicGrant) });

export const auditEvent = z.object({
  id: z.string(),
  at: z.string(),
  environment: z.string().nullable(),
  actor: z.string(),
  actor_name: z.string().nullable(),
  action: z.string(),
  item_name: z.string().nullable(),
  host: z.string().nullable(),
  reason: z.string().nullable(),
  detail: z.record(z.string(), z.unknown()),
});
export const auditList = z.object({
  events: z.array(auditEvent),
  /** Pass as `before` for the next, older page; null on the last page. */
  next_before: z.string().nullable(),
});
