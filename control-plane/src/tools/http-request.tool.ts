// http_request (spec 4.2): locate the credential, check the agent's approval for exactly this call
// (spending a one-call approval before anything leaves), send through the egress proxy, answer in
// the shape of 2.8.
import { AppError } from "@latch/shared/errors";
import { sigv4QueryRefusal } from "@latch/shared/inject/aws-presign";
import { parseRequestTarget } from "@latch/shared/requests/path";
import { BearerNotLive } from "../auth/principal.ts";
import type { CallContext } from "../calls/call-context.repo.ts";
import { requestedCallOf } from "../calls/call-target.ts";
import type { HttpRequestArgs } from "../calls/calls.schemas.ts";
import { checkRequestTarget, type LocatedCredential, locateCredential } from "../calls/calls.service.ts";
import { rewritePlaylistPath } from "../calls/path-rewrite.ts";
import { findPlanItems, findUnnamedAccount, planTokenCall, type TokenPlanDeps } from "../calls/token-plan.ts";
import { HTTP_REQUEST_TOOL, httpRequestGrantScope } from "../grants/grant-scope.ts";
import type { RequestedCall } from "../grants/grants.repo.ts";
import type { CallableItem } from "../items/callable-item.ts";
import { ruleReference } from "../policies/policies.service.ts";
import { limitingDecisions, type PolicyDecision, strictestDecision } from "../policies/policy-match.ts";
import { findProviderByHost, recipeFields } from "../providers/providers.ts";
import { telemetry } from "../telemetry.ts";
import { callFailureAnswer, heldCallAnswer, unansweredCallAnswer } from "./call-failure.ts";
import { pendingHint } from "./pending-hint.ts";
import { admitOrRefuse, recordPolicyEvent, refuseRateLimited } from "./policy-gate.ts";
import { policyDeniedAnswer } from "./policy-refusal.ts";
import type { ToolAnswer } from "./tool-answer.ts";
import { commandItemName, suggestItemName, type ToolDeps, type ToolScope } from "./tool-context.ts";

