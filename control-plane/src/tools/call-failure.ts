// An http_request that failed before or at the network, or whose answer could not be given back
// (spec 4.1: follow next.for_model; on 5xx retry once, except body_too_large, which is narrowed
// first): an error result with a `hint` and `next.for_model` that say, in plain words, what to do.
import { AppError } from "@latch/shared/errors";
import type { HttpRequestArgs, HttpRequestResult } from "../calls/calls.schemas.ts";
import type { ApprovalAfterFault, RequestAfterFault } from "../calls/calls.service.ts";
import { baseNameOf } from "../calls/token-plan.ts";
import { HTTP_REQUEST_TOOL } from "../grants/grant-scope.ts";
import type { ToolAnswer } from "./tool-answer.ts";
import type { OperatorSurface } from "./tool-context.ts";

/** The longest origin deadline an agent may ask for (spec 4.2 timeout_ms). */
const MAX_TIMEOUT_MS = 30_000;
const DEFAULT_TIMEOUT_MS = 10_000;

const DESTINATION_REFUSED =
  "This host's name points to a private or reserved address, which Latch never calls. Do not retry; check the host with the user.";

/** What the agent should do, per failure code of the egress proxy (shared/src/errors.ts). */
const ADVICE: Readonly<Record<string, string>> = {
  dns_failure:
    "The API's host name could not be looked up. Check the spelling of host (or of the URL in path); if it is right, retry once in a minute.",
  dns_no_address:
    "The API's host name has no address. Check the spelling of host (or of the URL in path); the API probably lives under another name.",
  connect_failed:
    "The API's server did not accept a connection. Retry once in a minute; if it fails again, tell the user the API looks down.",
  tls_failure:
    "A secure connection to the API could not be made (its certificate was not accepted). Do not retry; tell the user.",
  timeout:
    "The API did not answer in time. Retry once with next.arguments (a longer timeout_ms), or ask for less (a smaller page).",
  body_too_large:
    "The response was over 1 MiB. Do not retry unchanged: narrow the call first (pagination, a smaller page size, a fields filter).",
  bad_origin_response:
    "The API's answer was cut off or corrupt. Retry once; if it happens again, tell the user.",
  private_range: DESTINATION_REFUSED,
  loopback: DESTINATION_REFUSED,
  link_local: DESTINATION_REFUSED,
  multicast: DESTINATION_REFUSED,
  reserved_range: DESTINATION_REFUSED,
  ipv6_embedding: DESTINATION_REFUSED,
  not_global_unicast: DESTINATION_REFUSED,
};

/**
 * The answer for a result that carries an error the agent can act on, or undefined when the call
 * reached the API (whatever its status: a 4xx or 5xx from the API is the API's answer, not ours).
 */
export function callFailureAnswer(
  result: HttpRequestResult & Record<string, unknown>,
  args: HttpRequestArgs,
  itemName: string,
  surface: Pick<OperatorSurface, "reconnectHint">,
): ToolAnswer | undefined {
  const code = result.error?.code;
  if (code === undefined) return undefined;
  if (code === "token_exchange_failed") {
    const hint = surface.reconnectHint(`${baseNameOf(itemName)}_REFRESH`);
    return { payload: { ...result, hint, next: { for_model: hint } }, isError: true };
  }
  const hint = ADVICE[code];
  if (hint === undefined) return { payload: result, isError: true };
  if (code === "timeout") {
    const waited = args.timeout_ms ?? DEFAULT_TIMEOUT_MS;
    if (waited >= MAX_TIMEOUT_MS) {
      const atMost = `The API did not answer within ${MAX_TIMEOUT_MS / 1000} seconds, the longest wait there is. Ask for less (a smaller page, a narrower query), or retry once later.`;
      return { payload: { ...result, hint: atMost, next: { for_model: atMost } }, isError: true };
    }
    const { dry_run: _dryRun, ...retry } = args;
    const longer = Math.min(MAX_TIMEOUT_MS, 2 * waited);
    return {
      payload: {
        ...result,
        hint,
        next: { for_model: hint, tool: HTTP_REQUEST_TOOL, arguments: { ...retry, timeout_ms: longer } },
      },
      isError: true,
    };
  }
  return { payload: { ...result, hint, next: { for_model: hint } }, isError: true };
}

