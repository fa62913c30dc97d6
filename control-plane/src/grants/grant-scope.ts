// Which approvals an http_request looks for: the tool every grant is for, and the scope built from
// the calling agent and the credential (its own grants, or its folder's).
import type { GrantScope } from "./grants.repo.ts";

export const HTTP_REQUEST_TOOL = "http_request";

/** The approvals an agent's http_request with this credential looks for: its own, or its folder's. */
export function httpRequestGrantScope(
  scope: { organisationId: string; agentId: string },
  item: { id: string; folderId?: string | null | undefined },
): GrantScope {
  return {
    organisationId: scope.organisationId,
    itemId: item.id,
    folderId: item.folderId,
    agentId: scope.agentId,
    toolId: HTTP_REQUEST_TOOL,
  };
}