export async function runHttpRequest(
  deps: ToolDeps,
  scope: ToolScope,
  args: HttpRequestArgs,
): Promise<ToolAnswer> {
  // The client, the credential and the agent's usable grants in one statement, where the calls
  // service has one (issue 27); each is then what its feature's own read would have answered.
  const context = await readCallContext(deps, scope, args);
  if (scope.bearerToConfirm !== undefined) {
    // The MCP route let a bearer seen live lately through unconfirmed: the call's statement is
    // its confirmation, so without one the call does not go on (never fail open).
    if (context === undefined) {
      // No statement was read because the target names no API or is refused: say which, reading
      // nothing (a refused target is answered the same to any bearer).
      checkRequestTarget(args);
      throw new AppError("internal", "a remembered bearer can only be confirmed by the call's context");
    }
    if (!context.clientLive) throw new BearerNotLive();
  }
  const named = await locateOrAnswer(deps, scope, args, context);
  if ("payload" in named) return named;
  // The siblings a token plan uses, read once for the account, the policy and the plan's refusal.
  const findItemByName = readingEachNameOnce(deps.items.findCallableByName);
  const located = await decideAccountUse(deps, scope, args, named, context, findItemByName);
  if ("payload" in located) return located;
  const { item, host, path } = located;
  // A sigv4 call is signed by Latch: a presigned URL's parameters in the agent's query would be a
  // second authentication of its choosing, and a pair the signer cannot sign would spend an
  // approval on a request AWS refuses. Refused before any approval is asked for.
  const refusal = item.inject === "sigv4" ? sigv4QueryRefusal(path) : undefined;
  if (refusal !== undefined) throw new AppError("invalid_path", refusal);
  const grantScope = httpRequestGrantScope(scope, item);
  const judgedItems = (await findPlanItems({ findItemByName }, scope, item, located)).map(
    (used) => used.name,
  );
  // The organisation's policy first (DECISIONS "Policies"): a deny rule beats every grant, and
  // refuses before anything is asked, spent or sent.
  const { decision: policy, limiting } = await decidePolicy(
    deps,
    scope,
    {
      items: judgedItems,
      host,
      method: args.method,
      paths: [path, rewritePlaylistPath(host, args.method, path, args.body).path],
    },
    context?.policyVersion,
  );
  if (policy)
    telemetry().annotate({ "latch.policy.rule_id": policy.rule.id, "latch.policy.effect": policy.effect });
  if (policy?.effect === "deny" && !args.dry_run) {
    await recordPolicyEvent(deps, scope, "policy_denied", policy, { itemName: item.name, host, args, path });
    return policyDeniedAnswer(policy, { args, itemName: item.name, host, path }, deps.surface);
  }
  // Rule 7 before any approval: a missing connect or sibling is answered without asking for one.
  const refused = args.dry_run
    ? undefined
    : await tokenPlanRefusal(deps, scope, args, located, findItemByName);
  if (refused) return refused;

  // The call as the operator approves it: method, host, validated path with its query, body digest.
  const call = requestedCallOf(host, path, args);
  if (args.dry_run) return dryRunAnswer(deps, scope, args, located, policy, call, limiting);

  if (policy?.effect === "allow") {
    // An allow rule needs no approval; the call still goes through every other rule (the item's
    // hosts, the path rules, the proxy's destination rules) in executeCall.
    const limited = await admitEach(deps, scope, args, located, limiting);
    if (limited) return limited;
    await recordPolicyEvent(deps, scope, "policy_allowed", policy, { itemName: item.name, host, args, path });
    return sendCall(deps, scope, args, located, { release: async () => {} }, policy, judgedItems);
  }

  // No rule, or an ask rule: today's approvals decide (an ask rule only names itself in the audit).
  // A one-call approval is spent naming the ticket its call goes out under, in one statement.
  const authorisation = await deps.grants.authoriseCall(grantScope, call, grantsReadFor(context, item), () =>
    deps.calls.nameCallTicket(args),
  );
  // The coverage decision, on the tool call's span (DECISIONS "Ledger and telemetry").
  telemetry().annotate(
    authorisation
      ? { "latch.coverage": "covered", "latch.grant.policy": authorisation.grant.policy }
      : { "latch.coverage": "approval_needed" },
  );
  if (!authorisation) {
    // An earlier try of this call holds its one-call approval while its fence waits: the retry is
    // answered as that try was, never with a second request (calls.service.ts findHeldCall).
    const heldGrantId = await deps.calls.findHeldCall(grantScope, scope.environment, call);
    if (heldGrantId !== undefined) return heldCallAnswer(args, heldGrantId);
    // A standing grant that does not cover this call: the new request is for exactly this scope.
    const isOutside = await deps.grants.isOutsideStanding(grantScope, call);
    const { grant, approvalCode, notifyFailed, deniedAt } = await deps.grants.requestGrant({
      ...grantScope,
      requestedCall: call,
      ...(isOutside ? { callScope: { host, method: args.method, path: path.split("?")[0] } } : {}),
      environment: scope.environment,
      actor: `agent:${scope.agentId}`,
      taskDescription: args.task_description,
      ...(policy ? { policyRule: ruleReference(policy) } : {}),
    });
    const { dry_run: _dryRun, ...retry } = args;
    return {
      payload: {
        status: "pending",
        grant_id: grant.grant_id,
        item_name: item.name,
        host,
        ...(approvalCode ? { approval_code: approvalCode } : {}),
        ...(deps.surface.isNotifying ? { notify_failed: notifyFailed ?? false } : {}),
        ...(policy ? { policy: { ...ruleReference(policy), effect: policy.effect } } : {}),
        message: deniedAt
          ? `The operator denied ${args.method} ${host}${path} with ${item.name} a short while ago; it waits in the inbox again, but nobody was notified.`
          : `Approval needed to send ${args.method} ${host}${path} with ${item.name}; the operator approves exactly this call.`,
        next: {
          for_model: pendingHint(
            deps.surface,
            grant.grant_id,
            "then call http_request again with next.arguments.",
            deniedAt,
          ),
          tool: HTTP_REQUEST_TOOL,
          arguments: retry,
        },
      },
    };
  }
  // A rate limit on a rule that decided a view of the call (the ask rule, or an allow on one of
  // its paths) counts calls that would leave: over it, the approval is given back (a one-call
  // approval was spent a moment ago) and nothing is sent. So it is when the
  // limit's count or its rate_limited row fails: nothing left, nothing may stay spent.
  if (limiting.length > 0) {
    let limited: ToolAnswer | undefined;
    try {
      limited = await admitEach(deps, scope, args, located, limiting);
    } catch (error) {
      await authorisation.release();
      throw error;
    }
    if (limited) {
      await authorisation.release();
      return limited;
    }
  }
  return sendCall(deps, scope, args, located, authorisation, policy, judgedItems);
}

