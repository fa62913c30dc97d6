// Execute: one ticket in, one redacted answer out, as an ordered table of one-file steps over one
// OutgoingCall (steps/). The first step that refuses ends the call with its reason code; this
// file maps that refusal to the answer, the metrics and the call's one log line.
import type { ExecuteResponse, SignedTicket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import type { Logger } from "pino";
import type { DestinationResolver } from "../destination/resolve.ts";
import type { SealingKeyring } from "../keys/sealing-keys.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { TicketChecker, TicketSpender } from "../tickets/verify.ts";
import type { Upstream } from "../upstream/call.ts";
import { checkCall } from "./steps/check-call.ts";
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
import { spendTicket } from "./steps/spend-ticket.ts";
import { verifyTicket } from "./steps/verify-ticket.ts";

export interface ExecuteDeps {
  /** Signature, audience, lifetime; spends nothing. */
  checkTicket: TicketChecker;
  /** Single use, after the checks. */
  spendTicket: TicketSpender;
  keyring: SealingKeyring;
  resolver: DestinationResolver;
  upstream: Upstream;
  metrics: Metrics;
  logger: Logger;
  /** Wall clock for signing steps; Date.now unless a test fixes it. */
  now?: () => number;
}

/**
 * The steps after the call spec is checked, in order. Each advances the OutgoingCall or throws an
 * AppError with its reason code. Before them, in `createExecute`: verify the ticket, spend it,
 * re-check the call spec (steps/verify-ticket.ts, spend-ticket.ts, check-call.ts).
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
  resolveDestination,
  dialOrigin,
  redactAnswer,
  shapeResponse,
];

/**
 * The rows that send the approved request. When the agent's call was the token exchange itself
 * (rule 7: a post to the provider's token endpoint), mint-token already holds the answer and these
 * rows have nothing left to send.
 */
const SENDING_STEPS: ReadonlySet<CallStep> = new Set([
  injectIntoRequest,
  signRequest,
  resolveDestination,
  dialOrigin,
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
  return async (signed) => {
    const startedAt = performance.now();
    // Ticket failures are errors of the link, not of the call: they propagate as gRPC errors.
    // Verified before spent, so that an unsigned ticket can never burn a real ticket's id.
    const ticket = await verifyTicket(signed, deps);
    await spendTicket(ticket, deps);

    let call: OutgoingCall | undefined;
    try {
      call = checkCall(ticket, { now, startedAt });
      for (const step of CALL_STEPS) {
        if (call.answer !== undefined && SENDING_STEPS.has(step)) continue;
        await step(call, deps);
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
  };
}
