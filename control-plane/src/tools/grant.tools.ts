// request_grant and list_grants (spec 4.2): an agent asks ahead of a call, and sees its own approvals.

import { isStandingPolicy } from "../grants/grant-coverage.ts";
import { HTTP_REQUEST_TOOL, httpRequestGrantScope } from "../grants/grant-scope.ts";
import { needItemAnswer } from "./http-request.tool.ts";
import { pendingHint } from "./pending-hint.ts";
import type { ToolAnswer } from "./tool-answer.ts";
import type { ToolDeps, ToolScope } from "./tool-context.ts";
import type { ToolArgs } from "./tool-schemas.ts";

export async function runRequestGrant(
  deps: ToolDeps,
  scope: ToolScope,
  args: ToolArgs<"request_grant">,
): Promise<ToolAnswer> {
  const item = await deps.items.findCallableByName(scope.organisationId, scope.environment, args.item_name);
  if (!item) return needItemAnswer(deps, scope, args.item_name, undefined, args.task_description);
  const grantScope = httpRequestGrantScope(scope, item);
  // Spec 3.1: a standing approval that covers the agent is returned at once as the covering grant;
  // a session approval is not one (it covers the calls it was given for, not a new request).
  const covering = await deps.grants.findUsableGrant(grantScope);
  if (covering && isStandingPolicy(covering.policy)) {
    await deps.grants.recordAutoApproved({
      organisationId: scope.organisationId,
      environment: scope.environment,
      actor: `agent:${scope.agentId}`,
      agentId: scope.agentId,
      itemName: item.name,
      host: item.allowedHosts.length === 1 ? item.allowedHosts[0] : undefined,
      grant: covering,
    });
    return { payload: { ...covering } };
  }
  const { grant, approvalCode, notifyFailed, deniedAt } = await deps.grants.requestGrant({
    ...grantScope,
    environment: scope.environment,
    actor: `agent:${scope.agentId}`,
    taskDescription: args.task_description,
  });
  return {
    payload: {
      ...grant,
      ...(approvalCode ? { approval_code: approvalCode } : {}),
      ...(deps.surface.isNotifying ? { notify_failed: notifyFailed ?? false } : {}),
      // DECISIONS "Approvals": a request without a call asks for the whole item, and says so.
      message: `This asks the operator for ${item.name} as a whole: no request is named, so the approval covers any call with it. To ask for one exact request, call http_request instead (it asks for that call only).`,
      // The call to make once approved: http_request with this item; the agent adds method and path.
      next: {
        for_model: pendingHint(
          deps.surface,
          grant.grant_id,
          `then call http_request with next.arguments (item_name ${item.name}) plus the method and path you need.`,
          deniedAt,
        ),
        tool: HTTP_REQUEST_TOOL,
        arguments: { item_name: item.name },
      },
    },
  };
}

export async function runListGrants(deps: ToolDeps, scope: ToolScope): Promise<ToolAnswer> {
  const grants = await deps.grants.listGrants(scope.organisationId, { agentId: scope.agentId });
  return { payload: { grants } };
}