/**
 * The credential a call naming an app credential (or only its host) is made with when the user's
 * account is connected beside it (`<ITEM>_REFRESH`, token-plan.ts `findUnnamedAccount`). An
 * approval or allow rule on the app credential never reaches the account (spec 4.2
 * user_connect_required: "after the operator connects and allows the agent"; a connect approves
 * only its `agent_client_id` on it). So a call that needs the account (a user-only path, a
 * provider without an app token), or that the agent is allowed to make with it (a usable approval
 * on the account covering it, or an allow rule deciding the account), is made with the account
 * exactly as a call naming it: its policy view, its approval, its pending request, its audit rows.
 * Any other call goes with the app credential alone (its app token), as before the connect.
 */
async function decideAccountUse(
  deps: ToolDeps,
  scope: ToolScope,
  args: HttpRequestArgs,
  named: LocatedCredential,
  context: CallContext | undefined,
  findItemByName: TokenPlanDeps["findItemByName"],
): Promise<LocatedCredential | ToolAnswer> {
  const unnamed = await findUnnamedAccount({ findItemByName }, scope, named);
  if (unnamed === undefined) return named;
  const { account, isAppPath } = unnamed;
  const { host, path } = named;
  if (isAppPath) {
    const { decision } = await decidePolicy(
      deps,
      scope,
      {
        items: [account.name],
        host,
        method: args.method,
        paths: [path, rewritePlaylistPath(host, args.method, path, args.body).path],
      },
      context?.policyVersion,
    );
    const isAllowed =
      decision?.effect === "allow" ||
      (await deps.grants.findUsableGrant(
        httpRequestGrantScope(scope, account),
        requestedCallOf(host, path, args),
      )) !== undefined;
    if (!isAllowed) {
      // An earlier try of this call made with the account may hold its one-call approval there
      // while its fence waits: the retry is answered as that try was, never sent again with the
      // app token nor asked anew (calls.service.ts findHeldCall; the scope is the account's).
      const heldGrantId = await deps.calls.findHeldCall(
        httpRequestGrantScope(scope, account),
        scope.environment,
        requestedCallOf(host, path, args),
      );
      if (heldGrantId !== undefined) return heldCallAnswer(args, heldGrantId);
      return { ...named, isAppOnly: true };
    }
  }
  // As locateCredential refuses a call naming the account for a host it does not allow.
  if (!account.allowedHosts.includes(host)) {
    const refused = new AppError(
      "host_mismatch",
      `credential ${account.name} is not allowed for host ${host}`,
      {
        extra: { item_name: account.name, allowed_hosts: account.allowedHosts },
      },
    );
    return { payload: { status: "host_mismatch", ...refused.toBody() }, isError: true };
  }
  return { ...named, item: account };
}

/**
 * The agent's usable grants on `item` as the call's statement read them, where it read that item
 * (by host it reads every item of the host; by name only the one named): else undefined, and
 * authoriseCall reads them itself.
 */
function grantsReadFor(context: CallContext | undefined, item: CallableItem) {
  return context?.items.some((read) => read.id === item.id) ? context.grantsOf(item.id) : undefined;
}

/**
 * The organisation's policy over one call (DECISIONS "Policies": a rule's `items` are credential
 * names, and deny refuses the call). A call may use more credentials than the one it names, and
 * leave by another path than the one it names, so the list is asked once for each view of it:
 * - each credential it uses, the located one first (calls/token-plan.ts `findPlanItems`: for a
 *   provider token item also the `<ITEM>_REFRESH` its plan exchanges and the sibling client
 *   secret it authenticates with), and
 * - each path it is known by: the validated path (the one the agent named and the operator
 *   approves) and the path the proxy sends after a provider's rename (calls/path-rewrite.ts, the
 *   one the http_request row records and a policy preview replays).
 * Then the strictest answer holds. A deny on any view refuses the call, so a rule on
 * `SPOTIFY_REFRESH` is not stepped around by naming `SPOTIFY` (or only the host), a rule on
 * `SPOTIFY_SECRET` by naming `SPOTIFY_REFRESH`, nor a rule on `.../items` by naming the old
 * `.../tracks`. Else an ask on any view asks. Else an allow holds only where it decides the
 * located credential on every path: an allow never sends what it was not written for (an allow
 * on a sibling alone, or on one spelling of the path alone, leaves the call to today's
 * approvals), while a sibling that no rule names does not take back the located credential's
 * allow. Among rules of the same effect, the one earliest in the list names the decision.
 * The agent is the client the credential authenticated (its id, and its name as issued or
 * registered), never a name from the call. `limiting`: every rule that decided some view and has a
 * rate limit (policy-match.ts `limitingDecisions`); each counts a call that is sent.
 */
