// Which request headers an agent may set on a brokered call, and the header-name rules that the
// inject modes share: RFC 9110 tokens, and the names the proxy or the credential own.
import { AppError } from "../errors.ts";

export interface HeaderPair {
  name: string;
  value: string;
}

export const MAX_CALLER_HEADERS = 32;
export const MAX_HEADER_NAME_LENGTH = 256;
export const MAX_HEADER_VALUE_LENGTH = 8 * 1024;

// RFC 9110 section 5.6.2: token = 1*tchar; tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" /
// "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA. Anything else (space, colon, CR, LF,
// non-ASCII) in a name is how a second header or a second request gets smuggled in.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

// A caller value may hold HTAB, SP and visible ASCII only. CR/LF/NUL split or end a header
// (request splitting, RFC 9112 section 2.2); other controls and DEL are refused by RFC 9110
// section 5.5; bytes above 0x7E are refused because Node writes header strings as latin1, so
// non-ASCII would reach the origin as different bytes than the agent meant.
const SAFE_VALUE = /^[\t\x20-\x7e]*$/;

/** Is `name` an RFC 9110 token (the grammar of a header name and of a cookie name)? */
export function isHeaderToken(name: string): boolean {
  return TOKEN.test(name);
}

/** Is every character of `value` HTAB, SP or visible ASCII (safe to send as a header value)? */
export function isSafeHeaderValue(value: string): boolean {
  return SAFE_VALUE.test(value);
}

const TRANSPORT = "the proxy sets connection and message framing headers itself";

/**
 * Headers the egress proxy owns on every outgoing request, lowercase. Neither the agent nor an
 * inject mode may set them: they decide where the request goes, how it is framed, and what
 * the proxy can still see in the answer (which redaction depends on).
 */
export const PROXY_OWNED_HEADERS: ReadonlyMap<string, string> = new Map([
  // The pinned destination decides the authority; a second Host is a routing confusion.
  ["host", "the proxy sends the Host of the approved destination"],
  // Hop-by-hop headers (RFC 9110 section 7.6.1) and framing headers (RFC 9112 section 6): a
  // caller-chosen Transfer-Encoding or Content-Length is the classic request-smuggling lever.
  ["connection", TRANSPORT],
  ["keep-alive", TRANSPORT],
  ["proxy-connection", TRANSPORT],
  ["te", TRANSPORT],
  ["trailer", TRANSPORT],
  ["transfer-encoding", TRANSPORT],
  ["upgrade", TRANSPORT],
  ["http2-settings", TRANSPORT],
  ["content-length", TRANSPORT],
  ["expect", TRANSPORT],
  // The body is sent exactly as given with the content_type argument; a caller Content-Type
  // would bypass the two allowed types and Content-Encoding would misdescribe the bytes.
  ["content-type", "the proxy sets it from the content_type of the call"],
  ["content-encoding", "the proxy sends the body as given, unencoded"],
  // Redaction must see the plain answer: a compressed answer the proxy did not ask for, or a
  // byte range cut through the middle of a secret, would carry the credential past it.
  [
    "accept-encoding",
    "the proxy negotiates and decodes the response encoding itself, so that redaction sees the plain body",
  ],
  ["range", "a byte range could cut a secret into pieces that redaction cannot recognise"],
  ["if-range", "a byte range could cut a secret into pieces that redaction cannot recognise"],
]);

const CREDENTIAL_SLOT = "it is where a credential goes, and Latch injects the credential";
const APPROVED_REQUEST = "it would change the method or path that the operator approved";

// Headers only the agent is kept from: the credential's slots (so an agent cannot swap in its
// own credential or smuggle a second one beside the injected one) and the method and path
// override headers that many frameworks honour (so a GET the operator approved cannot become a
// DELETE, or /v1/me become /v1/admin, at the origin).
const CALLER_REFUSED_HEADERS: ReadonlyMap<string, string> = new Map([
  ["authorization", CREDENTIAL_SLOT],
  ["cookie", CREDENTIAL_SLOT],
  ["x-http-method-override", APPROVED_REQUEST],
  ["x-http-method", APPROVED_REQUEST],
  ["x-method-override", APPROVED_REQUEST],
  ["x-original-url", APPROVED_REQUEST],
  ["x-rewrite-url", APPROVED_REQUEST],
  ["x-original-method", APPROVED_REQUEST],
]);

