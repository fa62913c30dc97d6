// Organisations, folders, items (sealed values only) and the audit trail. Imports no app code.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("organisations")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("name", "text", (c) => c.notNull().check(sql`char_length(name) between 1 and 80`))
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable("folders")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("environment", "text", (c) => c.notNull().check(sql`environment in ('staging', 'production')`))
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint("folders_name_unique", ["organisation_id", "environment", "name"])
    .execute();

  await db.schema
    .createTable("items")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("environment", "text", (c) => c.notNull().check(sql`environment in ('staging', 'production')`))
    // Spec 2.1: [A-Z][A-Z0-9_]{0,127}; checked here too so no code path can store another shape.
    .addColumn("name", "text", (c) => c.notNull().check(sql`name ~ '^[A-Z][A-Z0-9_]{0,127}$'`))
    .addColumn("kind", "text", (c) => c.notNull().check(sql`kind in ('secret', 'client_secret', 'login')`))
    // The value exists here only as a libsodium sealed box to the egress proxy's key.
    .addColumn("sealed_value", "bytea", (c) => c.notNull())
    .addColumn("sealing_key_id", "text", (c) => c.notNull())
    .addColumn("last4", "text", (c) => c.notNull())
    .addColumn("allowed_hosts", sql`text[]`, (c) => c.notNull())
    .addColumn("inject", "text", (c) => c.notNull())
    .addColumn("username", "text")
    .addColumn("folder_id", "text", (c) => c.references("folders.id").onDelete("set null"))
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint("items_name_unique", ["organisation_id", "environment", "name"])
    .execute();
  // find_items and host-only http_request look items up by host.
  await sql`create index items_allowed_hosts on items using gin (allowed_hosts)`.execute(db);

  await db.schema
    .createTable("audit_events")
    .addColumn("id", "bigserial", (c) => c.primaryKey())
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("environment", "text")
    .addColumn("at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn("actor", "text", (c) => c.notNull())
    .addColumn("action", "text", (c) => c.notNull())
    .addColumn("item_name", "text")
    .addColumn("host", "text")
    .addColumn("reason", "text")
    .addColumn("detail", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .execute();
  await db.schema
    .createIndex("audit_events_by_organisation")
    .on("audit_events")
    .columns(["organisation_id", "id desc"])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ["audit_events", "items", "folders", "organisations"]) {
    await db.schema.dropTable(table).execute();
  }
}
