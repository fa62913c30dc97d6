// Access tokens the proxy minted for an item (spec 4.2 rule 7, DECISIONS "Providers"): kept
// sealed, one per item, and reused until 60 seconds before `expires_at`. Deleted with the item.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("item_tokens")
    .addColumn("item_id", "text", (c) => c.primaryKey().references("items.id").onDelete("cascade"))
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("sealed_value", "bytea", (c) => c.notNull())
    .addColumn("sealing_key_id", "text", (c) => c.notNull())
    .addColumn("token_last4", "text", (c) => c.notNull())
    .addColumn("scope", "text", (c) => c.notNull())
    .addColumn("expires_at", "timestamptz", (c) => c.notNull())
    .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("item_tokens").execute();
}
