// Operators and their sign-in: email challenges, authenticator secrets (wrapped under the KEK),
// backup codes (hashed), sessions (token hashed), and organisation memberships.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("operators")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("email", "text", (c) => c.notNull().unique())
    .addColumn("created_at", "timestamptz", (c) => c.notNull())
    .addColumn("totp_enabled", "boolean", (c) => c.notNull().defaultTo(false))
    // AES-256-GCM under the key-encryption key named by totp_kek_id (vault kek-rotate re-wraps).
    .addColumn("totp_secret", "bytea")
    .addColumn("totp_kek_id", "text")
    // RFC 6238 section 5.2: a code is accepted once; the last accepted time step is kept.
    .addColumn("totp_last_step", "bigint", (c) => c.notNull().defaultTo(0))
    .addColumn("totp_failures", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("totp_locked_until", "timestamptz")
    .addColumn("pending_totp_secret", "bytea")
    .addColumn("pending_totp_kek_id", "text")
    .addColumn("pending_totp_expires_at", "timestamptz")
    .execute();

  await db.schema
    .createTable("backup_codes")
    .addColumn("id", "bigserial", (c) => c.primaryKey())
    .addColumn("operator_id", "text", (c) => c.notNull().references("operators.id").onDelete("cascade"))
    .addColumn("code_hash", "text", (c) => c.notNull())
    .addColumn("used_at", "timestamptz")
    .execute();

  // One live challenge per email: a new send replaces the old one (spec 3.3).
  await db.schema
    .createTable("email_challenges")
    .addColumn("email", "text", (c) => c.primaryKey())
    .addColumn("code_hash", "text", (c) => c.notNull())
    .addColumn("expires_at", "timestamptz", (c) => c.notNull())
    .addColumn("wrong_attempts", "integer", (c) => c.notNull().defaultTo(0))
    .execute();

  // Sends per email in a sliding window (5 per 15 minutes), counted in the database so the limit
  // holds across replicas.
  await db.schema
    .createTable("email_sends")
    .addColumn("id", "bigserial", (c) => c.primaryKey())
    .addColumn("email", "text", (c) => c.notNull())
    .addColumn("sent_at", "timestamptz", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("email_sends_by_email")
    .on("email_sends")
    .columns(["email", "sent_at"])
    .execute();

  await db.schema
    .createTable("operator_sessions")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("token_hash", "text", (c) => c.notNull().unique())
    .addColumn("csrf_hash", "text", (c) => c.notNull())
    .addColumn("operator_id", "text", (c) => c.notNull().references("operators.id").onDelete("cascade"))
    .addColumn("organisation_id", "text", (c) => c.references("organisations.id").onDelete("set null"))
    .addColumn("is_mfa_passed", "boolean", (c) => c.notNull().defaultTo(false))
    .addColumn("user_agent", "text")
    .addColumn("created_at", "timestamptz", (c) => c.notNull())
    .addColumn("last_seen_at", "timestamptz", (c) => c.notNull())
    .addColumn("revoked_at", "timestamptz")
    .execute();

  await db.schema
    .createTable("memberships")
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("operator_id", "text", (c) => c.notNull().references("operators.id").onDelete("cascade"))
    .addColumn("role", "text", (c) => c.notNull().check(sql`role in ('owner', 'member')`))
    .addColumn("created_at", "timestamptz", (c) => c.notNull())
    .addPrimaryKeyConstraint("memberships_pk", ["organisation_id", "operator_id"])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of [
    "memberships",
    "operator_sessions",
    "email_sends",
    "email_challenges",
    "backup_codes",
    "operators",
  ]) {
    await db.schema.dropTable(table).execute();
  }
}
