// Credential injection: puts an opened secret into the one slot its inject mode names, and
// takes out anything the agent put in that slot, so the origin sees exactly one credential.
import { AppError } from "@latch/shared/errors";
import type { InjectMode } from "@latch/shared/inject/inject-mode";
import { type HeaderPair, isSafeHeaderValue } from "@latch/shared/requests/headers";
import { readsAsQueryName } from "@latch/shared/requests/query-names";

export interface OutgoingRequest {
  /** The validated path plus query, e.g. `/v1/items?limit=5`. */
  path: string;
  /** Caller headers after `validateCallerHeaders` (lowercase names). */
  headers: HeaderPair[];
}

export interface InjectedCredential {
  secret: string;
  /** HTTP Basic user id; empty or undefined means none. */
  username: string | undefined;
  /** The item name, printed in messages (never the secret). */
  itemName: string;
}

// RFC 6265 section 4.1.1 cookie-octet: visible ASCII except DQUOTE, comma, semicolon and
// backslash. A ";" in a value would start a second cookie the origin believes came from us.
const COOKIE_OCTETS = /^[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]+$/;

// RFC 7617 section 2: "The user-id and password MUST NOT contain any control characters".
const CONTROL = /[\x00-\x1f\x7f]/;

// Item names follow [A-Z][A-Z0-9_]{0,127} (spec 2.1). A name from a ticket that does not is not
// printed: messages carry only text whose shape Latch knows.
const ITEM_NAME = /^[A-Z][A-Z0-9_]{0,127}$/;

function describeItem(itemName: string): string {
  return ITEM_NAME.test(itemName) ? `the stored credential ${itemName}` : "the stored credential";
}

function refuseSecret(item: string, slot: string): never {
  throw new AppError("invalid_header", `${item} contains characters that cannot be sent in ${slot}`);
}

/**
 * Returns a copy of `req` carrying the credential as `mode` says. Pure: `req` is not changed.
 * - bearer: `authorization: Bearer <secret>`.
 * - basic: `authorization: Basic base64(username ":" secret)` (UTF-8, RFC 7617). With no
 *   username the secret is the user id and the password is empty (`secret:`), the convention
 *   of several payment APIs that take an API key as the Basic user.
 * - header:<name>: that header (lowercase name) with the secret as its whole value.
 * - query:<param>: `param=encodeURIComponent(secret)` appended to the query.
 * - cookie:<name>: `cookie: <name>=<secret>`.
 * Any header an origin could read as the same name (any case, `_` for `-`), or query parameter
 * an origin could read as the same name (`KEY`, `key[]`, `key%00`), already in `req` is removed
 * first, so an agent cannot pre-set the slot and have an origin read its value instead of the
 * credential.
 * A secret that cannot be sent as-is in the slot throws `AppError("invalid_header")`; the
 * message names the item and the slot, never the value.
 *
 * @example injectCredential({ path: "/v1/me", headers: [] }, { kind: "bearer" },
 *   { secret: "tok", username: undefined, itemName: "API_KEY" })
 *   // { path: "/v1/me", headers: [{ name: "authorization", value: "Bearer tok" }] }
 */
