// Single sign-on (DECISIONS "Passkeys and single sign-on", third wave): an organisation's OpenID
// Connect connection, the sign-ins in flight, and the organisation a session begun with single
// sign-on is confined to (its provider vouches for that organisation, and no other).
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("sso_connections")
    .addColumn("organisation_id", "text", (c) =>
      c.primaryKey().references("organisations.id").onDelete("cascade"),
    )
    // The issuer exactly as its discovery document names it (OpenID Connect Discovery 4.3).
    .addColumn("issuer", "text", (c) => c.notNull())
    .addColumn("client_id", "text", (c) => c.notNull())
    // Sealed to the egress proxy like any credential: only the proxy opens it, at the token endpoint.
    .addColumn("sealed_client_secret", "bytea", (c) => c.notNull())
    .addColumn("sealing_key_id", "text", (c) => c.notNull())
    .addColumn("client_secret_last4", "text", (c) => c.notNull())
    .addColumn("email_domains", sql`text[]`, (c) => c.notNull())
    // Who an unknown address of those domains joins as: least privilege unless the owner says.
    .addColumn("default_role", "text", (c) =>
      c.notNull().defaultTo("auditor").check(sql`default_role in ('admin', 'approver', 'auditor')`),
    )
    .addColumn("require_sso", "boolean", (c) => c.notNull().defaultTo(false))
    .addColumn("created_at", "timestamptz", (c) => c.notNull())
    .addColumn("updated_at", "timestamptz", (c) => c.notNull())
    .execute();

  // One authorization request in flight: its state (hashed), single use, 10 minutes, bound to the
  // browser that started it by a cookie (hashed), with the nonce and the PKCE verifier (sealed to
  // the proxy, which alone sends it at the token endpoint).
  await db.schema
    .createTable("sso_states")
    .addColumn("state_hash", "text", (c) => c.primaryKey())
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("browser_hash", "text", (c) => c.notNull())
    .addColumn("nonce", "text", (c) => c.notNull())
    .addColumn("sealed_verifier", "bytea", (c) => c.notNull())
    .addColumn("sealing_key_id", "text", (c) => c.notNull())
    .addColumn("return_to", "text")
    .addColumn("expires_at", "timestamptz", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("sso_states_by_expiry").on("sso_states").column("expires_at").execute();

  await db.schema
    .alterTable("operator_sessions")
    .addColumn("sso_organisation_id", "text", (c) => c.references("organisations.id").onDelete("cascade"))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("operator_sessions").dropColumn("sso_organisation_id").execute();
  await db.schema.dropTable("sso_states").execute();
  await db.schema.dropTable("sso_connections").execute();
}
