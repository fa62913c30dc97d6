// Provider connect in flight (spec 4.3, DECISIONS "Providers"): the `state` of one authorize
// redirect, stored as its SHA-256, single use, bound to the operator session and organisation
// that started it, 10 minutes. A PKCE verifier is kept sealed to the proxy, never in clear.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("connect_states")
    .addColumn("state_hash", "text", (c) => c.primaryKey())
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("session_id", "text", (c) => c.notNull())
    .addColumn("provider", "text", (c) => c.notNull())
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("environment", "text", (c) => c.notNull())
    .addColumn("redirect_uri", "text", (c) => c.notNull())
    .addColumn("sealed_verifier", "bytea")
    .addColumn("sealing_key_id", "text")
    .addColumn("agent_client_id", "text")
    .addColumn("need_id", "text")
    .addColumn("expires_at", "timestamptz", (c) => c.notNull())
    .addColumn("used_at", "timestamptz")
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("connect_states").execute();
}
