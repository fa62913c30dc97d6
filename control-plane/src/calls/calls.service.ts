// http_request's call path on the control plane: validate, find the credential, check its hosts,
// mint a ticket for exactly this request, hand it to the proxy, audit, shape the answer.
import { type CallSpec, type ExecuteResponse, type SignedTicket, TokenKind } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { parseRequestTarget } from "@latch/shared/requests/path";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { type EgressClient, LINK_OVERHEAD_MS } from "../egress/egress-client.ts";
import {
  createTicketFence,
  type FenceResult,
  type LateFence,
  type TicketFence,
} from "../egress/ticket-fence.ts";
import type { TicketMinter } from "../egress/tickets.ts";
import { newTicketId } from "../egress/tickets.ts";
import type { GrantScope, GrantsRepo, RequestedCall } from "../grants/grants.repo.ts";
import type { CallableItem } from "../items/callable-item.ts";
import type { ItemTokensRepo, MintedToken, SealedToken } from "../items/item-tokens.repo.ts";
import { tokenExpiresAt } from "../items/token-lifetime.ts";
import { HELD_DECIDED_MS } from "./abandoned-calls.ts";
import type { CallContext, CallContextQuery, CallContextRepo } from "./call-context.repo.ts";
import type { CallOutcome, HttpRequestArgs, HttpRequestResult } from "./calls.schemas.ts";
import { encodeRequestBody } from "./form-body.ts";
import { describeRewrite, rewritePlaylistPath } from "./path-rewrite.ts";
import { baseNameOf, planItemNames, planTokenCall, type TokenPlan } from "./token-plan.ts";

export interface CallsDeps {
  findItemByName(
    organisationId: string,
    environment: string,
    name: string,
  ): Promise<CallableItem | undefined>;
  findItemsByHost(organisationId: string, environment: string, host: string): Promise<CallableItem[]>;
  recordEvent(event: AuditEvent): Promise<void>;
  minter: TicketMinter;
  egress: EgressClient;
  /**
   * Fences the ticket of an Execute that ended without an answer (egress/ticket-fence.ts); by
   * default by asking a proxy (enough for one proxy and its memory store).
   */
  fence?: TicketFence | undefined;
  /** The item token lock (items service): minted access tokens and refresh rotation, rule 7. */
  inItemTokenLock?: ItemTokensRepo["inItemTokenLock"];
  /** Wall clock for token expiry; Date.now unless a test fixes it. */
  now?: () => number;
  /** A call went out with the item: its last use (written at most once a minute). */
  noteItemUsed?: (item: CallableItem) => Promise<void>;
  /**
   * An audit row could not be written (the database refused it or is gone). Called with the error
   * so its code can be logged; the answer still goes back, and the agent text is never logged.
   */
  onAuditFailure?: (error: unknown) => void;
  /**
   * A one-call approval whose request a fence proved unsent could not be given back (the database
   * refused the write): it stays spent, the call's answer and audit row say so.
   */
  onGiveBackFailure?: (error: unknown) => void;
  /**
   * The client, the credential and its usable grants in one statement (call-context.repo.ts).
   * Unset where a read cache answers the lookups instead (the local vault on its own database).
   */
  callContext?: CallContextRepo | undefined;
  /**
   * A one-call approval held while its call's fence waits (grants.held_until): marked only where
   * the agent is answered "held", ended once the fence decides, and looked for only where a call
   * would otherwise open a new request. None of these runs on a call that is answered.
   */
  heldCalls?: Pick<GrantsRepo, "updateGrantHeld" | "updateGrantHoldEnded" | "findHeldCallGrant"> | undefined;
  /** The clock grants are judged by (the grants service's), for the usable grants it reads. */
  grantClock?: () => Date;
}

/** The approval a call runs under: given back only when nothing left (see executeCall). */
export interface CallApproval {
  release(): Promise<void>;
  /** A one-call approval, spent for this call; other approvals are never spent by a call. */
  isOneCall?: boolean;
  /** The grant it is: a one-call approval held while its fence waits is marked on it. */
  grant?: { grant_id: string };
  /**
   * The ticket a one-call approval's call goes out under, named on its grant by the statement that
   * spent it (`nameCallTicket`), until `settle`.
   */
  ticket?: { id: string; expiresAt: Date };
  /** The call's outcome is written: nothing is left for abandoned-calls.ts to recover. */
  settle?(): Promise<void>;
}

/**
 * Where the approval of a call whose proxy never answered stands, for the agent's answer
 * (tools/call-failure.ts): `kept` (the fence won and it was given back, or it was never spent),
 * `spent` (a proxy took the ticket: the request may have reached the API), `held` (nobody could be
 * asked yet: given back later if the request never left), `lost` (the request never left, but the
 * database refused to give the one-call approval back).
 */
