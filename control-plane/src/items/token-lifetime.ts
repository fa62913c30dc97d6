// How long a minted access token is kept (DECISIONS "Providers": reused until 60 s before it
// expires). A token endpoint that names no lifetime (Stripe's connected-account tokens do not
// expire) gets an hour, so that calls reuse it instead of exchanging again on every call, and it is
// still exchanged afresh now and then.
export const UNSTATED_TOKEN_LIFETIME_S = 3600;

/** When a token issued at `issuedAtMs` with the token endpoint's `expires_in` (0: none) expires. */
export function tokenExpiresAt(issuedAtMs: number, expiresInS: number): Date {
  return new Date(issuedAtMs + (expiresInS > 0 ? expiresInS : UNSTATED_TOKEN_LIFETIME_S) * 1000);
}
