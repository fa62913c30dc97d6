// Operator sessions: a random token in an HttpOnly cookie (only its SHA-256 is stored) and a
// separate CSRF token the pages send back as X-CSRF-Token on every POST and DELETE. The cookie
// names live here; the rows in sessions.repo.ts.
export { createSessionsRepo, type LiveSession, type NewSession, type SessionsRepo } from "./sessions.repo.ts";

/**
 * The cookie names, by whether the plane's BASE_URL is https. Over https both carry the `__Host-`
 * prefix: a browser keeps such a cookie only when it was set Secure, with Path=/ and no Domain, so
 * a sibling subdomain or a plain-http page on the same host cannot plant one beside ours (cookie
 * tossing) and fix the operator into an attacker's session. Browsers refuse a `__Host-` cookie
 * without Secure, and not every browser stores Secure cookies from http://localhost, so a
 * plain-http development plane (BASE_URL http://localhost:8787, the README's first run) uses the
 * plain names: there is no TLS to protect there, and a loopback host has no sibling subdomains.
 */
export function sessionCookieNames(isSecure: boolean): { session: string; csrf: string } {
  const prefix = isSecure ? "__Host-" : "";
  return { session: `${prefix}latch_session`, csrf: `${prefix}latch_csrf` };
}

/** Every name a session cookie may arrive under; a request carrying two of them is refused. */
export const SESSION_COOKIE_NAMES: readonly string[] = ["latch_session", "__Host-latch_session"];
