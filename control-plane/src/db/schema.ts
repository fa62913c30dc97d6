// The database as Kysely sees it: one interface per table, kept in step with migrations/.
import type { ColumnType, Generated, Insertable, Selectable, Updateable } from "kysely";

type CreatedAt = ColumnType<Date, Date | undefined, never>;
type Timestamp = ColumnType<Date, Date | undefined, Date>;

export interface OrganisationsTable {
  id: string;
  name: string;
  created_at: CreatedAt;
  /** Step-ups in this organisation take a passkey only (migration 2026-11-26T0700). */
  standing_approvals_need_passkey: ColumnType<boolean, boolean | undefined, boolean>;
  /** Lowercase [a-z0-9-], unique, made from the name (migration 2026-11-26T0500; SSO addresses it). */
  slug: ColumnType<string, string | undefined, string>;
  /** The two-person rule: 1 or 2 members approve a standing grant before it is active. */
  standing_approvals_need: ColumnType<number, number | undefined, number>;
}

/** An invitation to join an organisation (migration 2026-11-26T0500); the token only hashed. */
export interface OrgInvitesTable {
  id: string;
  organisation_id: string;
  email: string;
  role: string;
  token_hash: string;
  /** The operator id of the member who invited. */
  invited_by: string;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
  accepted_by: string | null;
  withdrawn_at: Date | null;
  withdrawn_by: string | null;
}

export interface FoldersTable {
  id: string;
  organisation_id: string;
  environment: string;
  name: string;
  created_at: CreatedAt;
}

