// The six tools as the MCP method table calls them, bound to one organisation and environment.

import { AppError } from "@latch/shared/errors";
import { telemetry } from "../telemetry.ts";
import { runListGrants, runRequestGrant } from "./grant.tools.ts";
import { runHttpRequest } from "./http-request.tool.ts";
import { runFindItems, runListItems, runSetup } from "./lookup.tools.ts";
import type { ToolAnswer, ToolHandlers } from "./tool-answer.ts";
import type { ToolDeps } from "./tool-context.ts";

export function createToolHandlers(
  deps: ToolDeps,
  binding: { organisationId: string; environment: string; clientName?: string; bearerToConfirm?: string },
): ToolHandlers {
  const scopeOf = (agentId: string) => ({ ...binding, agentId });
  const handlers: ToolHandlers = {
    http_request: (args, caller) => runHttpRequest(deps, scopeOf(caller.agentId), args),
    find_items: (args, caller) => runFindItems(deps, scopeOf(caller.agentId), args),
    setup: (args, caller) => runSetup(deps, scopeOf(caller.agentId), args),
    list_items: (_args, caller) => runListItems(deps, scopeOf(caller.agentId)),
    request_grant: (args, caller) => runRequestGrant(deps, scopeOf(caller.agentId), args),
    list_grants: (_args, caller) => runListGrants(deps, scopeOf(caller.agentId)),
  };
  const observe = deps.onToolAnswer;
  if (!observe && !telemetry().enabled) return handlers;
  const observed = {} as Record<string, unknown>;
  for (const [name, run] of Object.entries(handlers) as [
    string,
    (...a: unknown[]) => Promise<ToolAnswer>,
  ][]) {
    const answered = async (...args: unknown[]) => {
      let answer: ToolAnswer;
      try {
        answer = await run(...args);
      } catch (error) {
        // A call that throws is counted too, by its code: an outage made of thrown
        // egress_unavailable answers must show on the dashboard (mcp-server.ts shapes the answer).
        const code = error instanceof AppError ? error.code : "internal";
        observe?.(name, { error: { code } }, true);
        throw error;
      }
      observe?.(name, answer.payload, answer.isError);
      return answer;
    };
    // One agent call is one trace: this span, the approval decision in it, the Execute call to
    // the proxy and its steps beneath, the audit rows as log records in it.
    observed[name] = (...args: unknown[]) =>
      telemetry().inSpan(
        `tools/call ${name}`,
        {
          "mcp.tool.name": name,
          "latch.organisation_id": binding.organisationId,
          "latch.environment": binding.environment,
        },
        async () => {
          const answer = await answered(...args);
          const status = (answer.payload as { status?: unknown }).status;
          telemetry().annotate({
            "latch.tool.is_error": Boolean(answer.isError),
            ...(typeof status === "string" ? { "latch.tool.status": status.slice(0, 64) } : {}),
          });
          return answer;
        },
      );
  }
  return observed as ToolHandlers;
}
