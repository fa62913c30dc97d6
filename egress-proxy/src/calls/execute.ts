// Execute: one ticket in, one redacted answer out, as an ordered table of one-file steps over one
// OutgoingCall (steps/). The first step that refuses ends the call with its reason code; this
// file maps that refusal to the answer, the metrics and the call's one log line.
import type { ExecuteResponse, SignedTicket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import type { Attributes } from "@opentelemetry/api";
import type { Logger } from "pino";
import type { DestinationResolver } from "../destination/resolve.ts";
import type { SealingKeyring } from "../keys/sealing-keys.ts";
import type { Metrics } from "../metrics/metrics.ts";
import { telemetry } from "../telemetry.ts";
import type { TicketChecker, TicketSpender } from "../tickets/verify.ts";
import type { Upstream } from "../upstream/call.ts";
import {
  createOrganisationCalls,
  inOrganisationPlace,
  type OrganisationCalls,
} from "./organisation-calls.ts";
import { checkCall } from "./steps/check-call.ts";
import { claimTicket } from "./steps/claim-ticket.ts";
import { dialOrigin } from "./steps/dial-origin.ts";
import { injectIntoRequest } from "./steps/inject-credential.ts";
import { mintToken } from "./steps/mint-token.ts";
import { openCredentials } from "./steps/open-credentials.ts";
import type { CallStep, OutgoingCall } from "./steps/outgoing-call.ts";
import { prepareRedaction } from "./steps/prepare-redaction.ts";
import { redactAnswer } from "./steps/redact-answer.ts";
import { resolveDestination } from "./steps/resolve-destination.ts";
import { shapeResponse } from "./steps/shape-response.ts";
import { signRequest } from "./steps/sign-request.ts";
import { type CallTicket, verifyTicket } from "./steps/verify-ticket.ts";

export interface ExecuteDeps {
  /** Signature, audience, lifetime; spends nothing. */
  checkTicket: TicketChecker;
  /** Single use: the expiry again, then the id spent, right before anything is sent. */
  spendTicket: TicketSpender;
  keyring: Pick<SealingKeyring, "current" | "open">;
  resolver: DestinationResolver;
  upstream: Upstream;
  metrics: Metrics;
  logger: Logger;
  /** Wall clock for signing steps; Date.now unless a test fixes it. */
  now?: () => number;
  /**
   * The cap on each organisation's calls in flight, shared with FetchDocument and SendPush
   * (egress-proxy.ts); one of Execute's own when not given.
   */
  organisationCalls?: OrganisationCalls;
}

/**
 * The steps before the ticket is claimed: nothing is spent, opened or sent (DNS is asked, no
 * origin is), so a refusal here leaves the ticket unspent and reports `reached_origin: false`.
 * Before them, in `createExecute`: verify the ticket and re-check the call spec
 * (steps/verify-ticket.ts, check-call.ts).
 */
const PREPARE_STEPS: readonly CallStep[] = [resolveDestination];

/**
 * The steps after the ticket is claimed (steps/claim-ticket.ts), in order. Each advances the
 * OutgoingCall or throws an AppError with its reason code. Claiming sits as close before the first
 * send as it can without opening anything first: a process killed between the two leaves an
 * approval spent for a request that never left, so nothing slow runs between them.
 */
const CALL_STEPS: readonly CallStep[] = [
  openCredentials,
  // A provider token exchange (client credentials, refresh-token rotation) adds its sealed results
  // to call.rotatedCredentials and its tokens to call.redactionValues, before redaction is prepared.
  mintToken,
  injectIntoRequest,
  signRequest,
  // After inject and signing, so that what they added is redacted too; before anything is sent.
  prepareRedaction,
  dialOrigin,
  redactAnswer,
  shapeResponse,
];

/**
 * The rows that send the approved request. When the agent's call was the token exchange itself
 * (rule 7: a post to the provider's token endpoint), mint-token already holds the answer and these
 * rows have nothing left to send.
 */
const SENDING_STEPS: ReadonlySet<CallStep> = new Set([injectIntoRequest, signRequest, dialOrigin]);

/**
 * The steps that are spans of the agent call's trace (DECISIONS "Ledger and telemetry"): DNS and
 * the origin's answer here, the connect of a new connection in upstream/pool.ts. Their attributes
 * are names, addresses, the method and the status: never a header, a credential or a body.
 */
const TRACED_STEPS: ReadonlyMap<
  CallStep,
  { name: string; attributes(call: OutgoingCall): Attributes; after(call: OutgoingCall): Attributes }
> = new Map([
  [
    resolveDestination,
    {
      name: "DNS",
      attributes: (call: OutgoingCall) => ({ "server.address": call.host }),
      after: (call: OutgoingCall) =>
        call.destination ? { "network.peer.address": call.destination.address } : {},
    },
  ],
  [
    dialOrigin,
    {
      name: "origin answer",
      attributes: (call: OutgoingCall) => ({
        "server.address": call.host,
        "http.request.method": call.method,
      }),
      after: (call: OutgoingCall) => (call.answer ? { "http.response.status_code": call.answer.status } : {}),
    },
  ],
]);

function errorResponse(
  error: AppError,
  started: number,
  rotatedCredentials: ExecuteResponse["rotatedCredentials"],
): ExecuteResponse {
  const reachedOrigin = error.extra.reachedOrigin === true;
  return {
    reachedOrigin,
    // A body over the cap still came from the origin; the spec reports it as a 502.
    originStatus: error.code === "body_too_large" ? 502 : 0,
    body: Buffer.alloc(0),
    bodyTruncated: false,
    headers: [],
    error: { code: error.code, message: error.message },
    durationMs: Math.round(performance.now() - started),
    // A refresh token rotated before the failure is already spent at the provider: the new one
    // must still reach the store.
    rotatedCredentials,
    idToken: "",
  };
}

/**
 * The failure as the call reports it. Once the origin's answer is in hand (`hasAnswer`), no later
 * failure (redaction, shaping) may report the request as unsent, or the control plane would give
 * a spent one-call approval back and the same request could go out again.
 */
function toCallError(caught: unknown, hasAnswer: boolean): AppError {
  const failure =
    caught instanceof AppError
      ? caught
      : new AppError("internal", "the call failed inside the proxy", { cause: caught });
  if (!hasAnswer || failure.extra.reachedOrigin === true) return failure;
  return new AppError(failure.code, failure.message, {
    cause: failure.cause,
    extra: { ...failure.extra, reachedOrigin: true },
  });
}

export function createExecute(
  deps: ExecuteDeps,
): (signed: SignedTicket | undefined) => Promise<ExecuteResponse> {
  const now = deps.now ?? Date.now;
  const organisationCalls = deps.organisationCalls ?? createOrganisationCalls();
  return async (signed) => {
    const startedAt = performance.now();
    // Ticket failures are errors of the link, not of the call: they propagate as gRPC errors, so
    // a replayed or fenced ticket is never reported as a request that did not leave (which would
    // give its approval back). Verified before spent, so an unsigned ticket never burns an id.
    const ticket = await verifyTicket(signed, deps);
    // Past its organisation's cap the call is refused as not started (a gRPC error, like a
    // draining replica's), before DNS and before the ticket is spent.
    return inOrganisationPlace(organisationCalls, ticket.organisationId, () => runCall(ticket, startedAt));
  };

  /** The call of a verified ticket, from the spec check to its answer or its refusal. */
  async function runCall(ticket: CallTicket, startedAt: number): Promise<ExecuteResponse> {
    let call: OutgoingCall | undefined;
    try {
      call = checkCall(ticket, { now, startedAt });
      for (const step of PREPARE_STEPS) {
        const pending = runStep(step, call);
        if (pending) await pending;
      }
    } catch (caught) {
      return refused(ticket, call, caught, startedAt);
    }
    await claimTicket(call, deps);
    try {
      for (const step of CALL_STEPS) {
        if (call.answer !== undefined && SENDING_STEPS.has(step)) continue;
        // A step that finished synchronously is not awaited: no promise and no turn of the
        // microtask queue for each of the table's synchronous rows.
        const pending = runStep(step, call);
        if (pending) await pending;
      }
      const response = call.response;
      if (!response) throw new AppError("internal", "the call ended without a response");
      deps.metrics.countCall("answered");
      deps.logger.info(
        {
          ticket: ticket.id.slice(0, 8),
          host: call.host,
          method: call.method,
          status: response.originStatus,
          ms: Math.round(performance.now() - startedAt),
        },
        "call answered",
      );
      return response;
    } catch (caught) {
      return refused(ticket, call, caught, startedAt);
    }
  }

  /**
   * One row of the table, a span of the call's trace when it is one of TRACED_STEPS; a promise
   * only when the row has something to wait for.
   */
  function runStep(step: CallStep, call: OutgoingCall): void | Promise<void> {
    const traced = TRACED_STEPS.get(step);
    if (!traced || !telemetry().enabled) return step(call, deps);
    return telemetry().inSpan(traced.name, traced.attributes(call), async () => {
      await step(call, deps);
      telemetry().annotate(traced.after(call));
    });
  }

  /** The failure as Execute answers it, counted and logged once. */
  function refused(
    ticket: CallTicket,
    call: OutgoingCall | undefined,
    caught: unknown,
    startedAt: number,
  ): ExecuteResponse {
    const hasAnswer = call?.answer !== undefined;
    const error = toCallError(caught, hasAnswer);
    if (error.code === "internal") deps.logger.error({ err: caught }, "call failed");
    deps.metrics.countCall(error.extra.reachedOrigin === true ? "failed_after_send" : "refused");
    deps.metrics.countDenial(error.code);
    deps.logger.warn(
      {
        ticket: ticket.id.slice(0, 8),
        host: call?.host ?? ticket.call.host.slice(0, 253),
        code: error.code,
        // Which answer of DNS the public-address rule refused, and in which block.
        ...(call?.refusedAddress ? { verdict: call.refusedAddress } : {}),
      },
      "call refused",
    );
    return errorResponse(error, startedAt, call?.rotatedCredentials ?? []);
  }
}