async function decidePolicy(
  deps: ToolDeps,
  scope: ToolScope,
  call: { items: readonly string[]; host: string; method: string; paths: readonly string[] },
  knownVersion: number | undefined,
): Promise<{ decision: PolicyDecision | undefined; limiting: PolicyDecision[] }> {
  const [located] = call.items;
  const views: { decision: PolicyDecision | undefined; isLocated: boolean }[] = [];
  for (const item of new Set(call.items)) {
    for (const path of new Set(call.paths)) {
      const decision = await deps.policies.decideCall(
        scope.organisationId,
        {
          agentId: scope.agentId,
          agentName: scope.clientName,
          item,
          host: call.host,
          method: call.method,
          path,
          environment: scope.environment,
        },
        knownVersion,
      );
      views.push({ decision, isLocated: item === located });
    }
  }
  return { decision: strictestDecision(views), limiting: limitingDecisions(views) };
}

/**
 * Each rate-limited rule of the call takes a place; the first (earliest) that is full answers, and
 * then none takes one: with several, each is checked before any place is taken, so a call refused
 * by a narrow limit never spends a place of a broad one.
 */
async function admitEach(
  deps: ToolDeps,
  scope: ToolScope,
  args: HttpRequestArgs,
  located: LocatedCredential,
  limiting: readonly PolicyDecision[],
): Promise<ToolAnswer | undefined> {
  if (limiting.length > 1) {
    for (const decision of limiting) {
      const full = await deps.policies.admitCall(scope.organisationId, decision, { isDryRun: true });
      if (full) return refuseRateLimited(deps, scope, args, located, decision, full.retryAfter);
    }
  }
  for (const decision of limiting) {
    const limited = await admitOrRefuse(deps, scope, args, located, decision);
    if (limited) return limited;
  }
  return undefined;
}

/**
 * A name lookup that reads each name once per call: the policy and the token plan's refusal then
 * judge the same rows (and the plan costs no second read).
 */
function readingEachNameOnce(find: TokenPlanDeps["findItemByName"]): TokenPlanDeps["findItemByName"] {
  const read = new Map<string, Promise<CallableItem | undefined>>();
  return (organisationId, environment, name) => {
    const key = JSON.stringify([organisationId, environment, name]);
    let found = read.get(key);
    if (!found) {
      found = find(organisationId, environment, name);
      read.set(key, found);
    }
    return found;
  };
}

/** dry_run: what would happen, naming the rule that would decide; nothing written, nothing spent. */
async function dryRunAnswer(
  deps: ToolDeps,
  scope: ToolScope,
  args: HttpRequestArgs,
  located: LocatedCredential,
  policy: PolicyDecision | undefined,
  call: RequestedCall,
  limiting: readonly PolicyDecision[],
): Promise<ToolAnswer> {
  const { item, host, path } = located;
  const grant =
    policy?.effect === "deny" || policy?.effect === "allow"
      ? undefined
      : await deps.grants.findUsableGrant(httpRequestGrantScope(scope, item), call);
  let full: { retryAfter: number } | undefined;
  for (const decision of policy?.effect === "deny" ? [] : limiting) {
    full = await deps.policies.admitCall(scope.organisationId, decision, { isDryRun: true });
    if (full) break;
  }
  const { path: sentPath, rewritten } = rewritePlaylistPath(host, args.method, path, args.body);
  const isCovered = policy?.effect === "allow" || Boolean(grant);
  const reason =
    policy?.effect === "deny"
      ? "policy_denied"
      : !isCovered
        ? "scope_denied"
        : full
          ? "rate_limited"
          : undefined;
  return {
    payload: {
      status: "dry_run",
      item_name: item.name,
      host,
      method: args.method,
      path: sentPath,
      ...(rewritten ? { path_rewritten: rewritten } : {}),
      inject: item.inject,
      provider: findProviderByHost(host)?.id ?? null,
      // The rule that would decide, or null: no rule matches and today's approvals decide.
      policy: policy ? { ...ruleReference(policy), effect: policy.effect } : null,
      approval: grant
        ? { status: grant.status, grant_id: grant.grant_id, policy: grant.policy }
        : { status: "none" },
      would_send: reason === undefined,
      ...(reason ? { reason } : {}),
      ...(full ? { retry_after: full.retryAfter } : {}),
    },
  };
}

