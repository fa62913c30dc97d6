// The proxy re-checks the call spec on its own and builds the OutgoingCall from it.
import { AppError } from "@latch/shared/errors";
import { parseInjectMode } from "@latch/shared/inject/inject-mode";
import { validateCallerHeaders } from "@latch/shared/requests/headers";
import { checkHostname, type HostCheck } from "@latch/shared/requests/host";
import { validateRequestPath } from "@latch/shared/requests/path";
import {
  ALLOWED_CONTENT_TYPES,
  ALLOWED_METHODS,
  DEFAULT_TIMEOUT_MS,
  MAX_TIMEOUT_MS,
  MIN_TIMEOUT_MS,
} from "../call-limits.ts";
import type { OutgoingCall } from "./outgoing-call.ts";
import type { CallTicket } from "./verify-ticket.ts";

/** Hosts that passed checkHostname, with their checked form: a pure function of the text. */
const checkedHosts = new Map<string, string>();
const MAX_CHECKED_HOSTS = 1024;

/** checkHostname, remembered for hosts that pass (a proxy sees the same few hosts all day). */
function checkHost(text: string): HostCheck {
  const known = checkedHosts.get(text);
  if (known !== undefined) return { ok: true, host: known };
  const checked = checkHostname(text);
  if (checked.ok) {
    if (checkedHosts.size >= MAX_CHECKED_HOSTS) checkedHosts.delete(checkedHosts.keys().next().value!);
    checkedHosts.set(text, checked.host);
  }
  return checked;
}

/**
 * The control plane already validated all of this, but the proxy is the last line: it re-checks
 * the call spec on its own, so that a bug or compromise upstream cannot widen what is sent.
 */
export function checkCall(ticket: CallTicket, clock: { now: () => number; startedAt: number }): OutgoingCall {
  const spec = ticket.call;
  const host = checkHost(spec.host);
  if (!host.ok) throw new AppError(host.code, host.message);
  if (!spec.allowedHosts.includes(host.host)) {
    throw new AppError("host_mismatch", `the credential is not allowed for host ${host.host}`);
  }
  const path = validateRequestPath(spec.path);
  if (!path.ok) throw new AppError(path.code, path.message);
  const method = spec.method.toUpperCase();
  if (!ALLOWED_METHODS.has(method))
    throw new AppError("invalid_method", `method ${spec.method.slice(0, 16)} is not allowed`);
  const timeoutMs = spec.timeoutMs === 0 ? DEFAULT_TIMEOUT_MS : spec.timeoutMs;
  if (timeoutMs < MIN_TIMEOUT_MS || timeoutMs > MAX_TIMEOUT_MS) {
    throw new AppError(
      "invalid_timeout",
      `timeout_ms must be between ${MIN_TIMEOUT_MS} and ${MAX_TIMEOUT_MS}`,
    );
  }
  const contentType = spec.contentType || undefined;
  if (contentType !== undefined && !ALLOWED_CONTENT_TYPES.has(contentType)) {
    throw new AppError(
      "invalid_content_type",
      "content_type must be application/json or application/x-www-form-urlencoded",
    );
  }
  const hasBody = spec.body.length > 0;
  if (hasBody && method === "GET") {
    throw new AppError("invalid_request", "a GET request cannot carry a body");
  }
  const headers = validateCallerHeaders(spec.headers);
  return {
    ticketId: ticket.id,
    ticketExpiresAtMs: ticket.expiresAtMs,
    organisationId: ticket.organisationId,
    spec,
    now: clock.now,
    startedAt: clock.startedAt,
    method,
    host: host.host,
    path: path.path,
    headers,
    callerHeaders: headers.map((header) => ({ ...header })),
    body: hasBody ? spec.body : undefined,
    contentType: hasBody ? (contentType ?? "application/json") : undefined,
    timeoutMs,
    inject: parseInjectMode(spec.inject),
    credential: undefined,
    redactionValues: [],
    redaction: undefined,
    destination: undefined,
    refusedAddress: undefined,
    answer: undefined,
    redactedAnswer: undefined,
    rotatedCredentials: [],
    idToken: undefined,
    response: undefined,
  };
}
