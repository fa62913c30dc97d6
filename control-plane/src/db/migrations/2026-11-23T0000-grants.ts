// Grants: an operator's approval for one agent to use one credential with one tool.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("grants")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("environment", "text", (c) => c.notNull())
    // Spec 4.3: deleting an item removes its approvals.
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("agent_id", "text", (c) => c.notNull())
    .addColumn("tool_id", "text", (c) => c.notNull().defaultTo("http_request"))
    .addColumn("policy", "text", (c) =>
      c.notNull().check(sql`policy in ('prompt', 'session', 'item_standing', 'folder_standing')`),
    )
    .addColumn("status", "text", (c) =>
      c.notNull().check(sql`status in ('pending', 'active', 'consumed', 'revoked', 'expired')`),
    )
    .addColumn("task_id", "text")
    .addColumn("task_description", "text", (c) => c.check(sql`char_length(task_description) <= 500`))
    .addColumn("created_at", "timestamptz", (c) => c.notNull())
    .addColumn("approved_at", "timestamptz")
    .addColumn("expires_at", "timestamptz")
    .addColumn("consumed_at", "timestamptz")
    .addColumn("revoked_at", "timestamptz")
    .execute();
  await db.schema
    .createIndex("grants_by_agent")
    .on("grants")
    .columns(["organisation_id", "agent_id", "item_id", "status"])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("grants").execute();
}