export type ApprovalAfterFault = "kept" | "spent" | "held" | "lost";
/**
 * Whether that call's request may have left, apart from its approval (a standing approval is kept
 * whatever happened to the request): `not_sent` (the fence won), `may_have_reached_api` (a proxy
 * took the ticket), `not_known_yet` (nobody could be asked).
 */
export type RequestAfterFault = "not_sent" | "may_have_reached_api" | "not_known_yet";

const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * A call ticket lives as long as the control plane waits for its answer: a proxy that only reads
 * it after that (stalled, or behind a slow link) refuses it (DECISIONS "Faults").
 */
const ticketTtlMs = (spec: Pick<CallSpec, "timeoutMs">) => spec.timeoutMs + LINK_OVERHEAD_MS;

/**
 * The least life a one-call approval's ticket is minted with: enough to reach a proxy and be
 * claimed there. With less left before the expiry named on its grant, nothing is minted.
 */
const MIN_TICKET_LIFE_MS = 1_000;
/**
 * A call waiting for its item's token lock gives up this long before the expiry named on its grant,
 * so that a lock taken at the last moment still leaves its ticket MIN_TICKET_LIFE_MS to live.
 */
const LOCK_GIVE_UP_MARGIN_MS = 2_000;

/**
 * The ticket a one-call approval named on its grant before anything could leave: its id, and the
 * expiry abandoned-calls.ts trusts (a ticket past it can never be sent). The ticket is minted
 * under that id and never lives past that expiry.
 */
interface NamedTicket {
  id: string;
  expiresAtMs: number;
}

/** A call that exchanged at the provider's token URL (rule 7), and whether it stored a rotated refresh token. */
interface ExchangeMade {
  isRefreshRotated: boolean;
}

/** A call that could not be sent before its named ticket's expiry: nothing left, nothing will. */
class NotSentInTime extends AppError {}

function notSentInTime(itemName: string, why: string): NotSentInTime {
  return new NotSentInTime("timeout", `the call could not be sent in time (${why}); nothing was sent`, {
    extra: {
      hint: `Another call on ${itemName} held its token for longer than this call could wait, so this request was not sent. Retry in a few seconds with next.arguments.`,
    },
  });
}

/** A fault of ours before the call's ticket left (the database): nothing was sent. */
function notSentFault(error: unknown): AppError {
  if (error instanceof AppError) return error;
  return new AppError(
    "internal",
    "the call could not be prepared (a fault in Latch, such as its database not answering); nothing was sent",
    {
      cause: error,
      extra: {
        hint: "Latch failed while preparing this call (its database may not have answered), so this request was not sent. Retry in a few seconds with next.arguments.",
      },
    },
  );
}

/** A fault of ours after the proxy answered (storing what its token exchange rotated): it went out. */
function answeredFault(error: unknown): AppError {
  return new AppError(
    error instanceof AppError ? error.code : "internal",
    "the request was sent and the API answered, but Latch could not store the tokens the provider rotated; the answer is lost",
    { cause: error },
  );
}

/** How the audit row of an unanswered call names its fence. */
const FENCE_DETAIL: Record<Exclude<FenceResult, "fenced">, string> = {
  taken: "lost",
  unknown: "unknown",
  pending: "pending",
};

function approvalAfter(fenced: FenceResult, approval: CallApproval): ApprovalAfterFault {
  if (fenced === "fenced" || !approval.isOneCall) return "kept";
  return fenced === "pending" ? "held" : "spent";
}

function requestAfter(fenced: FenceResult): RequestAfterFault {
  if (fenced === "fenced") return "not_sent";
  return fenced === "pending" ? "not_known_yet" : "may_have_reached_api";
}

/** The error of an unanswered call, saying where its approval and request stand (the tool's answer reads them). */
function withApproval(error: unknown, approval: ApprovalAfterFault, request: RequestAfterFault): AppError {
  const failure =
    error instanceof AppError ? error : new AppError("internal", "the egress proxy failed", { cause: error });
  return new AppError(failure.code, failure.message, {
    cause: failure.cause ?? error,
    extra: { ...failure.extra, approval, request },
  });
}

/** The credential a request names, the host it goes to and its validated path. */
export interface LocatedCredential {
  item: CallableItem;
  host: string;
  path: string;
  /**
   * The app credential goes alone, its user account connected beside it unused: the agent is not
   * allowed on the account (tools/http-request.tool.ts `decideAccountUse`, token-plan.ts).
   */
  isAppOnly?: boolean;
}

/**
 * The request's target validated (spec 4.2 rule 1, 2), reading nothing: its host (when it names
 * one) and path, or the AppError that refuses it; without item_name it must name its host.
 */
export function checkRequestTarget(args: Pick<HttpRequestArgs, "path" | "host" | "item_name">): {
  host: string | undefined;
  path: string;
} {
  const target = parseRequestTarget({ path: args.path, host: args.host });
  if (!target.ok) {
    throw new AppError(target.code, target.message, target.hint ? { extra: { hint: target.hint } } : {});
  }
  if (!args.item_name && !target.host) {
    throw new AppError(
      "invalid_request",
      "name the API with host, item_name, or a full https:// URL in path",
    );
  }
  return { host: target.host, path: target.path };
}

