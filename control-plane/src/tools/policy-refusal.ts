// An http_request an organisation policy refused (DECISIONS "Policies"): `policy_denied` (a deny
// rule: nothing sent, no approval spent) and `rate_limited` (a rule's rate limit is full): error
// results whose hint and next.for_model say why, in plain words, and what to do next.
import type { HttpRequestArgs } from "../calls/calls.schemas.ts";
import { HTTP_REQUEST_TOOL } from "../grants/grant-scope.ts";
import { ruleReference } from "../policies/policies.service.ts";
import type { PolicyDecision } from "../policies/policy-match.ts";
import type { ToolAnswer } from "./tool-answer.ts";
import type { OperatorSurface } from "./tool-context.ts";

/** The call as an answer names it: method, host, path without its query. */
function describeCall(args: Pick<HttpRequestArgs, "method">, host: string, path: string): string {
  return `${args.method} ${host}${path.split("?")[0]}`;
}

/** policy_denied: refused by a deny rule, whatever approval the agent holds. */
export function policyDeniedAnswer(
  decision: PolicyDecision,
  call: { args: HttpRequestArgs; itemName: string; host: string; path: string },
  surface: Pick<OperatorSurface, "changePolicyHint">,
): ToolAnswer {
  const { rule } = decision;
  const what = describeCall(call.args, call.host, call.path);
  const hint = `The organisation's policy rule "${rule.name}" refuses ${what} with ${call.itemName}, whatever approval you hold; nothing was sent. Do not retry it or respell it (another path, case or host for the same thing is refused too). If the task needs this call, tell the user that policy rule "${rule.name}" blocks it; ${surface.changePolicyHint}`;
  return {
    payload: {
      status: "policy_denied",
      error: { code: "policy_denied", message: `policy rule ${rule.id} refuses this call` },
      policy: { ...ruleReference(decision), effect: "deny" },
      item_name: call.itemName,
      host: call.host,
      method: call.args.method,
      hint,
      next: { for_model: hint },
    },
    isError: true,
  };
}

/** rate_limited: the rule that decided the call allows no more calls this minute or hour. */
export function rateLimitedAnswer(
  decision: PolicyDecision,
  retryAfter: number,
  call: { args: HttpRequestArgs; itemName: string; host: string },
): ToolAnswer {
  const { rule } = decision;
  const limit = rule.rate_limit;
  const allowance = limit
    ? `${limit.calls} call${limit.calls === 1 ? "" : "s"} per ${limit.per}`
    : "a rate limit";
  const hint = `The organisation's policy rule "${rule.name}" allows ${allowance} for calls like this one, and that many were made; this call was not sent and no approval was used. Wait ${retryAfter} second${retryAfter === 1 ? "" : "s"}, then retry with next.arguments. Batch or drop calls you do not need rather than retrying in a loop.`;
  const { dry_run: _dryRun, ...retry } = call.args;
  return {
    payload: {
      status: "rate_limited",
      error: { code: "rate_limited", message: `policy rule ${rule.id} allows ${allowance}` },
      policy: { ...ruleReference(decision), effect: rule.effect },
      item_name: call.itemName,
      host: call.host,
      retry_after: retryAfter,
      hint,
      next: { for_model: hint, tool: HTTP_REQUEST_TOOL, arguments: retry },
    },
    isError: true,
  };
}