/** Sends the call under its approval (a grant's, or none for an allow rule) and shapes the answer. */
async function sendCall(
  deps: ToolDeps,
  scope: ToolScope,
  args: HttpRequestArgs,
  located: LocatedCredential,
  authorisation: { release(): Promise<void>; isOneCall?: boolean; grant?: { grant_id: string } },
  policy: PolicyDecision | undefined,
  /** The credentials the policy judged (decidePolicy): the call goes with none other. */
  judgedItems: readonly string[],
): Promise<ToolAnswer> {
  const { item } = located;
  const grantId = authorisation.grant?.grant_id;
  const named = {
    ...(grantId ? { grant_id: grantId } : {}),
    ...(policy ? { policy: { ...ruleReference(policy), effect: policy.effect } } : {}),
  };
  // Whether a spent approval is given back is executeCall's decision alone (the proxy's
  // reached_origin): nothing here may give it back after the request left.
  try {
    const outcome = await deps.calls.executeCall(
      {
        ...scope,
        actor: `agent:${scope.agentId}`,
        ...(args.client_id ? { clientId: args.client_id } : {}),
        ...(policy ? { policyRule: ruleReference(policy) } : {}),
        judgedItems,
      },
      args,
      located,
      authorisation,
    );
    const payload = { ...outcome.result, ...named };
    return callFailureAnswer(payload, args, item.name, deps.surface) ?? { payload };
  } catch (error) {
    // The proxy never answered: say whether the approval was kept (DECISIONS "Faults").
    const unanswered = unansweredCallAnswer(error, args, grantId);
    if (unanswered) return withOwnHint(unanswered, error);
    // The plan is made again when the call is sent (a sibling may have gone since).
    const answer =
      error instanceof AppError ? await tokenPlanAnswer(deps, scope, args, located, error) : undefined;
    if (answer) return answer;
    throw error;
  }
}

/**
 * A call that never reached the proxy (it waited out its item's token lock, calls.service.ts) says
 * why in its own hint; the approval it kept is said as every unanswered call's is.
 */
function withOwnHint(answer: ToolAnswer, error: unknown): ToolAnswer {
  const own = error instanceof AppError ? error.extra.hint : undefined;
  const payload = answer.payload;
  if (typeof own !== "string" || payload.approval !== "kept") return answer;
  const hint = `${own} Your approval is kept.`;
  const next = payload.next as Record<string, unknown>;
  return { ...answer, payload: { ...payload, hint, next: { ...next, for_model: hint } } };
}

/** user_connect_required or inject_denied for this call, before any approval is asked for. */
async function tokenPlanRefusal(
  deps: ToolDeps,
  scope: ToolScope,
  args: HttpRequestArgs,
  located: LocatedCredential,
  findItemByName: TokenPlanDeps["findItemByName"],
): Promise<ToolAnswer | undefined> {
  try {
    await planTokenCall({ findItemByName }, scope, {
      item: located.item,
      host: located.host,
      path: located.path,
      method: args.method,
      clientId: args.client_id,
      isAppOnly: located.isAppOnly,
    });
    return undefined;
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    const answer = await tokenPlanAnswer(deps, scope, args, located, error);
    if (answer) return answer;
    throw error;
  }
}

