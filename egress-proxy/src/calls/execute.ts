// Execute: one ticket in, one redacted answer out. Each step is a named check; the first that
// refuses ends the call with its reason code, and nothing reaches the origin.
import type { CallSpec, ExecuteResponse, Header, SignedTicket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { parseInjectMode } from "@latch/shared/inject/inject-mode";
import { validateCallerHeaders } from "@latch/shared/requests/headers";
import { checkHostname } from "@latch/shared/requests/host";
import { validateRequestPath } from "@latch/shared/requests/path";
import type { Logger } from "pino";
import type { createDestinationResolver } from "../destination/resolve.ts";
import { injectCredential } from "../inject/inject.ts";
import type { SealingKeyring } from "../keys/sealing-keys.ts";
import type { Metrics } from "../metrics/metrics.ts";
import { createRedactor } from "../redact/redactor.ts";
import type { TicketVerifier } from "../tickets/verify.ts";
import type { createUpstream } from "../upstream/call.ts";
import {
  ALLOWED_CONTENT_TYPES,
  ALLOWED_METHODS,
  DEFAULT_TIMEOUT_MS,
  MAX_TIMEOUT_MS,
  MIN_TIMEOUT_MS,
  MODEL_BODY_LIMIT_BYTES,
} from "./call-limits.ts";

export interface ExecuteDeps {
  verifyTicket: TicketVerifier;
  keyring: SealingKeyring;
  resolver: ReturnType<typeof createDestinationResolver>;
  upstream: ReturnType<typeof createUpstream>;
  metrics: Metrics;
  logger: Logger;
}

/** A call the proxy will make, after every check of the ticket's call spec. */
interface CheckedCall {
  host: string;
  method: string;
  path: string;
  headers: { name: string; value: string }[];
  body: Uint8Array | undefined;
  contentType: string | undefined;
  timeoutMs: number;
}

/**
 * The control plane already validated all of this, but the proxy is the last line: it re-checks
 * the call spec on its own, so that a bug or compromise upstream cannot widen what is sent.
 */
export function checkCallSpec(call: CallSpec): CheckedCall {
  const host = checkHostname(call.host);
  if (!host.ok) throw new AppError(host.code, host.message);
  if (!call.allowedHosts.includes(host.host)) {
    throw new AppError("host_mismatch", `the credential is not allowed for host ${host.host}`);
  }
  const path = validateRequestPath(call.path);
  if (!path.ok) throw new AppError(path.code, path.message);
  const method = call.method.toUpperCase();
  if (!ALLOWED_METHODS.has(method))
    throw new AppError("invalid_method", `method ${call.method.slice(0, 16)} is not allowed`);
  const timeoutMs = call.timeoutMs === 0 ? DEFAULT_TIMEOUT_MS : call.timeoutMs;
  if (timeoutMs < MIN_TIMEOUT_MS || timeoutMs > MAX_TIMEOUT_MS) {
    throw new AppError(
      "invalid_timeout",
      `timeout_ms must be between ${MIN_TIMEOUT_MS} and ${MAX_TIMEOUT_MS}`,
    );
  }
  const contentType = call.contentType || undefined;
  if (contentType !== undefined && !ALLOWED_CONTENT_TYPES.has(contentType)) {
    throw new AppError(
      "invalid_content_type",
      "content_type must be application/json or application/x-www-form-urlencoded",
    );
  }
  const hasBody = call.body.length > 0;
  if (hasBody && method === "GET") {
    throw new AppError("invalid_request", "a GET request cannot carry a body");
  }
  return {
    host: host.host,
    method,
    path: path.path,
    headers: validateCallerHeaders(call.headers),
    body: hasBody ? call.body : undefined,
    contentType: hasBody ? (contentType ?? "application/json") : undefined,
    timeoutMs,
  };
}

function errorResponse(error: AppError, started: number): ExecuteResponse {
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
    rotatedCredentials: [],
  };
}

/** Cuts a body to what the model may see without splitting a UTF-8 character. */
function truncateForModel(body: Buffer): { body: Buffer; truncated: boolean } {
  if (body.length <= MODEL_BODY_LIMIT_BYTES) return { body, truncated: false };
  let end = MODEL_BODY_LIMIT_BYTES;
  // Step back over continuation bytes (10xxxxxx) so the cut lands on a character boundary.
  while (end > 0 && ((body[end] ?? 0) & 0xc0) === 0x80) end--;
  return { body: body.subarray(0, end), truncated: true };
}

export function createExecute(
  deps: ExecuteDeps,
): (signed: SignedTicket | undefined) => Promise<ExecuteResponse> {
  return async (signed) => {
    const started = performance.now();
    // Ticket failures are errors of the link, not of the call: they propagate as gRPC errors.
    const ticket = await deps.verifyTicket(signed);
    const spec = ticket.call;
    if (!spec?.credential) throw new AppError("ticket_invalid", "the ticket carries no call");

    let call: CheckedCall | undefined;
    // Set once the origin's answer is in hand: from then on no failure (redaction, shaping) may
    // report the request as unsent, or the control plane would give a spent approval back.
    let hasAnswer = false;
    try {
      call = checkCallSpec(spec);
      const secret = deps.keyring.open(spec.credential.keyId, spec.credential.sealedValue);
      const redactor = createRedactor([
        { secret, username: spec.credential.username || undefined },
        ...spec.redact.map((c) => ({
          secret: deps.keyring.open(c.keyId, c.sealedValue),
          username: c.username || undefined,
        })),
      ]);
      const outgoing = injectCredential(
        { path: call.path, headers: call.headers },
        parseInjectMode(spec.inject),
        {
          secret,
          username: spec.credential.username || undefined,
          itemName: spec.credential.itemName,
        },
      );

      const deadline = AbortSignal.timeout(call.timeoutMs);
      const destination = await deps.resolver.resolve(call.host, deadline);
      const remainingMs = Math.max(1, call.timeoutMs - (performance.now() - started));
      const response = await deps.upstream.call({
        destination,
        method: call.method,
        path: outgoing.path,
        headers: outgoing.headers,
        body: call.body,
        contentType: call.contentType,
        timeoutMs: remainingMs,
      });
      hasAnswer = true;

      const { body, truncated } = truncateForModel(redactor.redactBytes(response.body));
      const headers: Header[] = redactor.redactHeaders(response.headers);
      deps.metrics.countCall("answered");
      deps.logger.info(
        {
          ticket: ticket.id.slice(0, 8),
          host: call.host,
          method: call.method,
          status: response.status,
          ms: Math.round(performance.now() - started),
        },
        "call answered",
      );
      return {
        reachedOrigin: true,
        originStatus: response.status,
        body,
        bodyTruncated: truncated,
        headers,
        error: undefined,
        durationMs: Math.round(performance.now() - started),
        rotatedCredentials: [],
      };
    } catch (caught) {
      const failure =
        caught instanceof AppError
          ? caught
          : new AppError("internal", "the call failed inside the proxy", { cause: caught });
      const error =
        hasAnswer && failure.extra.reachedOrigin !== true
          ? new AppError(failure.code, failure.message, {
              cause: failure.cause,
              extra: { ...failure.extra, reachedOrigin: true },
            })
          : failure;
      if (error.code === "internal") deps.logger.error({ err: caught }, "call failed");
      deps.metrics.countCall(error.extra.reachedOrigin === true ? "failed_after_send" : "refused");
      deps.metrics.countDenial(error.code);
      deps.logger.warn(
        { ticket: ticket.id.slice(0, 8), host: call?.host ?? spec.host.slice(0, 253), code: error.code },
        "call refused",
      );
      return errorResponse(error, started);
    }
  };
}