/** Which credential and host a request names, after validating the target (spec 4.2 rule 1, 2). */
export async function locateCredential(
  deps: Pick<CallsDeps, "findItemByName" | "findItemsByHost">,
  scope: { organisationId: string; environment: string },
  args: Pick<HttpRequestArgs, "path" | "host" | "item_name">,
): Promise<LocatedCredential> {
  const target = checkRequestTarget(args);
  if (args.item_name) {
    const item = await deps.findItemByName(scope.organisationId, scope.environment, args.item_name);
    if (!item) {
      throw new AppError("not_found", `no credential named ${args.item_name} in this environment`, {
        extra: target.host ? { host: target.host } : {},
      });
    }
    // Stored without hosts (the local API allows it, spec 4.4): sent nowhere until hosts are added.
    if (item.allowedHosts.length === 0) {
      throw new AppError(
        "host_mismatch",
        `credential ${item.name} has no allowed host yet, so it is sent nowhere; the operator adds one with \`vault set ${item.name} --host HOST\``,
        { extra: { item_name: item.name, allowed_hosts: [] } },
      );
    }
    const host = target.host ?? (item.allowedHosts.length === 1 ? item.allowedHosts[0] : undefined);
    if (!host)
      throw new AppError("invalid_host", `credential ${item.name} allows several hosts; name one with host`);
    // Exact match only (spec 4.2 rule 4): no suffix, wildcard or case games.
    if (!item.allowedHosts.includes(host)) {
      throw new AppError("host_mismatch", `credential ${item.name} is not allowed for host ${host}`, {
        extra: { item_name: item.name, allowed_hosts: item.allowedHosts },
      });
    }
    return { item, host, path: target.path };
  }
  // checkRequestTarget lets no target without item_name through unless it names its host.
  const host = target.host as string;
  const items = await deps.findItemsByHost(scope.organisationId, scope.environment, host);
  const [only, ...others] = items;
  if (!only) {
    throw new AppError("not_found", `no credential is stored for ${host}`, {
      extra: { host },
    });
  }
  const pair = connectedPairSource(items);
  if (pair) return { item: pair, host, path: target.path };
  if (others.length > 0) {
    throw new AppError("invalid_request", `several credentials allow ${host}; name one with item_name`, {
      extra: { items: items.slice(0, 5).map((i) => i.name) },
    });
  }
  return { item: only, host, path: target.path };
}

/**
 * An app credential and its connected `<ITEM>_REFRESH` both allow the provider's hosts: found by
 * host, the call goes with the app credential, which plans the refresh (token-plan.ts).
 */
export function connectedPairSource(items: readonly CallableItem[]): CallableItem | undefined {
  if (items.length !== 2) return undefined;
  const source = items.find((i) => i.inject === "client_credentials");
  const refresh = items.find((i) => i.inject === "refresh");
  if (!source || !refresh || baseNameOf(source.name) !== baseNameOf(refresh.name)) return undefined;
  return source;
}

/** Reuse a minted access token until 60 s before it expires (DECISIONS "Providers"). */
const TOKEN_REUSE_MARGIN_MS = 60_000;

function sealedOf(item: CallableItem): NonNullable<CallSpec["credential"]> {
  return {
    itemName: item.name,
    keyId: item.sealingKeyId,
    sealedValue: Buffer.from(item.sealedValue),
    username: item.username ?? "",
  };
}

function shapeResult(response: ExecuteResponse): HttpRequestResult {
  if (response.error) {
    const result: HttpRequestResult = {
      error: { code: response.error.code, message: response.error.message },
    };
    // Spec 4.2 rule 5: a cut answer is origin_status 502. What the agent should do about this or
    // any other failure is said by the tool (tools/call-failure.ts), in the words of its surface.
    if (response.error.code === "body_too_large") {
      return { ...result, origin_status: 502, status: 502, body: "", origin_headers: {} };
    }
    return result;
  }
  const headers: Record<string, string> = {};
  for (const h of response.headers) headers[h.name] = h.value;
  const body = Buffer.from(response.body).toString("utf8");
  return {
    origin_status: response.originStatus,
    status: response.originStatus,
    body,
    origin_headers: headers,
    ...(response.bodyTruncated ? { body_truncated: true } : {}),
  };
}