/** Why the proxy owns `lowerName` (any `proxy-*` header included), or undefined when it does not. */
export function findProxyOwnedReason(lowerName: string): string | undefined {
  const reason = PROXY_OWNED_HEADERS.get(lowerName);
  if (reason !== undefined) return reason;
  // Proxy-Authorization, Proxy-Authenticate and any future proxy-* header address an
  // intermediary, never the origin; one from the caller could authenticate to a proxy on path.
  if (lowerName.startsWith("proxy-")) return "proxy-* headers address an intermediary, not the origin";
  return undefined;
}

function findCallerRefusedReason(lowerName: string): string | undefined {
  return findProxyOwnedReason(lowerName) ?? CALLER_REFUSED_HEADERS.get(lowerName);
}

/**
 * Checks the headers an agent asked for and returns a normalised copy (lowercase names, value
 * with surrounding spaces and tabs removed as RFC 9110 section 5.5 says a receiver would).
 * Throws `AppError("invalid_header")` naming the header when it is valid to print; a value is
 * never echoed, because an agent may put anything there.
 *
 * @example validateCallerHeaders([{ name: "Accept", value: "application/json" }])
 *   // [{ name: "accept", value: "application/json" }]
 */
export function validateCallerHeaders(headers: readonly HeaderPair[]): HeaderPair[] {
  if (!Array.isArray(headers))
    throw new AppError("invalid_header", "headers must be a list of name and value pairs");
  if (headers.length > MAX_CALLER_HEADERS) {
    throw new AppError(
      "invalid_header",
      `at most ${MAX_CALLER_HEADERS} headers may be sent, got ${headers.length}`,
    );
  }
  return headers.map((header, index) => validateCallerHeader(header, index + 1));
}

function validateCallerHeader(header: HeaderPair, position: number): HeaderPair {
  const { name, value } = (header ?? {}) as Partial<HeaderPair>;
  if (typeof name !== "string" || typeof value !== "string") {
    throw new AppError("invalid_header", `header #${position} must have a string name and a string value`);
  }
  // A name is only printed once it is known to be a short token: an invalid one may carry CR/LF
  // into a log line, so it is referred to by position instead.
  if (name.length === 0) throw new AppError("invalid_header", `header #${position} has an empty name`);
  if (name.length > MAX_HEADER_NAME_LENGTH) {
    throw new AppError(
      "invalid_header",
      `header #${position} has a name longer than ${MAX_HEADER_NAME_LENGTH} characters`,
    );
  }
  if (!isHeaderToken(name)) {
    throw new AppError(
      "invalid_header",
      `header #${position} has a name that is not an HTTP token (RFC 9110 section 5.6.2: letters, digits and !#$%&'*+-.^_\`|~ only)`,
    );
  }
  const lowerName = name.toLowerCase();
  const reason = findCallerRefusedReason(lowerName);
  if (reason !== undefined)
    throw new AppError("invalid_header", `header ${lowerName} cannot be set by the caller: ${reason}`);
  if (value.length > MAX_HEADER_VALUE_LENGTH) {
    throw new AppError(
      "invalid_header",
      `the value of header ${lowerName} is longer than ${MAX_HEADER_VALUE_LENGTH} characters`,
    );
  }
  if (!isSafeHeaderValue(value)) {
    throw new AppError(
      "invalid_header",
      `the value of header ${lowerName} may contain only printable ASCII, spaces and tabs (no CR, LF, NUL or other control characters)`,
    );
  }
  // The value is ASCII by now, so trim() removes exactly the SP and HTAB around it.
  return { name: lowerName, value: value.trim() };
}
