// Reads a token URL's answer the way each provider writes it: JSON (RFC 6749 5.1), form-encoded
// (GitHub without Accept: application/json), Slack's `ok: false` with 200, GitHub's `error` with
// 200, and Slack's user token under `authed_user`. Errors keep only the provider's error code.
import { AppError } from "@latch/shared/errors";
import { type AnswerSecrets, findFormSecrets, findJsonSecrets } from "./answer-secrets.ts";

export interface MintedTokens {
  accessToken: string;
  /** Present when the provider issued (or rotated) one. */
  refreshToken: string | undefined;
  /** Seconds; 0 when the provider said none (Stripe tokens do not expire). */
  expiresIn: number;
  scope: string;
  /**
   * Every token-like value in the answer at any depth (Google's `id_token`, Slack's bot token
   * beside the user one, each copy of a repeated name): not kept, but redacted, since the agent
   * may read this answer (answer-secrets.ts).
   */
  otherSecrets: string[];
  /** OpenID Connect's `id_token` (a JWT), when the answer has one. */
  idToken: string | undefined;
}

export type TokenAnswer =
  | { ok: true; tokens: MintedTokens }
  | {
      ok: false;
      providerError: string;
      /** The token-like values of an answer that could be parsed: an error answer is handed on. */
      secrets: string[];
    };

/**
 * An OAuth error code as providers write them (RFC 6749 5.2: `invalid_grant`, GitHub's
 * `bad_verification_code`, Slack's `invalid_refresh_token`): lower-case words joined by `_`.
 * Anything else is not repeated: a value with digits, capitals or dashes could be a client secret
 * a hostile or broken endpoint echoes as its "error", and the code reaches the agent unredacted.
 */
const ERROR_CODE = /^[a-z][a-z_]{0,63}$/;
/** The longest lifetime kept (a year): it travels as a uint32, and nothing lives longer here. */
const MAX_EXPIRES_IN_S = 365 * 24 * 3600;
/** RFC 6749 3.3 scope characters, space-separated (Slack's commas are among them), at most 1 KiB. */
const SCOPE = /^[\x21\x23-\x5B\x5D-\x7E]+(?: [\x21\x23-\x5B\x5D-\x7E]+)*$/;

interface ReadBody {
  /** The answer's object; undefined for JSON that is not one. */
  fields: Record<string, unknown> | undefined;
  found: AnswerSecrets;
}

/**
 * Undefined for a body that is neither JSON nor a form, or not UTF-8 (RFC 8259 8.1): a token in
 * bytes that do not decode would be listed in a spelling the answer does not hold.
 */
function parseBody(contentType: string, body: Buffer): ReadBody | undefined {
  let text: string;
  try {
    // The byte-order mark is kept, so that an answer opening with one stays unreadable JSON.
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(body);
  } catch {
    return undefined;
  }
  if (contentType.includes("json") || text.trimStart().startsWith("{")) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return undefined;
    }
    const isObject = typeof parsed === "object" && parsed !== null && !Array.isArray(parsed);
    return {
      fields: isObject ? (parsed as Record<string, unknown>) : undefined,
      found: findJsonSecrets(text),
    };
  }
  if (contentType.includes("application/x-www-form-urlencoded") || /^[\w.-]+=/.test(text)) {
    return { fields: Object.fromEntries(new URLSearchParams(text)), found: findFormSecrets(text) };
  }
  return undefined;
}

const text = (value: unknown) => (typeof value === "string" && value.length > 0 ? value : undefined);

/**
 * @example readTokenAnswer(200, "application/json", Buffer.from('{"access_token":"a","expires_in":3600}'))
 *   // { ok: true, tokens: { accessToken: "a", refreshToken: undefined, expiresIn: 3600, scope: "" } }
 */
export function readTokenAnswer(status: number, contentType: string, body: Buffer): TokenAnswer {
  const read = parseBody(contentType, body);
  const isSuccess = status >= 200 && status < 300;
  // Hundreds of token-like values, or tens of kilobytes of them, are no token answer, and would
  // make redaction hold the proxy: not read, whatever else the answer is (an error answer's
  // values are redacted from it too).
  if (read?.found.isCrowded) return { ok: false, providerError: "too_many_tokens", secrets: [] };
  const secrets = read?.found.secrets ?? [];
  if (!read?.fields) {
    return { ok: false, providerError: status >= 400 ? `http_${status}` : "unreadable_response", secrets };
  }
  const { fields } = read;
  // RFC 6749 3.1: a name given twice is not an answer. Readers disagree on which copy counts (the
  // refresh token kept could be the one the provider did not mean), so none is read.
  if (read.found.hasRepeatedName) {
    return { ok: false, providerError: isSuccess ? "repeated_parameter" : `http_${status}`, secrets };
  }
  const error = text(fields.error);
  if (error !== undefined || fields.ok === false || !isSuccess) {
    return { ok: false, providerError: error && ERROR_CODE.test(error) ? error : `http_${status}`, secrets };
  }
  // Slack's oauth.v2.access with user scopes puts the user token under authed_user.
  const user =
    typeof fields.authed_user === "object" && fields.authed_user !== null
      ? (fields.authed_user as Record<string, unknown>)
      : {};
  const accessToken = text(fields.access_token) ?? text(user.access_token);
  if (accessToken === undefined) return { ok: false, providerError: "no_access_token", secrets };
  const fromTop = text(fields.access_token) !== undefined;
  const source = fromTop ? fields : user;
  const expiresIn = Number(source.expires_in ?? 0);
  return {
    ok: true,
    tokens: {
      accessToken,
      refreshToken: text(source.refresh_token),
      expiresIn:
        Number.isFinite(expiresIn) && expiresIn > 0 ? Math.min(Math.floor(expiresIn), MAX_EXPIRES_IN_S) : 0,
      // Kept as text in the database (which refuses a NUL) and shown in the console: a scope that is
      // not one is kept as none.
      scope: scopeOf(source.scope),
      otherSecrets: secrets,
      idToken: text(fields.id_token),
    },
  };
}

function scopeOf(value: unknown): string {
  return typeof value === "string" && value.length <= 1024 && SCOPE.test(value) ? value : "";
}

/** The refusal of a call whose token exchange failed: the approved request was never sent. */
export function exchangeFailed(providerError: string): AppError {
  return new AppError(
    "token_exchange_failed",
    `the provider refused the token exchange (${providerError}); the request was not sent`,
    { extra: { provider_error: providerError } },
  );
}
