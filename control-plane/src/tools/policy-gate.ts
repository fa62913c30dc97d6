// The policy rows and the rate limit of a call a rule decided (DECISIONS "Policies"), for
// http-request.tool.ts: each row names its rule; a full rate limit is answered `rate_limited`.
import type { HttpRequestArgs } from "../calls/calls.schemas.ts";
import type { LocatedCredential } from "../calls/calls.service.ts";
import { ruleReference } from "../policies/policies.service.ts";
import type { PolicyDecision } from "../policies/policy-match.ts";
import { rateLimitedAnswer } from "./policy-refusal.ts";
import type { ToolAnswer } from "./tool-answer.ts";
import type { ToolDeps, ToolScope } from "./tool-context.ts";

/** Takes a place under the rule's rate limit, or answers `rate_limited` (audited) when it is full. */
export async function admitOrRefuse(
  deps: ToolDeps,
  scope: ToolScope,
  args: HttpRequestArgs,
  located: LocatedCredential,
  policy: PolicyDecision,
): Promise<ToolAnswer | undefined> {
  const full = await deps.policies.admitCall(scope.organisationId, policy);
  if (!full) return undefined;
  return refuseRateLimited(deps, scope, args, located, policy, full.retryAfter);
}

/** The call is over `policy`'s rate limit: its `rate_limited` row, and the answer that says so. */
export async function refuseRateLimited(
  deps: ToolDeps,
  scope: ToolScope,
  args: HttpRequestArgs,
  located: LocatedCredential,
  policy: PolicyDecision,
  retryAfter: number,
): Promise<ToolAnswer> {
  const { item, host, path } = located;
  await recordPolicyEvent(
    deps,
    scope,
    "rate_limited",
    policy,
    { itemName: item.name, host, args, path },
    {
      retry_after: retryAfter,
    },
  );
  return rateLimitedAnswer(policy, retryAfter, { args, itemName: item.name, host });
}

/** A policy row of the call (`policy_denied`, `policy_allowed`, `rate_limited`), naming its rule. */
export function recordPolicyEvent(
  deps: ToolDeps,
  scope: ToolScope,
  action: "policy_denied" | "policy_allowed" | "rate_limited",
  policy: PolicyDecision,
  call: { itemName: string; host: string; args: HttpRequestArgs; path: string },
  extra: Record<string, unknown> = {},
): Promise<void> {
  return deps.policies.recordPolicyEvent({
    organisationId: scope.organisationId,
    environment: scope.environment,
    actor: `agent:${scope.agentId}`,
    action,
    itemName: call.itemName,
    host: call.host,
    reason: action === "policy_allowed" ? undefined : action,
    detail: {
      ...ruleReference(policy),
      method: call.args.method,
      // As the call's own rows: the route without its query, which may carry personal data.
      path: call.path.split("?")[0],
      ...(call.args.client_id ? { client_id: call.args.client_id } : {}),
      ...extra,
    },
  });
}
