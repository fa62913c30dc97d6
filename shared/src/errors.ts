// One error type for both tiers: a stable machine-readable code, a public sentence, and an
// internal cause that is logged but never sent to a caller.

/** Every code either tier can put in front of a caller, with the HTTP status it maps to. */
export const ERROR_STATUS = {
  // 400: the request itself is wrong
  invalid_request: 400,
  invalid_path: 400,
  invalid_host: 400,
  invalid_port: 400,
  ip_literal: 400,
  invalid_header: 400,
  invalid_inject: 400,
  invalid_name: 400,
  empty_value: 400,
  invalid_timeout: 400,
  invalid_method: 400,
  invalid_content_type: 400,
  invalid_json: 400,
  invalid_email: 400,
  confirm_name_mismatch: 400,
  cannot_revoke_current: 400,
  approval_code_invalid: 400,
  /** A policy list that cannot be saved; the message names the rule and the field. */
  invalid_policy: 400,
  // 401/403: who is asking
  unauthorized: 401,
  otp_invalid: 401,
  /** Two session cookies on one request: one was planted beside the other (cookie tossing). */
  duplicate_session_cookie: 401,
  totp_invalid: 401,
  /** A passkey's answer that does not verify (signature, challenge, origin, RP, counter, account). */
  passkey_invalid: 401,
  forbidden: 403,
  csrf_failed: 403,
  mfa_required: 403,
  /** A route that matters needs a verification of the last 5 minutes; `methods` says which. */
  step_up_required: 403,
  /** The address signs in with its organisation's single sign-on (`sso_url`), not an email code. */
  sso_required: 403,
  /** A session begun with single sign-on acts in its organisation only, and keeps the account's factors as they are. */
  sso_session: 403,
  /** A single sign-on that did not prove who is signing in (the provider, its answer or its ID token). */
  sso_failed: 401,
  /**
   * A single sign-on of a new address whose domain the organisation listed but has not proven
   * (its DNS TXT record): no account is made.
   */
  sso_domain_unverified: 403,
  not_owner: 403,
  /** A member whose role may not perform the route's action (DECISIONS "Teams"); names the roles. */
  forbidden_role: 403,
  /** An invitation opened by an account with another address than the one invited. */
  invite_wrong_account: 403,
  plan_limit: 402,
  no_pending_enrollment: 404,
  // the HTTP envelope
  method_not_allowed: 405,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  totp_locked: 429,
  // 403/404/409: who and what
  host_mismatch: 403,
  not_found: 404,
  duplicate_name: 409,
  /** One name matched in several environments; the caller names one (the message lists them). */
  ambiguous: 409,
  grant_not_pending: 409,
  grant_not_revocable: 409,
  approval_code_used: 409,
  need_is_connect: 409,
  need_closed: 409,
  /** The organisation's last owner cannot leave, be removed or be demoted. */
  last_owner: 409,
  already_member: 409,
  invite_used: 409,
  /** The two-person rule: the member who gave the first approval cannot give the second. */
  second_member_required: 409,
  /** The second approval of a standing grant confirms the first one's policy and scope, or none. */
  approval_mismatch: 409,
  invite_expired: 410,
  invite_withdrawn: 410,
  /** A passkey's credential id is registered already (to this account or another). */
  duplicate_passkey: 409,
  /** Removing the account's last way to sign in besides the email code. */
  last_factor: 409,
  approval_code_expired: 410,
  /** PUT /api/policies against a version that moved on (DECISIONS "Policies"). */
  stale_version: 409,
  /** A conditional write sent without its If-Match (RFC 6585 3). */
  precondition_required: 428,
  // destination refusals (the call never left)
  private_range: 403,
  loopback: 403,
  link_local: 403,
  multicast: 403,
  reserved_range: 403,
  ipv6_embedding: 403,
  not_global_unicast: 403,
  dns_failure: 502,
  dns_no_address: 502,
  connect_failed: 502,
  tls_failure: 502,
  // the origin answered, badly
  timeout: 504,
  body_too_large: 502,
  bad_origin_response: 502,
  /** A provider's token URL refused a refresh or client-credentials exchange (spec 4.2 rule 7). */
  token_exchange_failed: 502,
  /** A user-only provider path with only the app credential stored (spec 4.2). */
  user_connect_required: 403,
  /** Rule 7: the exchange needs an item that is not stored (`missing_item` names it). */
  inject_denied: 403,
  // ticket checks in the proxy
  ticket_invalid: 401,
  ticket_signature: 401,
  ticket_expired: 401,
  ticket_audience: 401,
  ticket_replayed: 409,
  /**
   * A ticket issued before its proxy (on a memory store) started: refused unspent, as it may have
   * run in the process before a restart; the control plane, which sent it to no other process,
   * knows it never left. Temporary: a call made again gets a new ticket.
   */
  ticket_predates_proxy: 503,
  credential_unavailable: 500,
  /** The audit ledger does not grow from its last checkpoint (rows cut or rewritten): not signed. */
  ledger_broken: 500,
  // the service
  egress_unavailable: 503,
  database_unavailable: 503,
  /** The mail relay refused or did not take a sign-in code: nothing was mailed, try again later. */
  mail_unavailable: 503,
  internal: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(ERROR_STATUS, value);
}

/**
 * A failure with a public `code` and `message`. `cause` is for logs only; `extra` carries the
 * spec's named fields (`attempts_remaining`, `retry_after`, ...) into the response body.
 */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly extra: Readonly<Record<string, unknown>>;

  constructor(
    code: ErrorCode,
    message: string,
    options: { cause?: unknown; extra?: Record<string, unknown> } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "AppError";
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.extra = Object.freeze({ ...(options.extra ?? {}) });
  }

  /** The response body: `{ error: { code, message, ...extra } }`. Never includes the cause. */
  toBody(): { error: Record<string, unknown> } {
    return { error: { code: this.code, message: this.message, ...this.extra } };
  }
}
