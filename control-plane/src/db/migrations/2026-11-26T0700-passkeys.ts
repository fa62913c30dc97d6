// Passkeys and step-up (DECISIONS "Passkeys and single sign-on", third wave): an operator's WebAuthn
// credentials, the single-use challenges of each ceremony, and when and how a session last proved
// its user (the 5 minutes of a step-up are measured from there).
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("operator_passkeys")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("operator_id", "text", (c) => c.notNull().references("operators.id").onDelete("cascade"))
    // The authenticator's credential id (base64url): unique across every account, so one key can
    // never be registered to two of them.
    .addColumn("credential_id", "text", (c) => c.notNull().unique())
    // The COSE public key; nothing secret is ever stored for a passkey.
    .addColumn("public_key", "bytea", (c) => c.notNull())
    // The signature counter (W3C WebAuthn 6.1.1): a value that does not move forward is a clone.
    .addColumn("sign_count", "bigint", (c) => c.notNull().defaultTo(0))
    .addColumn("transports", sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn("device_type", "text", (c) =>
      c.notNull().check(sql`device_type in ('singleDevice', 'multiDevice')`),
    )
    .addColumn("backed_up", "boolean", (c) => c.notNull())
    .addColumn("aaguid", "text")
    .addColumn("name", "text", (c) => c.notNull().check(sql`char_length(name) between 1 and 80`))
    .addColumn("created_at", "timestamptz", (c) => c.notNull())
    .addColumn("last_used_at", "timestamptz")
    .execute();
  await db.schema
    .createIndex("operator_passkeys_by_operator")
    .on("operator_passkeys")
    .column("operator_id")
    .execute();

  // One row per ceremony in flight, keyed by the SHA-256 of its challenge: taken by one DELETE, so a
  // response is accepted once; bound to the session that asked (or, before any session, to the
  // browser's cookie), so a challenge one browser asked for is worth nothing to another.
  await db.schema
    .createTable("webauthn_challenges")
    .addColumn("challenge_hash", "text", (c) => c.primaryKey())
    .addColumn("purpose", "text", (c) =>
      c.notNull().check(sql`purpose in ('register', 'second_factor', 'sign_in', 'step_up')`),
    )
    .addColumn("session_id", "text", (c) => c.references("operator_sessions.id").onDelete("cascade"))
    .addColumn("browser_hash", "text")
    .addColumn("expires_at", "timestamptz", (c) => c.notNull())
    .addCheckConstraint(
      "webauthn_challenges_bound",
      sql`(session_id is not null) <> (browser_hash is not null)`,
    )
    .execute();
  await db.schema
    .createIndex("webauthn_challenges_by_expiry")
    .on("webauthn_challenges")
    .column("expires_at")
    .execute();

  await db.schema
    .alterTable("operator_sessions")
    // When and how this session last proved its user (sign-in's second step, a passkey, a fresh
    // authenticator code): a step-up needs it within 5 minutes of the control plane's clock.
    .addColumn("verified_at", "timestamptz")
    .addColumn("verified_method", "text", (c) => c.check(sql`verified_method in ('passkey', 'totp', 'sso')`))
    .execute();

  // The organisation setting standing_approvals_need_passkey: its step-ups take a passkey only.
  await db.schema
    .alterTable("organisations")
    .addColumn("standing_approvals_need_passkey", "boolean", (c) => c.notNull().defaultTo(false))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("organisations").dropColumn("standing_approvals_need_passkey").execute();
  await db.schema
    .alterTable("operator_sessions")
    .dropColumn("verified_at")
    .dropColumn("verified_method")
    .execute();
  await db.schema.dropTable("webauthn_challenges").execute();
  await db.schema.dropTable("operator_passkeys").execute();
}