export function createCallsService(deps: CallsDeps) {
  const fence = deps.fence ?? createTicketFence({ egress: deps.egress });
  return {
    /**
     * The ticket a one-call approval's call will go out under, drawn just before the approval is
     * spent and named on its grant by the spend itself (grants `authoriseCall`): its id, the latest
     * it may live (it is minted later with what is left, or not at all: sendPlanned), and whether
     * the proxies spend ids in the shared table (asked of the fence, which keeps its answer).
     */
    async nameCallTicket(
      args: Pick<HttpRequestArgs, "timeout_ms">,
    ): Promise<{ id: string; expiresAt: Date; isStoreShared: boolean }> {
      const isStoreShared = (await fence.isStoreShared().catch(() => false)) === true;
      const ttlMs = ticketTtlMs({ timeoutMs: args.timeout_ms ?? DEFAULT_TIMEOUT_MS });
      return { id: newTicketId(), expiresAt: new Date(Date.now() + ttlMs), isStoreShared };
    },

    /**
     * What a call reads before it can be sent, in one statement: undefined where the lookups are
     * answered otherwise (a read cache), and the tool then asks each feature as usual.
     */
    readCallContext(query: Omit<CallContextQuery, "now">): Promise<CallContext> | undefined {
      return deps.callContext?.findCallContext({ ...query, now: (deps.grantClock ?? (() => new Date()))() });
    },

    /**
     * The one-call approval covering `call` that an earlier try of it holds while its fence
     * waits (its agent was answered "held"): a retry is answered held with it rather than opening a
     * second request. One statement, made only where a call would open a new request.
     */
    async findHeldCall(
      scope: Pick<GrantScope, "organisationId" | "itemId" | "agentId" | "toolId">,
      environment: string,
      call: RequestedCall,
    ): Promise<string | undefined> {
      const row = await deps.heldCalls?.findHeldCallGrant(scope, environment, call, new Date());
      return row?.id;
    },

    /**
     * Makes one call. Authorisation (grants) is the caller's job and happens before this; here
     * the request is validated, sent through the proxy and audited.
     *
     * `approval.release()` is called in exactly four cases: the call failed before its ticket
     * left for the proxy; the proxy answered that nothing reached the origin; the proxy refused
     * the ticket as issued before it started (`ticket_predates_proxy`: the one process it went to
     * did not run it); or the proxy did not answer and fencing its ticket won
     * (egress/ticket-fence.ts: no proxy ran it, none ever will), now or once a fence could be
     * asked. Nothing after the proxy answered (the audit insert, shaping the result, a thrown
     * error) can give an approval back, and a ticket a proxy took keeps it spent (the request may
     * have gone out). This is the one place that decides.
     */
    async executeCall(
      scope: {
        organisationId: string;
        environment: string;
        actor: string;
        clientId?: string;
        /** The policy rule that decided the call (DECISIONS "Policies": every row of it names it). */
        policyRule?: { rule_id: string };
        /**
         * The credentials the organisation's policy judged this call with (token-plan.ts
         * `findPlanItems`): a plan made again here that would use another (a sibling stored
         * since) sends nothing.
         */
        judgedItems?: readonly string[];
      },
      args: HttpRequestArgs,
      located: LocatedCredential,
      approval: CallApproval,
    ): Promise<CallOutcome> {
      const { item, host } = located;
      // Giving the approval back is a write that can fail too: the approval then stays spent, and
      // the audit row and the answer say so, rather than the call failing with the database's error
      // (and losing the refusal or the error it would have answered).
      const giveBack = async (): Promise<boolean> => {
        try {
          await approval.release();
          return true;
        } catch (releaseError) {
          deps.onGiveBackFailure?.(releaseError);
          return false;
        }
      };
      // The outcome is written: a one-call approval forgets its ticket. A lost write only leaves
      // abandoned-calls.ts a row to look at, which finds the outcome already in the ledger's place.
      const settle = async () => {
        await approval.settle?.().catch((error: unknown) => deps.onAuditFailure?.(error));
      };
      let prepared: ReturnType<typeof prepareCall>;
      let plan: TokenPlan;
      try {
        prepared = prepareCall(args, located);
        plan = await planTokenCall({ findItemByName: deps.findItemByName }, scope, {
          item,
          host,
          path: located.path,
          method: args.method,
          clientId: args.client_id,
          isAppOnly: located.isAppOnly,
        });
        const unjudged = scope.judgedItems
          ? planItemNames(plan, item).find((name) => !scope.judgedItems?.includes(name))
          : undefined;
        if (unjudged !== undefined) {
          throw new AppError(
            "stale_version",
            `${unjudged} was stored while this call was being checked, and the organisation's policy has not judged it; nothing was sent, call again`,
          );
        }
      } catch (error) {
        // user_connect_required, inject_denied, a bad target, a sibling the policy did not judge:
        // nothing was sent (spec 3.1).
        await giveBack();
        throw error;
      }
      const { path, rewritten, spec, timeoutMs } = prepared;
      const audit = {
        organisationId: scope.organisationId,
        environment: scope.environment,
        actor: scope.actor,
        itemName: item.name,
        host,
      };
      const detail = {
        method: args.method,
        // The path without its query: a query may carry personal data; the audit needs the route.
        path: path.split("?")[0],
        // The path as the agent asked and the policy judged it too, where a provider's rename
        // changed it (rule 3): a replay of this row can judge both, as the call was judged.
        ...(rewritten ? { requested_path: rewritten.from.split("?")[0] } : {}),
        ...(scope.clientId ? { client_id: scope.clientId } : {}),
        ...(scope.policyRule ? { rule_id: scope.policyRule.rule_id } : {}),
      };

      let response: ExecuteResponse;
      // Set when the call exchanged at the token URL (not when it reused a minted token).
      let exchange: ExchangeMade | undefined;
      // Set the moment a ticket is handed to the proxy: before that (minting, the token lock,
      // reading the refresh token) a failure sent nothing and the approval goes back.
      let sentTicket: SignedTicket | undefined;
      let isAnswered = false;
      // The ticket a one-call approval named on its grant as it was spent (nameCallTicket), so a
      // control plane killed at any moment since leaves the spent approval findable
      // (abandoned-calls.ts). Its expiry is the latest the ticket may live: it is minted later
      // (under the lock) with what is left of it, or not at all (sendPlanned), so a ticket past it
      // can never be sent and the sweep's fence of it proves the call never left.
      const named: NamedTicket | undefined = approval.ticket && {
        id: approval.ticket.id,
        expiresAtMs: approval.ticket.expiresAt.getTime(),
      };
      try {
        ({ response, exchange } = await sendPlanned(
          plan,
          spec,
          scope.organisationId,
          named,
          async (ticket) => {
            sentTicket = ticket;
            const answer = await deps.egress.execute(ticket, timeoutMs);
            isAnswered = true;
            return answer;
          },
        ));
      } catch (error) {
        if (!sentTicket) {
          const isGivenBack = await giveBack();
          // Out of time before anything was minted, or a fault of ours (the database or taking the
          // item's token lock): the answer says the request was not sent and
          // where the approval stands, as an unanswered call's does, never "try again later" alone.
          if (error instanceof NotSentInTime || !(error instanceof AppError))
            throw withApproval(notSentFault(error), isGivenBack ? "kept" : "lost", "not_sent");
          throw error;
        }
        const reason = error instanceof AppError ? error.code : "internal";
        if (isAnswered) {
          // The proxy answered and something after it failed (storing a rotated token): the
          // request went out, the approval stays spent, and the attempt is audited. The answer
          // says the request may have reached the API, so that the agent does not retry blindly.
          if (await recordSafely({ ...audit, action: "http_request_failed", reason, detail })) await settle();
          throw withApproval(
            answeredFault(error),
            approval.isOneCall ? "spent" : "kept",
            "may_have_reached_api",
          );
        }
        if (error instanceof AppError && error.code === "ticket_predates_proxy") {
          // A proxy on its memory store, started after the ticket was issued (a restart while the
          // call waited), refused it unspent. It was the only process the ticket went to (the
          // egress client sends a ticket once, and again only after a refusal marked not started,
          // as this one is): no process ran it, none will. So, as when a fence wins, the approval
          // goes back; no fence is asked (that proxy's answer for this ticket is UNKNOWN).
          const isGivenBack = await giveBack();
          await recordSafely({
            ...audit,
            action: "call_not_sent",
            reason,
            detail: { ...detail, ...(isGivenBack ? {} : { approval: "not_given_back" }) },
          });
          if (!isGivenBack) await settle();
          throw withApproval(error, isGivenBack ? "kept" : "lost", "not_sent");
        }
        // No answer (connection lost, UNAVAILABLE, deadline, a ticket refused): fence the ticket.
        // A fence nobody could answer yet is asked again; if it wins later, the approval comes back.
        const recordNotSent = (fence: "won" | "late", isGivenBack: boolean) =>
          recordSafely({
            ...audit,
            action: "call_not_sent",
            reason,
            detail: { ...detail, fence, ...(isGivenBack ? {} : { approval: "not_given_back" }) },
          });
        // A held approval is decided once its fence ends: its mark goes after the give-back (a
        // retry meanwhile finds the approval active) or with the spend settled. A mark that
        // cannot be ended lapses at its time.
        const heldGrantId = approval.isOneCall ? approval.grant?.grant_id : undefined;
        const endHold = async () => {
          if (heldGrantId === undefined) return;
          await deps.heldCalls
            ?.updateGrantHoldEnded(heldGrantId)
            .catch((endError: unknown) => deps.onAuditFailure?.(endError));
        };
        // Whether the unanswered call's own row (below) reached the ledger: a fence that ends as
        // taken or unknown writes it then if not (the request may have reached the API), and a
        // one-call approval lets its ticket go only once a row of the call is written, else
        // abandoned-calls.ts writes it. Settled before the fence can end (it is asked again later).
        let isOutcomeRecorded: (isRecorded: boolean) => void = () => {};
        const outcomeRecorded = new Promise<boolean>((resolve) => {
          isOutcomeRecorded = resolve;
        });
        const settleLate = async (late: LateFence) => {
          if (late !== "fenced") {
            await endHold();
            const isRecorded =
              (await outcomeRecorded) ||
              (await recordSafely({
                ...audit,
                action: "call_outcome_unknown",
                reason,
                detail: { ...detail, fence: FENCE_DETAIL[late] },
              }));
            if (isRecorded) await settle();
            return;
          }
          const isGivenBack = await giveBack();
          await recordNotSent("late", isGivenBack);
          // As when the fence wins at once: refused by the database, the approval stays spent and
          // its ticket is let go, for the sweep would take this fence's own row for a proxy's spend.
          if (!isGivenBack) await settle();
          await endHold();
        };
        const fenced = await fence.fence(sentTicket, (late) => {
          settleLate(late).catch((lateError: unknown) => deps.onAuditFailure?.(lateError));
        });
        // Held: nobody could be asked yet. Until the fence (or abandoned-calls.ts) is sure to have
        // decided, a retry of this call is answered held too, never a second request for it (a
        // second approval would let the call go twice once this one came back). Only here.
        if (fenced === "pending" && heldGrantId !== undefined && named) {
          await deps.heldCalls
            ?.updateGrantHeld(heldGrantId, named.id, new Date(named.expiresAtMs + HELD_DECIDED_MS))
            .catch((markError: unknown) => deps.onAuditFailure?.(markError));
        }
        if (fenced === "fenced") {
          const isGivenBack = await giveBack();
          await recordNotSent("won", isGivenBack);
          if (!isGivenBack) {
            await settle();
            throw withApproval(error, "lost", "not_sent");
          }
        } else {
          const isRecorded = await recordSafely({
            ...audit,
            action: "call_outcome_unknown",
            reason,
            detail: { ...detail, fence: FENCE_DETAIL[fenced] },
          });
          isOutcomeRecorded(isRecorded);
          // A fence still pending settles when it ends (settleLate).
          if (isRecorded && fenced !== "pending") await settle();
        }
        throw withApproval(error, approvalAfter(fenced, approval), requestAfter(fenced));
      }
      const isGivenBack = response.reachedOrigin || (await giveBack());
      // The credential's "last used": a lost write is only a stale time in the console (the audit
      // row below is the record of the call), so it never stops the answer.
      if (response.reachedOrigin) await deps.noteItemUsed?.(item).catch(() => {});

      const isRecorded = await recordSafely({
        ...audit,
        action: response.error && !response.reachedOrigin ? "http_request_refused" : "http_request",
        reason: response.error?.code,
        detail: {
          ...detail,
          ...(response.reachedOrigin ? { origin_status: response.originStatus || 502 } : {}),
          ...(isGivenBack ? {} : { approval: "not_given_back" }),
        },
      });
      // A row the ledger refused keeps the ticket: abandoned-calls.ts writes the outcome later.
      if (isRecorded && (response.reachedOrigin || !isGivenBack)) await settle();
      const minted = (response.rotatedCredentials ?? []).find((r) => r.kind === TokenKind.TOKEN_KIND_ACCESS);
      if (plan.kind === "exchange" && exchange) {
        // Rule 7: an exchange audits both items, the refresh token and the client secret, each
        // one the row above does not name. A token reused from an earlier exchange made none and
        // writes none. The reason is the exchange's own failure: with a minted token it worked.
        const exchangeRow = {
          ...audit,
          host: plan.tokenHost,
          detail: {
            provider: plan.provider.id,
            for_item: item.name,
            ...(scope.clientId ? { client_id: scope.clientId } : {}),
            ...(scope.policyRule ? { rule_id: scope.policyRule.rule_id } : {}),
          },
        };
        for (const used of [plan.refreshItem, plan.clientSecretItem]) {
          if (used === undefined || used.name === item.name) continue;
          await recordSafely({
            ...exchangeRow,
            itemName: used.name,
            action: "token_exchange",
            reason: minted ? undefined : response.error?.code,
          });
        }
        // "Stores a rotated refresh token in place": the item's value changed, as a rotation does.
        if (exchange.isRefreshRotated && plan.refreshItem) {
          await recordSafely({ ...exchangeRow, itemName: plan.refreshItem.name, action: "item_rotated" });
        }
      }
      const result = shapeResult(response);
      if (minted && !response.error) {
        result.refreshed = true;
        if (minted.metadata?.tokenLast4) result.token_last4 = minted.metadata.tokenLast4;
      }
      if (rewritten) {
        result.path_rewritten = rewritten;
        result.next ??= { for_model: describeRewrite(rewritten) };
      }
      return { reachedOrigin: response.reachedOrigin, itemName: item.name, host, result };
    },
  };

  /**
   * Sends the call as its token plan says. An exchange runs under the item's token lock: a second
   * replica waits, then reuses the access token the first one minted (sent once the lock is let
   * go), or exchanges the refresh token the first one stored; whatever the proxy rotated is stored
   * before the lock is let go.
   */
  async function sendPlanned(
    plan: TokenPlan,
    spec: CallSpec,
    organisationId: string,
    /** The ticket a one-call approval named on its grant; else the minter draws an id. */
    named: NamedTicket | undefined,
    execute: (ticket: SignedTicket) => Promise<ExecuteResponse>,
  ): Promise<{ response: ExecuteResponse; exchange?: ExchangeMade }> {
    const itemName = plan.kind === "exchange" ? plan.tokenItem.name : spec.credential?.itemName;
    const mint = (call: CallSpec) => deps.minter.mintCallTicket(call, ticketOptions());
    /**
     * A named ticket lives only until the expiry its grant names (the minter takes a lifetime, so
     * it is given what is left of it, by the same clock), and with too little left it is not
     * minted at all: the call gives its approval back, and nothing ever leaves under that id.
     */
    function ticketOptions() {
      if (!named) return { ttlMs: ticketTtlMs(spec), organisationId };
      const leftMs = named.expiresAtMs - Date.now();
      if (leftMs < MIN_TICKET_LIFE_MS)
        throw notSentInTime(itemName ?? "this credential", "its ticket's time ran out before it was minted");
      return { ttlMs: leftMs, organisationId, id: named.id };
    }
    if (plan.kind === "as_stored") return { response: await execute(mint(spec)) };
    if (plan.kind === "app_secret")
      return { response: await execute(mint({ ...spec, inject: plan.inject })) };
    if (!deps.inItemTokenLock) throw new AppError("internal", "the item token store is not wired");
    const now = deps.now ?? Date.now;
    // A minted token still good is read under the lock (so a call waits out an exchange under way
    // and reuses its token), and sent after the lock is let go: calls that only reuse it never
    // wait for each other's origin, nor hold a database connection while they do.
    const locked = await inTokenLockUntil<
      { cached: MintedToken } | { response: ExecuteResponse; exchange: ExchangeMade }
    >(
      deps.inItemTokenLock,
      plan.tokenItem.id,
      named ? named.expiresAtMs - LOCK_GIVE_UP_MARGIN_MS : undefined,
      () => notSentInTime(plan.tokenItem.name, "another call held its token lock"),
      async (locked) => {
        if (!plan.answerIsExchange) {
          const cached = await locked.findAccessToken(
            plan.tokenItem.id,
            new Date(now() + TOKEN_REUSE_MARGIN_MS),
          );
          if (cached) return { cached };
        }
        // Read again under the lock: another replica may have rotated it since the plan was made.
        const refresh = plan.refreshItem ? await locked.findSealedValue(plan.refreshItem.id) : undefined;
        if (plan.refreshItem && !refresh)
          throw new AppError("not_found", `${plan.refreshItem.name} was deleted`);
        const response = await execute(
          mint({
            ...spec,
            inject: "bearer",
            exchange: {
              grant: plan.grant,
              tokenHost: plan.tokenHost,
              tokenPath: plan.tokenPath,
              clientAuthentication: plan.clientAuthentication,
              clientId: plan.clientId,
              clientSecret: plan.clientSecretItem ? sealedOf(plan.clientSecretItem) : undefined,
              refreshToken:
                plan.refreshItem && refresh
                  ? {
                      itemName: plan.refreshItem.name,
                      keyId: refresh.sealingKeyId,
                      sealedValue: Buffer.from(refresh.sealedValue),
                      username: "",
                    }
                  : undefined,
              headers: Object.entries(plan.provider.oauth.tokenHeaders).map(([name, value]) => ({
                name,
                value,
              })),
              scope: "",
              answerIsExchange: plan.answerIsExchange,
              idTokenOnly: false,
              accessItemName: plan.tokenItem.name,
              code: "",
              redirectUri: "",
              codeVerifier: undefined,
              refreshItemName: plan.refreshItem?.name ?? "",
            },
          }),
        );
        const isRefreshRotated = await storeRotated(locked, plan, organisationId, refresh, response);
        return { response, exchange: { isRefreshRotated } };
      },
    );
    if ("response" in locked) return locked;
    const credential = {
      itemName: plan.tokenItem.name,
      keyId: locked.cached.sealingKeyId,
      sealedValue: Buffer.from(locked.cached.sealedValue),
      username: "",
    };
    return { response: await execute(mint({ ...spec, credential, inject: "bearer" })) };
  }

  /**
   * Stores what the proxy minted and rotated; true when a rotated refresh token replaced the stored
   * one. A replace by name takes no token lock, so the refresh token or client secret the exchange
   * spent may have been replaced while it ran (a reconnect as another account): the access token
   * minted from it is then not kept (the answer still goes back), and each value spent is held
   * unchanged until this transaction ends, so a replace arriving now drops what is stored here.
   * A rotated refresh token is still stored while the spent one is (its own conditional UPDATE):
   * the provider retired the spent one, and the rotation is the same account's.
   */
  async function storeRotated(
    locked: ItemTokensRepo,
    plan: Extract<TokenPlan, { kind: "exchange" }>,
    organisationId: string,
    spentRefresh: SealedToken | undefined,
    response: ExecuteResponse,
  ): Promise<boolean> {
    if (!response.rotatedCredentials?.length) return false;
    const spent = [
      ...(plan.refreshItem && spentRefresh
        ? [{ itemId: plan.refreshItem.id, sealedValue: spentRefresh.sealedValue }]
        : []),
      ...(plan.clientSecretItem
        ? [{ itemId: plan.clientSecretItem.id, sealedValue: plan.clientSecretItem.sealedValue }]
        : []),
    ];
    const isSpentStillStored = await locked.holdIfUnchanged(spent);
    let isRefreshRotated = false;
    for (const rotated of response.rotatedCredentials) {
      const credential = rotated.credential;
      if (!credential) continue;
      const metadata = rotated.metadata;
      const sealed = { sealedValue: credential.sealedValue, sealingKeyId: credential.keyId };
      if (rotated.kind === TokenKind.TOKEN_KIND_ACCESS && metadata && isSpentStillStored) {
        const issuedAt = Number(metadata.issuedAtMs) || (deps.now ?? Date.now)();
        await locked.upsertAccessToken(plan.tokenItem.id, organisationId, {
          ...sealed,
          tokenLast4: metadata.tokenLast4,
          scope: metadata.scope,
          expiresAt: tokenExpiresAt(issuedAt, metadata.expiresInS),
        });
      }
      if (rotated.kind === TokenKind.TOKEN_KIND_REFRESH && plan.refreshItem && spentRefresh) {
        // The spent token is retired by the same statement that stores its rotation.
        const isStored = await locked.updateRotatedValue(plan.refreshItem.id, spentRefresh.sealedValue, {
          ...sealed,
          last4: metadata?.tokenLast4 ?? "",
        });
        isRefreshRotated ||= isStored;
      }
    }
    return isRefreshRotated;
  }

  /**
   * Writes an audit row; a failure is reported (its code only) and never stops the answer. True
   * when it was written.
   */
  async function recordSafely(event: AuditEvent): Promise<boolean> {
    try {
      await deps.recordEvent(event);
      return true;
    } catch (error) {
      deps.onAuditFailure?.(error);
      return false;
    }
  }
}

