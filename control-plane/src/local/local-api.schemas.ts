// The shapes of the local operator API (spec 4.4) at the edge: credentials, grants and audit for
// the console and the CLI. Items take the hosted item's shape (items.schemas.ts).
import { freeText, safeString } from "@latch/shared/text/safe-string";
import { z } from "zod";
import { HTTP_REQUEST_TOOL } from "../grants/grant-scope.ts";
import { approvalView, auditEvent, pendingApproval, publicGrant } from "../grants/grants.schemas.ts";
import { itemView } from "../items/items.schemas.ts";

export const grantRequestBody = z.strictObject({
  item_name: safeString().min(1).max(128),
  agent_id: safeString().min(1).max(64),
  tool_id: z.literal(HTTP_REQUEST_TOOL).default(HTTP_REQUEST_TOOL),
  task_description: freeText().max(10_000).optional(),
});

// Spec 4.4: POST /api/grants approves a pending grant by grant_id, or makes an active one for
// item_name and agent_id; either way "tool_id http_request for agent calls" may ride along. Every
// grant an agent can ask for is an http_request grant, so another tool_id is a 400 naming the field.
const approveById = z.strictObject({
  grant_id: safeString().min(1).max(64),
  scope: z.enum(["once", "session"]).default("once"),
  tool_id: z.literal(HTTP_REQUEST_TOOL).optional(),
});
const approveByName = z.strictObject({
  item_name: safeString().min(1).max(128),
  agent_id: safeString().min(1).max(64),
  scope: z.enum(["once", "session"]).default("once"),
  tool_id: z.literal(HTTP_REQUEST_TOOL).default(HTTP_REQUEST_TOOL),
});
/** Either form; a refusal names the field of the form the body came closest to (route-schemas.ts). */
export const grantApproval = z.union([approveById, approveByName]);

export const auditQuery = z.object({
  item_name: safeString().max(128).optional(),
  limit: z.coerce.number().int().min(1).max(200).optional(),
});

export const secretAnswer = z.object({ secret: itemView });
export const secretList = z.object({ secrets: z.array(itemView) });
export const localGrantAnswer = z.object({ grant: publicGrant });
export const localGrantList = z.object({ grants: z.array(approvalView.extend(pendingApproval.shape)) });
export const localAuditList = z.object({ events: z.array(auditEvent) });