/** Spec 4.2: the user_connect_required and inject_denied payloads (nothing sent, nothing spent). */
async function tokenPlanAnswer(
  deps: ToolDeps,
  scope: ToolScope,
  args: HttpRequestArgs,
  located: LocatedCredential,
  error: AppError,
): Promise<ToolAnswer | undefined> {
  if (error.code === "inject_denied") {
    return {
      payload: { status: "inject_denied", ...error.toBody(), missing_item: error.extra.missing_item },
    };
  }
  if (error.code !== "user_connect_required") return undefined;
  const provider = String(error.extra.provider);
  const refreshItemName = String(error.extra.refresh_item_name);
  const { hint, fields } = await deps.surface.connectRequired(scope, {
    provider,
    itemName: located.item.name,
    refreshItemName,
    host: located.host,
    taskDescription: args.task_description,
  });
  const { dry_run: _dryRun, ...retry } = args;
  return {
    payload: {
      status: "user_connect_required",
      provider,
      item_name: located.item.name,
      refresh_item_name: refreshItemName,
      ...fields,
      hint,
      next: { for_model: hint, tool: HTTP_REQUEST_TOOL, arguments: retry },
    },
  };
}

/**
 * The call's context in one statement (calls/call-context.repo.ts): by item_name, else by the
 * target's host; undefined where the calls service has no such read, or the target is refused
 * anyway (locateCredential says why).
 */
function readCallContext(
  deps: ToolDeps,
  scope: ToolScope,
  args: HttpRequestArgs,
): Promise<CallContext> | undefined {
  const target = args.item_name ? undefined : parseRequestTarget({ path: args.path, host: args.host });
  const host = target?.ok ? target.host : undefined;
  if (!args.item_name && !host) return undefined;
  return deps.calls.readCallContext({
    organisationId: scope.organisationId,
    environment: scope.environment,
    ...(args.item_name ? { itemName: args.item_name } : { host }),
    agentId: scope.agentId,
    toolId: HTTP_REQUEST_TOOL,
    bearerHash: scope.bearerToConfirm,
  });
}

/** The located credential, or the tool answer for a miss (need_item) or a host mismatch. */
async function locateOrAnswer(
  deps: ToolDeps,
  scope: ToolScope,
  args: HttpRequestArgs,
  context: CallContext | undefined,
): Promise<LocatedCredential | ToolAnswer> {
  // Read by name or by host as locateCredential asks (readCallContext chose the same way).
  const lookups = context
    ? {
        findItemByName: async () => context.items[0],
        findItemsByHost: async () => context.items,
      }
    : { findItemByName: deps.items.findCallableByName, findItemsByHost: deps.items.findCallableByHost };
  try {
    return await locateCredential(lookups, scope, args);
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    if (error.code === "host_mismatch") {
      return { payload: { status: "host_mismatch", ...error.toBody() }, isError: true };
    }
    if (error.code === "not_found") {
      // The host as validated by locateCredential, never the raw argument.
      const host = typeof error.extra.host === "string" ? error.extra.host : undefined;
      const suggested = args.item_name ?? (host ? suggestItemName(host) : "API_TOKEN");
      // A dry run reports the miss but opens no collect request (nothing written, no limit spent).
      if (args.dry_run) return dryRunNeedItemAnswer(suggested, host);
      // The call that asked: storing the value approves this call once, as a pending grant would.
      const target = parseRequestTarget({ path: args.path, host: args.host });
      const requestedCall = host && target.ok ? requestedCallOf(host, target.path, args) : undefined;
      return needItemAnswer(deps, scope, suggested, host, args.task_description, requestedCall);
    }
    throw error;
  }
}

export async function needItemAnswer(
  deps: ToolDeps,
  scope: ToolScope,
  suggestedName: string,
  host: string | undefined,
  taskDescription?: string,
  requestedCall?: RequestedCall,
): Promise<ToolAnswer> {
  const { message, fields } = await deps.surface.needItem(
    scope,
    suggestedName,
    host,
    taskDescription,
    requestedCall,
  );
  return {
    payload: {
      status: "need_item",
      suggested_name: suggestedName,
      ...(host ? { host } : {}),
      message,
      ...recipeFields(host),
      ...fields,
    },
  };
}

/** need_item for a dry run: what is missing, without writing a collect request (so no collect_url). */
export function dryRunNeedItemAnswer(suggestedName: string, host: string | undefined): ToolAnswer {
  // The name the real call's request would carry (a credential name: tool-context.ts).
  const name = commandItemName(suggestedName, host);
  return {
    payload: {
      status: "need_item",
      suggested_name: name,
      ...(host ? { host } : {}),
      ...recipeFields(host),
      dry_run: true,
      message: `Nothing is stored${host ? ` for ${host}` : ` as ${name}`}. Call again without dry_run to ask the user to store it.`,
    },
  };
}