/**
 * Runs `fn` under the item's token lock, or gives up waiting for it at `giveUpAtMs` (the lock's
 * own wait has no end: another call holds it for as long as its exchange and call take). Once
 * given up, the lock, when it comes, runs nothing; once `fn` has begun, it is never given up, so
 * a call whose ticket may be on its way is never answered "not sent".
 */
async function inTokenLockUntil<T>(
  inItemTokenLock: ItemTokensRepo["inItemTokenLock"],
  itemId: string,
  giveUpAtMs: number | undefined,
  giveUp: () => AppError,
  fn: (locked: ItemTokensRepo) => Promise<T>,
): Promise<T> {
  if (giveUpAtMs === undefined) return inItemTokenLock(itemId, fn);
  let state: "waiting" | "inside" | "given_up" = "waiting";
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => {
        if (state !== "waiting") return;
        state = "given_up";
        reject(giveUp());
      },
      Math.max(0, giveUpAtMs - Date.now()),
    );
  });
  const entered = inItemTokenLock(itemId, async (locked) => {
    if (state === "given_up") return undefined;
    state = "inside";
    return { value: await fn(locked) };
  });
  // Given up, the wait goes on until the lock is free and then ends with nothing run (or fails):
  // nobody reads it any more.
  entered.catch(() => {});
  try {
    const outcome = await Promise.race([entered, gaveUp]);
    if (!outcome) throw giveUp();
    return outcome.value;
  } finally {
    clearTimeout(timer);
  }
}

/** The call spec for exactly this request (after the playlist rewrite of rule 3). */
function prepareCall(args: HttpRequestArgs, located: LocatedCredential) {
  const { item, host, path: validatedPath } = located;
  const { path, body, rewritten } = rewritePlaylistPath(host, args.method, validatedPath, args.body);
  const timeoutMs = args.timeout_ms ?? DEFAULT_TIMEOUT_MS;
  const spec: CallSpec = {
    credential: sealedOf(item),
    inject: item.inject,
    host,
    allowedHosts: [...item.allowedHosts],
    method: args.method,
    path,
    body: encodeRequestBody(body, args.content_type),
    contentType: body === undefined ? "" : (args.content_type ?? "application/json"),
    timeoutMs,
    headers: [],
    redact: [],
  };
  return { path, rewritten, spec, timeoutMs };
}

export type CallsService = ReturnType<typeof createCallsService>;
