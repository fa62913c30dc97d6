// SendPush: one Web Push message (RFC 8030) POSTed to a push service for the control plane
// (DECISIONS "Approvals that reach the operator"), so that the control plane itself opens no
// outbound connection. The control plane encrypted the payload (RFC 8291) and signed the VAPID
// JWT (RFC 8292); nothing here is secret to the proxy and nothing is opened. The same rules as a
// call: a signed single-use ticket, the host and path rules, DNS resolved once and every answer
// classified, TLS to the host, redirects never followed, one deadline. Only the headers a push
// message needs go out, and only a body a push service must accept (4096 bytes).

import type { SendPushResponse, SignedTicket, Ticket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import type { Logger } from "pino";
import type { DestinationResolver } from "../destination/resolve.ts";
import type { Metrics } from "../metrics/metrics.ts";
import { partOfKind } from "../tickets/ticket-kind.ts";
import type { TicketChecker, TicketSpender } from "../tickets/verify.ts";
import type { Upstream } from "../upstream/call.ts";
import { checkTarget } from "./check-target.ts";
import {
  createOrganisationCalls,
  inOrganisationPlace,
  type OrganisationCalls,
} from "./organisation-calls.ts";

/** RFC 8030 7.2: a push service must accept a message of at most 4096 octets. */
export const MAX_PUSH_BYTES = 4096;

/**
 * The request headers of a push message (RFC 8030 5.2-5.4, RFC 8188, RFC 8292), each checked. A
 * Map, so that a name an object inherits (`constructor`, `__proto__`) is no header of the table.
 */
const PUSH_HEADERS: ReadonlyMap<string, RegExp> = new Map([
  ["ttl", /^\d{1,7}$/],
  ["urgency", /^(?:very-low|low|normal|high)$/],
  // RFC 8030 5.4: up to 32 characters of the URL-safe base64 alphabet.
  ["topic", /^[A-Za-z0-9_-]{1,32}$/],
  ["content-encoding", /^aes128gcm$/],
  // RFC 8292 3: "vapid t=<JWT>, k=<key>", both base64url.
  ["authorization", /^vapid t=[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+, k=[A-Za-z0-9_-]+$/],
]);

export interface SendPushDeps {
  checkTicket: TicketChecker;
  spendTicket: TicketSpender;
  resolver: DestinationResolver;
  upstream: Upstream;
  metrics: Metrics;
  logger: Logger;
  /** The cap on each organisation's calls in flight, shared with Execute; its own when not given. */
  organisationCalls?: OrganisationCalls;
}

/** The push message's headers, each one of PUSH_HEADERS and of its form; anything else refused. */
function checkPushHeaders(headers: readonly { name: string; value: string }[]) {
  const seen = new Set<string>();
  return headers.map(({ name, value }) => {
    const lower = name.toLowerCase();
    const form = PUSH_HEADERS.get(lower);
    if (!form || seen.has(lower) || !form.test(value) || value.length > 2048) {
      throw new AppError("invalid_header", `a push message may not carry this ${lower.slice(0, 40)} header`);
    }
    seen.add(lower);
    return { name: lower, value };
  });
}

export function createSendPush(
  deps: SendPushDeps,
): (signed: SignedTicket | undefined) => Promise<SendPushResponse> {
  const organisationCalls = deps.organisationCalls ?? createOrganisationCalls();
  return async (signed) => {
    const startedAt = performance.now();
    const ticket = await deps.checkTicket(signed);
    const spec = partOfKind(ticket, "push", "the ticket carries no push message");
    // Past its organisation's cap: refused as not started (organisation-calls.ts), unspent.
    return inOrganisationPlace(organisationCalls, ticket.organisationId, () =>
      sendPush(ticket, spec, startedAt),
    );
  };

  /** The push message of a verified ticket: spent, then sent. */
  async function sendPush(
    ticket: Ticket,
    spec: NonNullable<Ticket["push"]>,
    startedAt: number,
  ): Promise<SendPushResponse> {
    await deps.spendTicket(ticket);
    let reachedOrigin = false;
    try {
      const target = checkTarget(spec);
      if (spec.body.length > MAX_PUSH_BYTES) {
        throw new AppError("payload_too_large", `a push message is at most ${MAX_PUSH_BYTES} bytes`);
      }
      const headers = checkPushHeaders(spec.headers);
      const destination = await deps.resolver.resolve(target.host, AbortSignal.timeout(spec.timeoutMs));
      const remainingMs = Math.max(1, spec.timeoutMs - (performance.now() - startedAt));
      const answer = await deps.upstream.call({
        organisationId: ticket.organisationId,
        destination,
        method: "POST",
        path: target.path,
        headers,
        body: spec.body,
        contentType: "application/octet-stream",
        timeoutMs: remainingMs,
      });
      reachedOrigin = true;
      const retryAfter = answer.headers.find((h) => h.name === "retry-after")?.value ?? "";
      deps.metrics.countCall("answered");
      deps.logger.info(
        { ticket: ticket.id.slice(0, 8), host: target.host, status: answer.status, push: true },
        "push message sent",
      );
      return {
        reachedOrigin,
        originStatus: answer.status,
        error: undefined,
        durationMs: Math.round(performance.now() - startedAt),
        retryAfterS: /^\d{1,6}$/.test(retryAfter) ? Number(retryAfter) : 0,
      };
    } catch (caught) {
      const error =
        caught instanceof AppError
          ? caught
          : new AppError("internal", "the push failed inside the proxy", { cause: caught });
      if (error.code === "internal") deps.logger.error({ err: caught }, "push failed");
      const didReach = reachedOrigin || error.extra.reachedOrigin === true;
      deps.metrics.countCall(didReach ? "failed_after_send" : "refused");
      deps.metrics.countDenial(error.code);
      deps.logger.warn(
        { ticket: ticket.id.slice(0, 8), host: spec.host.slice(0, 253), code: error.code },
        "push refused",
      );
      return {
        reachedOrigin: didReach,
        originStatus: 0,
        error: { code: error.code, message: error.message },
        durationMs: Math.round(performance.now() - startedAt),
        retryAfterS: 0,
      };
    }
  }
}
