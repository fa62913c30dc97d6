// Model and trusted clients (bearer tokens stored as hashes), approval codes on grants, standing
// grant scopes, and the rows the per-organisation limits count.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("clients")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("kind", "text", (c) => c.notNull().check(sql`kind in ('model', 'trusted')`))
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("environment", "text", (c) => c.notNull())
    .addColumn("token_hash", "text", (c) => c.notNull().unique())
    .addColumn("token_last4", "text", (c) => c.notNull())
    .addColumn("created_at", "timestamptz", (c) => c.notNull())
    .addColumn("rotated_at", "timestamptz")
    .addColumn("revoked_at", "timestamptz")
    .addColumn("first_used_at", "timestamptz")
    .addColumn("last_used_at", "timestamptz")
    .execute();

  await db.schema
    .alterTable("grants")
    .addColumn("approval_code_hash", "text")
    .addColumn("approval_code_expires_at", "timestamptz")
    .addColumn("approval_code_wrong", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("scope_host", "text")
    .addColumn("scope_method", "text")
    .addColumn("scope_path", "text")
    .addColumn("folder_id", "text", (c) => c.references("folders.id").onDelete("cascade"))
    .execute();

  // Wrong approval codes per organisation (20 per 15 minutes).
  await db.schema
    .createTable("approval_code_failures")
    .addColumn("id", "bigserial", (c) => c.primaryKey())
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("at", "timestamptz", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("approval_code_failures_by_org")
    .on("approval_code_failures")
    .columns(["organisation_id", "at"])
    .execute();
  await db.schema
    .createIndex("grants_by_org_created")
    .on("grants")
    .columns(["organisation_id", "created_at"])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("approval_code_failures").execute();
  await db.schema
    .alterTable("grants")
    .dropColumn("approval_code_hash")
    .dropColumn("approval_code_expires_at")
    .dropColumn("approval_code_wrong")
    .dropColumn("scope_host")
    .dropColumn("scope_method")
    .dropColumn("scope_path")
    .dropColumn("folder_id")
    .execute();
  await db.schema.dropTable("clients").execute();
}