export interface ItemsTable {
  id: string;
  organisation_id: string;
  environment: string;
  name: string;
  kind: string;
  sealed_value: Uint8Array;
  sealing_key_id: string;
  last4: string;
  allowed_hosts: string[];
  inject: string;
  username: string | null;
  folder_id: string | null;
  created_at: CreatedAt;
  updated_at: Timestamp;
  /** When a call last went out with it, written at most once a minute (migration 2026-11-26T0300). */
  last_used_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/** A minted access token of an item, sealed (migration 2026-11-25T1000). */
export interface ItemTokensTable {
  item_id: string;
  organisation_id: string;
  sealed_value: Uint8Array;
  sealing_key_id: string;
  token_last4: string;
  scope: string;
  expires_at: Date;
  updated_at: Generated<Date>;
}

/** Connect in flight (migration 2026-11-25T1100). */
export interface ConnectStatesTable {
  state_hash: string;
  organisation_id: string;
  session_id: string;
  provider: string;
  item_id: string;
  environment: string;
  redirect_uri: string;
  sealed_verifier: Uint8Array | null;
  sealing_key_id: string | null;
  agent_client_id: string | null;
  need_id: string | null;
  expires_at: Date;
  used_at: Date | null;
  created_at: Generated<Date>;
}

export interface AuditEventsTable {
  id: Generated<string>;
  organisation_id: string;
  environment: string | null;
  at: CreatedAt;
  actor: string;
  action: string;
  item_name: string | null;
  host: string | null;
  reason: string | null;
  detail: ColumnType<Record<string, unknown>, string | undefined, never>;
  /** The ledger (audit/ledger.repo.ts): pg reads a bigint as a string, PGlite as a number. */
  seq: ColumnType<string | number, number, never>;
  prev_hash: ColumnType<string, string, never>;
  hash: ColumnType<string, string, never>;
  trace_id: ColumnType<string | null, string | null | undefined, never>;
}

/** One organisation's chain head: the row its next append locks, reads and moves. */
export interface AuditHeadsTable {
  organisation_id: string;
  seq: ColumnType<string | number, number, number>;
  prev_hash: string;
  hash: string;
  at: Date;
}

/** Every deleted organisation's id, never used again (migration 2026-11-27T1400). Append-only. */
export interface DeletedOrganisationsTable {
  id: string;
  deleted_at: ColumnType<Date, Date | undefined, never>;
}

export interface AuditCheckpointsTable {
  organisation_id: string;
  seq: ColumnType<string | number, number, never>;
  hash: string;
  at: Date;
  key_id: string;
  signature: string;
}

export interface GrantsTable {
  id: string;
  organisation_id: string;
  environment: string;
  item_id: string;
  agent_id: string;
  tool_id: string;
  policy: string;
  status: string;
  task_id: string | null;
  task_description: string | null;
  created_at: Date;
  approved_at: Date | null;
  expires_at: Date | null;
  consumed_at: Date | null;
  revoked_at: Date | null;
  approval_code_hash: ColumnType<string | null, string | null | undefined, string | null>;
  approval_code_expires_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  approval_code_wrong: ColumnType<number, number | undefined, number>;
  scope_host: ColumnType<string | null, string | null | undefined, string | null>;
  scope_method: ColumnType<string | null, string | null | undefined, string | null>;
  scope_path: ColumnType<string | null, string | null | undefined, string | null>;
  folder_id: ColumnType<string | null, string | null | undefined, string | null>;
  approval_token_hash: ColumnType<string | null, string | null | undefined, string | null>;
  /** The call a pending grant was asked for (DECISIONS "Approvals"); null: the whole item. */
  call_method: ColumnType<string | null, string | null | undefined, string | null>;
  call_host: ColumnType<string | null, string | null | undefined, string | null>;
  /** The validated path with its query, byte for byte. */
  call_path: ColumnType<string | null, string | null | undefined, string | null>;
  /** Hex SHA-256 of the exact body bytes; null for a call without a body. */
  call_body_sha256: ColumnType<string | null, string | null | undefined, string | null>;
  /** The body's first 64 KiB as the agent sent it (migration 2026-11-26T0300), its size and type. */
  call_body: ColumnType<string | null, string | null | undefined, string | null>;
  call_body_bytes: ColumnType<number | null, number | null | undefined, number | null>;
  call_content_type: ColumnType<string | null, string | null | undefined, string | null>;
  /** The operator who approved (any path), and who denied or revoked: operator ids. */
  approved_by: ColumnType<string | null, string | null | undefined, string | null>;
  revoked_by: ColumnType<string | null, string | null | undefined, string | null>;
  /** When a call last used the grant, written at most once a minute. */
  last_used_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** A request asked again within 10 minutes of a Deny of the same call: when that Deny was. */
  after_deny_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /**
   * The two-person rule (migration 2026-11-26T0500): the first member's approval of a standing
   * grant, which stays pending until a second member confirms the same policy and scope.
   */
  first_approved_by: ColumnType<string | null, string | null | undefined, string | null>;
  first_approved_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  first_policy: ColumnType<string | null, string | null | undefined, string | null>;
  first_scope: ColumnType<string | null, string | null | undefined, string | null>;
  /** Asked for by an agent or a request, not written ahead by an operator (2026-11-26T2300): spec 8 counts these. */
  requested: ColumnType<boolean, boolean | undefined, boolean>;
  /**
   * A one-call approval's call in flight (migration 2026-11-27T0100): the ticket handed to the
   * proxy and when it expires, until the call's outcome is settled (calls/abandoned-calls.ts).
   */
  call_ticket_id: ColumnType<string | null, string | null | undefined, string | null>;
  call_ticket_expires_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** Whether the proxies spent ids in this database's table when the ticket left. */
  call_ticket_shared: ColumnType<boolean | null, boolean | null | undefined, boolean | null>;
  /**
   * A one-call approval held while its call's fence waits (migration 2026-11-27T1300): until when
   * a retry of the same call is answered held rather than asked anew; cleared once it is decided.
   */
  held_until: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface OperatorsTable {
  id: string;
  email: string;
  created_at: Date;
  totp_enabled: ColumnType<boolean, boolean | undefined, boolean>;
  totp_secret: Uint8Array | null;
  totp_kek_id: string | null;
  totp_last_step: ColumnType<string, number | undefined, number>;
  totp_failures: ColumnType<number, number | undefined, number>;
  totp_locked_until: Date | null;
  pending_totp_secret: Uint8Array | null;
  pending_totp_kek_id: string | null;
  pending_totp_expires_at: Date | null;
  /** The session that started the pending enrolment: only it reads and confirms it. */
  pending_totp_session_id: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface BackupCodesTable {
  id: Generated<string>;
  operator_id: string;
  code_hash: string;
  used_at: Date | null;
}

export interface EmailChallengesTable {
  email: string;
  code_hash: string;
  expires_at: Date;
  wrong_attempts: ColumnType<number, number | undefined, number>;
}

export interface EmailSendsTable {
  id: Generated<string>;
  email: string;
  sent_at: Date;
}

export interface OperatorSessionsTable {
  id: string;
  token_hash: string;
  csrf_hash: string;
  operator_id: string;
  organisation_id: string | null;
  is_mfa_passed: ColumnType<boolean, boolean | undefined, boolean>;
  user_agent: string | null;
  created_at: Date;
  last_seen_at: Date;
  revoked_at: Date | null;
  /** When and how the session last proved its user (migration 2026-11-26T0700): step-up reads it. */
  verified_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** The authenticator time step of that verification; null for any other (a backup code, a passkey). pg reads a bigint as a string. */
  verified_totp_step: ColumnType<string | number | null, number | null | undefined, number | null>;
  verified_method: ColumnType<
    VerifiedMethod | null,
    VerifiedMethod | null | undefined,
    VerifiedMethod | null
  >;
  /** Set for a session begun with single sign-on: it acts in that organisation only (2026-11-26T0700). */
  sso_organisation_id: ColumnType<string | null, string | null | undefined, string | null>;
}

/** An organisation's OpenID Connect connection (migration 2026-11-26T0700-sso). */
export interface SsoConnectionsTable {
  organisation_id: string;
  issuer: string;
  client_id: string;
  sealed_client_secret: Uint8Array;
  sealing_key_id: string;
  client_secret_last4: string;
  email_domains: string[];
  default_role: ColumnType<string, string | undefined, string>;
  require_sso: ColumnType<boolean, boolean | undefined, boolean>;
  /** What the organisation's `_latch-verification.<domain>` TXT records carry. */
  domain_token: ColumnType<string, string | undefined, string>;
  /** The listed domains whose TXT record was found: only these make accounts, route and require. */
  verified_domains: ColumnType<string[], string[] | undefined, string[]>;
  /** When a replica last took the proven domains to check again (sso/domain-recheck.ts). */
  domains_checked_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** Proven domain -> checks in a row that did not find its record. */
  domain_misses: ColumnType<Record<string, number>, string | undefined, string>;
  created_at: Date;
  updated_at: Date;
}

/** A single sign-on in flight: single use, bound to the browser's cookie, 10 minutes. */
export interface SsoStatesTable {
  state_hash: string;
  organisation_id: string;
  browser_hash: string;
  nonce: string;
  sealed_verifier: Uint8Array;
  sealing_key_id: string;
  return_to: string | null;
  /** A step-up's max_age (seconds): its ID token must carry an auth_time within it (migration 2026-11-26T0710). */
  max_age_s: number | null;
  expires_at: Date;
}

/** How a session proved its user: a passkey, an authenticator or backup code, or the SSO provider. */
export type VerifiedMethod = "passkey" | "totp" | "sso";

/** An operator's WebAuthn credential (migration 2026-11-26T0700): public key and counter only. */
export interface OperatorPasskeysTable {
  id: string;
  operator_id: string;
  /** base64url, unique across every account. */
  credential_id: string;
  public_key: Uint8Array;
  /** pg reads a bigint as a string, PGlite as a number. */
  sign_count: ColumnType<string | number, number | undefined, number>;
  transports: ColumnType<string[], string[] | undefined, string[]>;
  device_type: "singleDevice" | "multiDevice";
  backed_up: boolean;
  aaguid: string | null;
  name: string;
  created_at: Date;
  last_used_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/** A WebAuthn ceremony in flight: single use, bound to a session or (signed out) to a browser cookie. */
export interface WebauthnChallengesTable {
  challenge_hash: string;
  purpose: "register" | "second_factor" | "sign_in" | "step_up";
  session_id: string | null;
  browser_hash: string | null;
  expires_at: Date;
}

export interface MembershipsTable {
  organisation_id: string;
  operator_id: string;
  role: string;
  created_at: Date;
}

export interface ClientsTable {
  id: string;
  organisation_id: string;
  kind: string;
  name: string;
  environment: string;
  token_hash: string;
  token_last4: string;
  created_at: Date;
  rotated_at: Date | null;
  revoked_at: Date | null;
  first_used_at: Date | null;
  last_used_at: Date | null;
  /** Set on the row of an OAuth client acting in this organisation (it has no bearer of its own). */
  oauth_client_id: ColumnType<string | null, string | null | undefined, string | null>;
  /**
   * The operator id of who was shown the live bearer: who issued it, or who last rotated it. None
   * on rows from before it was kept and on an OAuth client's row.
   */
  issued_by: ColumnType<string | null, string | null | undefined, string | null>;
}

/** One oidc-provider artifact, keyed by a hash of its id (a refresh token's id is the token). */
export interface OAuthArtifactsTable {
  model: string;
  id_hash: string;
  payload: ColumnType<Record<string, unknown>, string, string>;
  grant_id: string | null;
  user_code_hash: string | null;
  uid_hash: string | null;
  account_id: string | null;
  expires_at: Date | null;
  consumed_at: Date | null;
}

/** A consent: the OAuth grant an operator gave a client, bound to one organisation. */
export interface OAuthConsentsTable {
  grant_id: string;
  organisation_id: string;
  operator_id: string;
  client_row_id: string;
  created_at: Date;
  revoked_at: Date | null;
}

export interface OAuthDeniedTokensTable {
  jti_hash: string;
  expires_at: Date;
}

export interface RateLimitHitsTable {
  id: Generated<string>;
  bucket: string;
  at: Date;
}

export interface ApprovalCodeFailuresTable {
  id: Generated<string>;
  organisation_id: string;
  at: Date;
}

export interface NeedRequestsTable {
  id: string;
  organisation_id: string;
  environment: string;
  kind: string;
  /** Null when the agent named the credential alone (item_name): the operator names the host. */
  host: string | null;
  suggested_name: string;
  agent_id: string;
  message: string | null;
  status: string;
  item_id: string | null;
  created_at: Date;
  closed_at: Date | null;
  /** The call that asked (http_request); null for setup and find_items, which name none. */
  call_method: ColumnType<string | null, string | null | undefined, string | null>;
  call_host: ColumnType<string | null, string | null | undefined, string | null>;
  call_path: ColumnType<string | null, string | null | undefined, string | null>;
  call_body_sha256: ColumnType<string | null, string | null | undefined, string | null>;
  call_body: ColumnType<string | null, string | null | undefined, string | null>;
  call_body_bytes: ColumnType<number | null, number | null | undefined, number | null>;
  call_content_type: ColumnType<string | null, string | null | undefined, string | null>;
}

/**
 * The egress proxies' spent ticket ids (migration 2026-11-26T0100), and one `store:` row naming
 * the store. The control plane only ever inserts here (a fence) and reads the store's id.
 */
export interface EgressSpentTicketsTable {
  id: string;
  expires_at: Date;
}

/** An organisation's policy rules, whole, with their version (migration 2026-11-26T0600). */
export interface PolicyListsTable {
  organisation_id: string;
  version: number;
  /** The ordered rules as policies/policy-rules.ts parses them. */
  rules: ColumnType<unknown[], string, string>;
  updated_at: Date;
  updated_by: string | null;
}

/** A policy list waiting for a second member, one per organisation (migration 2026-11-27T1800). */
export interface PolicyProposalsTable {
  organisation_id: string;
  id: string;
  /** The version of `policy_lists` it was made from: confirmed only while that is still saved. */
  base_version: number;
  /** The ordered rules as policies/policy-rules.ts parses them. */
  rules: ColumnType<unknown[], string, string>;
  proposed_by: string;
  proposed_at: Date;
}

/** A browser's Web Push subscription (RFC 8030), for one operator (migration 2026-11-26T0600). */
export interface PushSubscriptionsTable {
  id: string;
  operator_id: string;
  endpoint: string;
  /** RFC 8291: the user agent's P-256 public key and auth secret, base64url. */
  p256dh: string;
  auth: string;
  created_at: Date;
  last_pushed_at: Date | null;
  /** The session it was made in (2026-11-26T1900): pushed to only while that session lives; null before. */
  session_id: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface Database {
  organisations: OrganisationsTable;
  folders: FoldersTable;
  items: ItemsTable;
  item_tokens: ItemTokensTable;
  connect_states: ConnectStatesTable;
  audit_events: AuditEventsTable;
  audit_heads: AuditHeadsTable;
  audit_checkpoints: AuditCheckpointsTable;
  deleted_organisations: DeletedOrganisationsTable;
  grants: GrantsTable;
  operators: OperatorsTable;
  backup_codes: BackupCodesTable;
  email_challenges: EmailChallengesTable;
  email_sends: EmailSendsTable;
  operator_sessions: OperatorSessionsTable;
  operator_passkeys: OperatorPasskeysTable;
  webauthn_challenges: WebauthnChallengesTable;
  sso_connections: SsoConnectionsTable;
  sso_states: SsoStatesTable;
  memberships: MembershipsTable;
  org_invites: OrgInvitesTable;
  clients: ClientsTable;
  approval_code_failures: ApprovalCodeFailuresTable;
  need_requests: NeedRequestsTable;
  oauth_artifacts: OAuthArtifactsTable;
  oauth_consents: OAuthConsentsTable;
  oauth_denied_tokens: OAuthDeniedTokensTable;
  rate_limit_hits: RateLimitHitsTable;
  egress_spent_tickets: EgressSpentTicketsTable;
  policy_lists: PolicyListsTable;
  policy_proposals: PolicyProposalsTable;
  push_subscriptions: PushSubscriptionsTable;
}

export type ItemRow = Selectable<ItemsTable>;
export type NewItem = Insertable<ItemsTable>;
export type ItemUpdate = Updateable<ItemsTable>;
export type GrantRow = Selectable<GrantsTable>;
export type OperatorRow = Selectable<OperatorsTable>;
export type OperatorSessionRow = Selectable<OperatorSessionsTable>;
export type PasskeyRow = Selectable<OperatorPasskeysTable>;
export type SsoConnectionRow = Selectable<SsoConnectionsTable>;
export type SsoStateRow = Selectable<SsoStatesTable>;
export type ClientRow = Selectable<ClientsTable>;
export type NewGrant = Insertable<GrantsTable>;
export type OrganisationRow = Selectable<OrganisationsTable>;
export type OrgInviteRow = Selectable<OrgInvitesTable>;
export type NeedRequestRow = Selectable<NeedRequestsTable>;
