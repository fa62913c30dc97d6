// The six MCP tools (spec 4.2): argument schemas (zod, strict: an undefined argument is -32602)
// and the descriptions and JSON schemas tools/list shows.
import { freeText, safeString } from "@latch/shared/text/safe-string";
import { z } from "zod";
import { httpRequestArgs } from "../calls/calls.schemas.ts";
import { PROVIDER_IDS } from "../providers/providers.ts";

const taskDescription = freeText()
  .max(10_000)
  .optional()
  .describe("What the call is for; shown to the operator (500 characters)");

export const findItemsArgs = z
  .object({
    item_name: safeString().min(1).max(128).optional().describe("Exact stored credential name"),
    host: safeString().min(1).max(253).optional().describe("Exact API hostname"),
    task_description: taskDescription,
  })
  .strict();

export const setupArgs = z
  .object({
    provider: z.enum(PROVIDER_IDS).optional().describe("A provider with built-in connect"),
    host: safeString().min(1).max(253).optional().describe("The API hostname to set up"),
    task_description: taskDescription,
    dry_run: z
      .boolean()
      .optional()
      .describe("true: report what setup would do, without storing or asking anything"),
  })
  .strict();

export const listItemsArgs = z.object({}).strict();

export const requestGrantArgs = z
  .object({
    item_name: safeString().min(1).max(128).describe("Exact stored credential name"),
    task_description: taskDescription,
  })
  .strict();

export const listGrantsArgs = z.object({}).strict();

export const TOOL_ARGS = {
  http_request: httpRequestArgs,
  find_items: findItemsArgs,
  setup: setupArgs,
  list_items: listItemsArgs,
  request_grant: requestGrantArgs,
  list_grants: listGrantsArgs,
} as const;

export type ToolName = keyof typeof TOOL_ARGS;
export type ToolArgs<N extends ToolName> = z.infer<(typeof TOOL_ARGS)[N]>;

/** Old names accepted for one release (spec 4.2, 9): hosted only http.request. */
export const HOSTED_TOOL_ALIASES: Readonly<Record<string, ToolName>> = {
  "http.request": "http_request",
};

/** Locally list_secrets is accepted too (spec 4.2, 9). */
export const LOCAL_TOOL_ALIASES: Readonly<Record<string, ToolName>> = {
  ...HOSTED_TOOL_ALIASES,
  list_secrets: "list_items",
};

const DESCRIPTIONS: Record<ToolName, string> = {
  http_request:
    "Call a third-party HTTPS API with a stored credential that you never see. Name the API with host, item_name, or a full https:// URL in path. Answers with origin_status, a redacted body and origin_headers; or status pending (ask the operator to approve, then retry with next.arguments), need_item (give the user the link or command to store the credential), or host_mismatch. Never put a secret in any argument.",
  find_items:
    "Look up a stored credential by exact item_name and/or host. Returns found (name, kind, last4, hosts, inject mode; never the value), ambiguous, need_item or host_mismatch.",
  setup:
    "Prepare a credential for one API without calling it: give exactly one of provider or host. Answers need_item (the operator stores the value), ready (call http_request), ready_prompt or ambiguous. No secret argument exists.",
  list_items:
    "List the credentials stored in your environment: names, kind, last4, username, inject mode. Never values.",
  request_grant:
    "Ask the operator for approval to use a stored credential before calling it. Returns the grant (pending until approved) with an approval code.",
  list_grants: "List your own approvals: grant_id, policy, status, expiry. Never values.",
};

export interface ToolDefinition {
  name: ToolName;
  description: string;
  inputSchema: Record<string, unknown>;
}

/** tools/list: the JSON schema of each tool, derived from the same zod schema that validates it. */
export function listToolDefinitions(): ToolDefinition[] {
  return (Object.keys(TOOL_ARGS) as ToolName[]).map((name) => {
    const { $schema: _ignored, ...schema } = z.toJSONSchema(TOOL_ARGS[name], { io: "input" }) as Record<
      string,
      unknown
    >;
    return { name, description: DESCRIPTIONS[name], inputSchema: schema };
  });
}
