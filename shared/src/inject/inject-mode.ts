// Inject modes: where a stored credential goes in the outgoing request. Parsed when an item is
// stored (control plane) and again when a ticket arrives (egress proxy), by this one parser.
import { AppError } from "../errors.ts";
import { findProxyOwnedReason, isHeaderToken, MAX_HEADER_NAME_LENGTH } from "../requests/headers.ts";

export type InjectMode =
  | { kind: "bearer" }
  | { kind: "basic" }
  | { kind: "header"; name: string }
  | { kind: "query"; param: string }
  | { kind: "cookie"; name: string }
  /** AWS Signature Version 4: username = access key id, value = secret access key. */
  | { kind: "sigv4" }
  /** The body signed the way that provider signs its webhooks (DECISIONS "Providers"). */
  | { kind: "hmac"; provider: HmacProvider }
  /** A provider app credential (username = client id): the control plane plans a token exchange
   * (spec 4.2 rule 7) and the proxy injects the minted token as a bearer. */
  | { kind: "client_credentials" }
  /** `<ITEM>_REFRESH`: a user refresh token, exchanged for an access token before each call. */
  | { kind: "refresh" };

/** The providers whose webhook signature scheme `hmac:<provider>_sig` reproduces. */
export const HMAC_PROVIDERS = ["stripe", "slack", "github"] as const;
export type HmacProvider = (typeof HMAC_PROVIDERS)[number];

/** Inject modes that sign the request rather than place the value in one slot. */
export function isSigningMode(mode: InjectMode): boolean {
  return mode.kind === "sigv4" || mode.kind === "hmac";
}

/** The modes this version accepts, spelled as an operator writes them (for messages and schemas). */
export const SUPPORTED_INJECT_MODES: readonly string[] = Object.freeze([
  "bearer",
  "basic",
  "header:<name>",
  "query:<param>",
  "cookie:<name>",
  "client_credentials",
  "refresh",
  "sigv4",
  ...HMAC_PROVIDERS.map((provider) => `hmac:${provider}_sig`),
]);

const SUPPORTED_LIST = `supported modes are ${SUPPORTED_INJECT_MODES.join(", ")}`;

// RFC 3986 section 2.3 unreserved characters: a name that needs no encoding, so the name the
// operator stored is byte for byte the name the origin receives.
const QUERY_PARAM = /^[A-Za-z0-9._~-]{1,128}$/;

// kind ":" plus the longest argument; anything longer is refused before any other work.
const MAX_MODE_LENGTH = 7 + MAX_HEADER_NAME_LENGTH;

function refuse(message: string): never {
  throw new AppError("invalid_inject", message);
}

/**
 * Parses an inject mode. Throws `AppError("invalid_inject")` with a sentence that never repeats
 * the raw text back (an operator who pasted the secret into the wrong field must not see it
 * land in an error or a log); only names from Latch's own lists are printed.
 *
 * `header:Authorization` is allowed: it sends the secret as the whole Authorization value, for
 * APIs whose scheme is neither Bearer nor Basic (the operator stores e.g. `token abc...`).
 *
 * @example parseInjectMode("header:X-Api-Key") // { kind: "header", name: "X-Api-Key" }
 */
export function parseInjectMode(raw: string): InjectMode {
  if (typeof raw !== "string" || raw.length === 0) refuse(`an inject mode is required; ${SUPPORTED_LIST}`);
  if (raw.length > MAX_MODE_LENGTH)
    refuse(`the inject mode is longer than ${MAX_MODE_LENGTH} characters; ${SUPPORTED_LIST}`);
  if (raw === "bearer") return { kind: "bearer" };
  if (raw === "basic") return { kind: "basic" };
  if (raw === "sigv4") return { kind: "sigv4" };
  if (raw === "client_credentials") return { kind: "client_credentials" };
  if (raw === "refresh") return { kind: "refresh" };
  const hmac = HMAC_PROVIDERS.find((provider) => raw === `hmac:${provider}_sig`);
  if (hmac !== undefined) return { kind: "hmac", provider: hmac };
  if (raw.startsWith("hmac:")) refuse(`unknown hmac signing scheme; ${SUPPORTED_LIST}`);

  const colon = raw.indexOf(":");
  const kind = colon === -1 ? raw : raw.slice(0, colon);
  const argument = colon === -1 ? "" : raw.slice(colon + 1);
  if (kind === "header" || kind === "query" || kind === "cookie") {
    if (kind === "header") return { kind, name: checkHeaderName(argument) };
    if (kind === "query") return { kind, param: checkQueryParam(argument) };
    return { kind, name: checkCookieName(argument) };
  }
  refuse(`unknown inject mode; ${SUPPORTED_LIST}`);
}

function checkHeaderName(name: string): string {
  if (name.length === 0) refuse("header:<name> needs a header name, for example header:X-Api-Key");
  if (!isHeaderToken(name)) {
    refuse(
      "header:<name> needs a header name made of letters, digits and !#$%&'*+-.^_`|~ only (RFC 9110 token)",
    );
  }
  const lower = name.toLowerCase();
  // Only a name found in Latch's own lists is printed back (see parseInjectMode).
  const reason = findProxyOwnedReason(lower);
  if (reason !== undefined) refuse(`header:${lower} cannot carry a credential: ${reason}`);
  if (lower === "cookie") refuse("header:cookie cannot carry a credential: use cookie:<name> instead");
  return name;
}

function checkQueryParam(param: string): string {
  if (!QUERY_PARAM.test(param)) {
    refuse("query:<param> needs a parameter name of 1 to 128 characters from A-Z a-z 0-9 . _ ~ -");
  }
  return param;
}

// RFC 6265 section 4.1.1: cookie-name = token (RFC 2616's token, the same set as RFC 9110's).
function checkCookieName(name: string): string {
  if (name.length === 0) refuse("cookie:<name> needs a cookie name, for example cookie:session");
  if (!isHeaderToken(name)) {
    refuse(
      "cookie:<name> needs a cookie name made of letters, digits and !#$%&'*+-.^_`|~ only (RFC 6265 token)",
    );
  }
  return name;
}

/**
 * The text form of a mode, the inverse of `parseInjectMode`.
 *
 * @example formatInjectMode({ kind: "header", name: "X-Api-Key" }) // "header:X-Api-Key"
 */
export function formatInjectMode(mode: InjectMode): string {
  switch (mode.kind) {
    case "bearer":
    case "basic":
    case "sigv4":
    case "client_credentials":
    case "refresh":
      return mode.kind;
    case "header":
      return `header:${mode.name}`;
    case "query":
      return `query:${mode.param}`;
    case "cookie":
      return `cookie:${mode.name}`;
    case "hmac":
      return `hmac:${mode.provider}_sig`;
  }
}