/** What the agent should do after a call whose proxy never answered, by where its approval stands. */
const UNANSWERED: Readonly<Record<ApprovalAfterFault, string>> = {
  kept: "Latch's egress proxy did not answer, and the request was not sent. Retry in a few seconds with next.arguments; your approval is kept.",
  spent:
    "Latch's egress proxy took the request but did not answer: it may have reached the API. Do not retry blindly: check with the API (a list or GET of what the call would have changed) or with the user first. The one-call approval was used, so a retry asks the operator again.",
  held: "Latch's egress proxy did not answer, and whether the request left is not known yet. Your one-call approval is held until the proxy answers again and is given back if the request never left. Wait a minute, then retry with next.arguments; if it was used, the retry asks the operator again.",
  lost: "Latch's egress proxy did not answer, and the request was not sent, but your one-call approval could not be given back (Latch's database refused the write). Retry with next.arguments in a minute: the retry asks the operator again.",
};

/**
 * What the agent should do after a call whose request may have left although its approval is kept
 * (a standing or session approval, or an allow rule: nothing was spent, so nothing stops a retry
 * from running the request twice).
 */
const KEPT_BUT: Readonly<Record<Exclude<RequestAfterFault, "not_sent">, string>> = {
  may_have_reached_api:
    "Latch's egress proxy took the request but did not answer: it may have reached the API. Do not retry blindly: check with the API (a list or GET of what the call would have changed) or with the user first. Your approval is kept.",
  not_known_yet:
    "Latch's egress proxy did not answer, and whether the request left is not known yet. Do not retry blindly: in a minute, check with the API (a list or GET of what the call would have changed) or with the user first. Your approval is kept.",
};

/**
 * The answer for an http_request whose Execute ended without the proxy's answer
 * (calls.service.ts fenced its ticket): an error result saying whether the approval was kept and
 * whether the request may have left, or undefined for any other thrown error. Only an answer whose
 * request never left, or whose retry the operator must approve again, carries ready-made arguments.
 */
export function unansweredCallAnswer(
  error: unknown,
  args: HttpRequestArgs,
  /** The approval the call ran under; none for a call an allow rule sent. */
  grantId: string | undefined,
): ToolAnswer | undefined {
  if (!(error instanceof AppError)) return undefined;
  const approval = error.extra.approval as ApprovalAfterFault | undefined;
  if (!(typeof approval === "string" && Object.hasOwn(UNANSWERED, approval))) return undefined;
  const told = error.extra.request;
  const request: RequestAfterFault =
    told === "may_have_reached_api" || told === "not_known_yet" ? told : "not_sent";
  const keptBut = approval === "kept" && request !== "not_sent" ? KEPT_BUT[request] : undefined;
  const hint = keptBut ?? UNANSWERED[approval];
  const { dry_run: _dryRun, ...retry } = args;
  return {
    payload: {
      error: { code: error.code, message: error.message },
      ...(grantId ? { grant_id: grantId } : {}),
      approval_kept: approval === "kept",
      approval,
      request,
      hint,
      next:
        approval === "spent" || keptBut !== undefined
          ? { for_model: hint }
          : { for_model: hint, tool: HTTP_REQUEST_TOOL, arguments: retry },
    },
    isError: true,
  };
}

/**
 * A retry of a call whose one-call approval an earlier try holds while its fence waits
 * (calls.service.ts `findHeldCall`): that try's answer for "held" again, naming its grant, so the
 * agent waits as it was told to. Nothing is spent, asked, mailed or sent.
 */
export function heldCallAnswer(args: HttpRequestArgs, grantId: string): ToolAnswer {
  const held = new AppError(
    "egress_unavailable",
    "an earlier call under the one-call approval this call needs is not answered yet; the approval is held until then",
    { extra: { approval: "held", request: "not_known_yet" } },
  );
  return unansweredCallAnswer(held, args, grantId) as ToolAnswer;
}
