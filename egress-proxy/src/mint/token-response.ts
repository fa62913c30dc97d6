// Reads a token URL's answer the way each provider writes it: JSON (RFC 6749 5.1), form-encoded
// (GitHub without Accept: application/json), Slack's `ok: false` with 200, GitHub's `error` with
// 200, and Slack's user token under `authed_user`. Errors keep only the provider's error code.
import { AppError } from "@latch/shared/errors";

export interface MintedTokens {
  accessToken: string;
  /** Present when the provider issued (or rotated) one. */
  refreshToken: string | undefined;
  /** Seconds; 0 when the provider said none (Stripe tokens do not expire). */
  expiresIn: number;
  scope: string;
  /**
   * Every other token-like value in the answer (Google's `id_token`, Slack's bot token beside the
   * user one): not kept, but redacted, since the agent may read this answer.
   */
  otherSecrets: string[];
  /** OpenID Connect's `id_token` (a JWT), when the answer has one. */
  idToken: string | undefined;
}

export type TokenAnswer = { ok: true; tokens: MintedTokens } | { ok: false; providerError: string };

/** An OAuth error code is a short ASCII token (RFC 6749 5.2); anything else is not repeated. */
const ERROR_CODE = /^[A-Za-z0-9_.-]{1,64}$/;

function parseBody(contentType: string, body: Buffer): Record<string, unknown> | undefined {
  const text = body.toString("utf8");
  if (contentType.includes("json") || text.trimStart().startsWith("{")) {
    try {
      const parsed: unknown = JSON.parse(text);
      return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
        ? (parsed as Record<string, unknown>)
        : undefined;
    } catch {
      return undefined;
    }
  }
  if (contentType.includes("application/x-www-form-urlencoded") || /^[\w.-]+=/.test(text)) {
    return Object.fromEntries(new URLSearchParams(text));
  }
  return undefined;
}

const text = (value: unknown) => (typeof value === "string" && value.length > 0 ? value : undefined);

/**
 * @example readTokenAnswer(200, "application/json", Buffer.from('{"access_token":"a","expires_in":3600}'))
 *   // { ok: true, tokens: { accessToken: "a", refreshToken: undefined, expiresIn: 3600, scope: "" } }
 */
export function readTokenAnswer(status: number, contentType: string, body: Buffer): TokenAnswer {
  const fields = parseBody(contentType, body);
  if (!fields) return { ok: false, providerError: status >= 400 ? `http_${status}` : "unreadable_response" };
  const error = text(fields.error);
  if (error !== undefined || fields.ok === false || status < 200 || status >= 300) {
    return { ok: false, providerError: error && ERROR_CODE.test(error) ? error : `http_${status}` };
  }
  // Slack's oauth.v2.access with user scopes puts the user token under authed_user.
  const user =
    typeof fields.authed_user === "object" && fields.authed_user !== null
      ? (fields.authed_user as Record<string, unknown>)
      : {};
  const accessToken = text(fields.access_token) ?? text(user.access_token);
  if (accessToken === undefined) return { ok: false, providerError: "no_access_token" };
  const fromTop = text(fields.access_token) !== undefined;
  const source = fromTop ? fields : user;
  const expiresIn = Number(source.expires_in ?? 0);
  return {
    ok: true,
    tokens: {
      accessToken,
      refreshToken: text(source.refresh_token),
      expiresIn: Number.isFinite(expiresIn) && expiresIn > 0 ? Math.floor(expiresIn) : 0,
      scope: text(source.scope) ?? "",
      otherSecrets: [...tokenValues(fields), ...tokenValues(user)],
      idToken: text(fields.id_token),
    },
  };
}

/** String values of fields named `*token` (`id_token`, `access_token`, ...), not `token_type`. */
function tokenValues(fields: Record<string, unknown>): string[] {
  return Object.entries(fields)
    .filter(([name, value]) => /token$/i.test(name) && typeof value === "string" && value.length > 0)
    .map(([, value]) => value as string);
}

/** The refusal of a call whose token exchange failed: the approved request was never sent. */
export function exchangeFailed(providerError: string): AppError {
  return new AppError(
    "token_exchange_failed",
    `the provider refused the token exchange (${providerError}); the request was not sent`,
    { extra: { provider_error: providerError } },
  );
}
