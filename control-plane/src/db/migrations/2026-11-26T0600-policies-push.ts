// Organisation policies (DECISIONS "Policies"): one ordered list of rules per organisation, kept
// whole with its version (PUT replaces it, If-Match names the version it replaces). And Web Push
// subscriptions (DECISIONS "Approvals that reach the operator"): a browser's push endpoint and its
// RFC 8291 keys (public by design: the user agent's ECDH public key and auth secret only let a
// sender encrypt to it), kept per operator, deleted with the operator or when the push service
// answers 404 or 410.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("policy_lists")
    .addColumn("organisation_id", "text", (c) =>
      c.primaryKey().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("version", "integer", (c) => c.notNull().check(sql`version >= 1`))
    .addColumn("rules", "jsonb", (c) => c.notNull())
    .addColumn("updated_at", "timestamptz", (c) => c.notNull())
    .addColumn("updated_by", "text")
    .execute();

  await db.schema
    .createTable("push_subscriptions")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("operator_id", "text", (c) => c.notNull().references("operators.id").onDelete("cascade"))
    .addColumn("endpoint", "text", (c) => c.notNull().unique())
    .addColumn("p256dh", "text", (c) => c.notNull())
    .addColumn("auth", "text", (c) => c.notNull())
    .addColumn("created_at", "timestamptz", (c) => c.notNull())
    .addColumn("last_pushed_at", "timestamptz")
    .execute();
  await db.schema
    .createIndex("push_subscriptions_by_operator")
    .on("push_subscriptions")
    .column("operator_id")
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("push_subscriptions").execute();
  await db.schema.dropTable("policy_lists").execute();
}