export function injectCredential(
  req: OutgoingRequest,
  mode: InjectMode,
  credential: InjectedCredential,
): OutgoingRequest {
  const { secret } = credential;
  const item = describeItem(credential.itemName);
  if (typeof secret !== "string" || secret.length === 0)
    throw new AppError("empty_value", `${item} has an empty value`);
  // A lone surrogate cannot be encoded: UTF-8 would silently send U+FFFD instead of the secret.
  if (!secret.isWellFormed()) refuseSecret(item, "any part of an HTTP request (it is not valid Unicode)");

  switch (mode.kind) {
    case "bearer":
      if (!isSafeHeaderValue(secret)) refuseSecret(item, "an Authorization header");
      return withHeader(req, "authorization", `Bearer ${secret}`);
    case "basic":
      return withHeader(req, "authorization", `Basic ${encodeBasic(credential, item)}`);
    case "header":
      if (!isSafeHeaderValue(secret)) refuseSecret(item, `the ${mode.name} header`);
      return withHeader(req, mode.name.toLowerCase(), secret);
    case "query":
      return {
        path: withQueryParam(req.path, mode.param, encodeURIComponent(secret)),
        headers: [...req.headers],
      };
    case "cookie":
      if (!COOKIE_OCTETS.test(secret)) refuseSecret(item, `cookie ${mode.name}`);
      return withHeader(req, "cookie", `${mode.name}=${secret}`);
    case "client_credentials":
    case "refresh":
      // The control plane sends these with a token exchange and inject `bearer`; alone they
      // would put an app secret or a refresh token where an access token belongs.
      throw new AppError("invalid_inject", `inject mode ${mode.kind} is used through a token exchange only`);
    case "sigv4":
    case "hmac":
      // A signing mode has no slot: calls/steps/sign-request.ts signs the whole request.
      throw new AppError("internal", `inject mode ${mode.kind} signs the request; it has no slot to fill`);
  }
}

function encodeBasic(credential: InjectedCredential, item: string): string {
  const username = credential.username ?? "";
  if (!username.isWellFormed() || CONTROL.test(username)) {
    throw new AppError(
      "invalid_header",
      `the username of ${describeItem(credential.itemName)} contains characters that HTTP Basic cannot carry`,
    );
  }
  // RFC 7617 section 2: the user-id ends at the first colon, so a colon in it would move part of
  // the user id into the password.
  if (username.includes(":")) {
    throw new AppError(
      "invalid_header",
      `the username of ${describeItem(credential.itemName)} contains a colon, which HTTP Basic cannot carry`,
    );
  }
  if (CONTROL.test(credential.secret)) refuseSecret(item, "an HTTP Basic password");
  const pair = username.length > 0 ? `${username}:${credential.secret}` : `${credential.secret}:`;
  return Buffer.from(pair, "utf8").toString("base64");
}

/**
 * How an origin may read a header name: case folded, and "_" as "-". CGI, WSGI and Rack servers
 * hand every header on as `HTTP_<NAME>` with both written "_", so `X_Api_Key` arrives as the very
 * `HTTP_X_API_KEY` that `X-Api-Key` does (joined with it, or one replacing the other).
 */
function headerSlotOf(name: string): string {
  return name.toLowerCase().replaceAll("_", "-");
}

function withHeader(req: OutgoingRequest, lowerName: string, value: string): OutgoingRequest {
  const slot = headerSlotOf(lowerName);
  const headers = req.headers.filter((h) => headerSlotOf(h.name) !== slot).map((h) => ({ ...h }));
  headers.push({ name: lowerName, value });
  return { path: req.path, headers };
}

/**
 * Appends `param=encodedValue` to the query of `path`, dropping every caller pair that an origin
 * could read as `param` (`readsAsQueryName`, shared/src/requests/query-names.ts). `;` is treated
 * as a separator too, because some origin frameworks split on it: an agent's `x;API_KEY=mine` must
 * not reach them beside the credential.
 */
function withQueryParam(path: string, param: string, encodedValue: string): string {
  // A fragment is never sent; one here means the path was not validated.
  if (path.includes("#")) throw new AppError("invalid_path", "the path must not contain a fragment (#)");
  const questionMark = path.indexOf("?");
  const base = questionMark === -1 ? path : path.slice(0, questionMark);
  const query = questionMark === -1 ? "" : path.slice(questionMark + 1);
  const wanted = param.toLowerCase();
  // Every other byte of the caller's query stays as it was: it is what the operator approved.
  const pairs = query.length === 0 ? [] : query.split("&");
  const kept = pairs.filter((pair) => !pair.split(";").some((part) => readsAsQueryName(part, wanted)));
  kept.push(`${param}=${encodedValue}`);
  return `${base}?${kept.join("&")}`;
}
