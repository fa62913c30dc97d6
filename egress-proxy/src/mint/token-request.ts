// The request a provider's token URL gets (RFC 6749 sections 4.4 and 6), with the client
// authenticated the way that provider expects (DECISIONS "Providers"). Built in the proxy only:
// the client secret and refresh token are opened here and nowhere else.
import { ClientAuthentication, TokenGrant } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import type { HeaderPair } from "@latch/shared/requests/headers";

export interface TokenRequestInput {
  grant: TokenGrant;
  clientAuthentication: ClientAuthentication;
  clientId: string;
  /** Opened; undefined for a PKCE public client. */
  clientSecret: string | undefined;
  /** Opened; for the refresh grant. */
  refreshToken: string | undefined;
  scope: string;
  /** The authorization code grant (connect). */
  code?: string;
  redirectUri?: string;
  /** Opened; RFC 7636 PKCE verifier. */
  codeVerifier?: string | undefined;
}

export interface TokenRequest {
  headers: HeaderPair[];
  body: Uint8Array;
}

/**
 * RFC 6749 2.3.1: in HTTP Basic the client id and secret are form-urlencoded first, so a ":" in
 * either cannot move the split.
 */
function basicCredentials(clientId: string, secret: string): string {
  const encode = (value: string) => encodeURIComponent(value).replaceAll("%20", "+");
  return Buffer.from(`${encode(clientId)}:${encode(secret)}`, "utf8").toString("base64");
}

/**
 * @example buildTokenRequest({ grant: TokenGrant.TOKEN_GRANT_REFRESH_TOKEN,
 *   clientAuthentication: ClientAuthentication.CLIENT_AUTHENTICATION_FORM, clientId: "id",
 *   clientSecret: "s", refreshToken: "r", scope: "" })
 *   // body: grant_type=refresh_token&refresh_token=r&client_id=id&client_secret=s
 */
export function buildTokenRequest(input: TokenRequestInput): TokenRequest {
  const form = new URLSearchParams();
  switch (input.grant) {
    case TokenGrant.TOKEN_GRANT_REFRESH_TOKEN:
      if (!input.refreshToken) throw new AppError("internal", "a refresh exchange without a refresh token");
      form.set("grant_type", "refresh_token");
      form.set("refresh_token", input.refreshToken);
      break;
    case TokenGrant.TOKEN_GRANT_AUTHORIZATION_CODE:
      if (!input.code || !input.redirectUri)
        throw new AppError("invalid_request", "a code exchange needs the code and redirect URI");
      form.set("grant_type", "authorization_code");
      form.set("code", input.code);
      form.set("redirect_uri", input.redirectUri);
      if (input.codeVerifier) form.set("code_verifier", input.codeVerifier);
      break;
    case TokenGrant.TOKEN_GRANT_CLIENT_CREDENTIALS:
      form.set("grant_type", "client_credentials");
      if (input.scope) form.set("scope", input.scope);
      break;
    default:
      throw new AppError("invalid_request", "the token exchange names no grant this proxy makes");
  }
  const headers: HeaderPair[] = [{ name: "accept", value: "application/json" }];
  const needsSecret = input.clientAuthentication !== ClientAuthentication.CLIENT_AUTHENTICATION_PUBLIC;
  if (needsSecret && !input.clientSecret) {
    throw new AppError("invalid_request", "the token exchange needs the client secret");
  }
  const secret = input.clientSecret ?? "";
  switch (input.clientAuthentication) {
    case ClientAuthentication.CLIENT_AUTHENTICATION_BASIC:
      headers.push({ name: "authorization", value: `Basic ${basicCredentials(input.clientId, secret)}` });
      break;
    case ClientAuthentication.CLIENT_AUTHENTICATION_FORM:
      form.set("client_id", input.clientId);
      form.set("client_secret", secret);
      break;
    case ClientAuthentication.CLIENT_AUTHENTICATION_SECRET_FORM:
      form.set("client_secret", secret);
      break;
    case ClientAuthentication.CLIENT_AUTHENTICATION_PUBLIC:
      // RFC 6749 2.3.1 / RFC 7636: a public client identifies itself with client_id alone.
      form.set("client_id", input.clientId);
      break;
    default:
      throw new AppError("invalid_request", "the token exchange names no client authentication");
  }
  return { headers, body: Buffer.from(form.toString(), "utf8") };
}
