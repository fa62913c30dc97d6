// The six tools as the MCP method table calls them, bound to one organisation and environment.

import { runListGrants, runRequestGrant } from "./grant.tools.ts";
import { runHttpRequest } from "./http-request.tool.ts";
import { runFindItems, runListItems, runSetup } from "./lookup.tools.ts";
import type { ToolHandlers } from "./tool-answer.ts";
import type { ToolDeps } from "./tool-context.ts";

export function createToolHandlers(
  deps: ToolDeps,
  binding: { organisationId: string; environment: string; clientName?: string },
): ToolHandlers {
  const scopeOf = (agentId: string) => ({ ...binding, agentId });
  return {
    http_request: (args, caller) => runHttpRequest(deps, scopeOf(caller.agentId), args),
    find_items: (args, caller) => runFindItems(deps, scopeOf(caller.agentId), args),
    setup: (args, caller) => runSetup(deps, scopeOf(caller.agentId), args),
    list_items: (_args, caller) => runListItems(deps, scopeOf(caller.agentId)),
    request_grant: (args, caller) => runRequestGrant(deps, scopeOf(caller.agentId), args),
    list_grants: (_args, caller) => runListGrants(deps, scopeOf(caller.agentId)),
  };
}
