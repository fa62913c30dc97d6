// The OAuth authorization server (spec 4.3 "OAuth endpoints", 5 rules 1 and 2): what oidc-provider
// stores (codes, refresh tokens, grants, sessions, interactions, registered clients, device codes)
// keyed by a hash of their id, the consents that bind a grant to one organisation, the access-token
// denylist, and the counters of the per-IP and per-host limits of spec 8.
import type { Kysely } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("oauth_artifacts")
    .addColumn("model", "text", (c) => c.notNull())
    // SHA-256 of the artifact id: a refresh token's id is the token itself.
    .addColumn("id_hash", "text", (c) => c.notNull())
    .addColumn("payload", "jsonb", (c) => c.notNull())
    .addColumn("grant_id", "text")
    .addColumn("user_code_hash", "text")
    .addColumn("uid_hash", "text")
    .addColumn("account_id", "text")
    .addColumn("expires_at", "timestamptz")
    .addColumn("consumed_at", "timestamptz")
    .addPrimaryKeyConstraint("oauth_artifacts_pk", ["model", "id_hash"])
    .execute();
  await db.schema.createIndex("oauth_artifacts_grant").on("oauth_artifacts").column("grant_id").execute();
  await db.schema
    .createIndex("oauth_artifacts_user_code")
    .on("oauth_artifacts")
    .column("user_code_hash")
    .execute();
  await db.schema.createIndex("oauth_artifacts_uid").on("oauth_artifacts").column("uid_hash").execute();

  // One consent: an operator let an OAuth client act in one organisation, as one model client row.
  await db.schema
    .createTable("oauth_consents")
    .addColumn("grant_id", "text", (c) => c.primaryKey())
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("operator_id", "text", (c) => c.notNull())
    .addColumn("client_row_id", "text", (c) => c.notNull().references("clients.id").onDelete("cascade"))
    .addColumn("created_at", "timestamptz", (c) => c.notNull())
    .addColumn("revoked_at", "timestamptz")
    .execute();
  await db.schema.createIndex("oauth_consents_client").on("oauth_consents").column("client_row_id").execute();

  // JWT access tokens are not stored; a revoked one is listed by a hash of its jti until it expires.
  await db.schema
    .createTable("oauth_denied_tokens")
    .addColumn("jti_hash", "text", (c) => c.primaryKey())
    .addColumn("expires_at", "timestamptz", (c) => c.notNull())
    .execute();

  // An OAuth client acting in an organisation is a model client row with no bearer of its own.
  await db.schema.alterTable("clients").addColumn("oauth_client_id", "text").execute();

  // Counted limits keyed by IP, document host, browser session (spec 8).
  await db.schema
    .createTable("rate_limit_hits")
    .addColumn("id", "bigserial", (c) => c.primaryKey())
    .addColumn("bucket", "text", (c) => c.notNull())
    .addColumn("at", "timestamptz", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("rate_limit_hits_bucket")
    .on("rate_limit_hits")
    .columns(["bucket", "at"])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("rate_limit_hits").execute();
  await db.schema.alterTable("clients").dropColumn("oauth_client_id").execute();
  await db.schema.dropTable("oauth_denied_tokens").execute();
  await db.schema.dropTable("oauth_consents").execute();
  await db.schema.dropTable("oauth_artifacts").execute();
}
