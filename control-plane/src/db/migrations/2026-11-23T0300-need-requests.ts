// Need requests (spec 2.5, 3.2): an agent needs a credential nobody stored yet; the operator types
// it on the collect page. Counted with approval requests toward 30 per organisation per hour.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("need_requests")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("environment", "text", (c) => c.notNull())
    .addColumn("kind", "text", (c) => c.notNull().check(sql`kind in ('secret', 'connect')`))
    .addColumn("host", "text", (c) => c.notNull())
    .addColumn("suggested_name", "text", (c) => c.notNull())
    .addColumn("agent_id", "text", (c) => c.notNull())
    .addColumn("message", "text")
    .addColumn("status", "text", (c) => c.notNull().check(sql`status in ('pending', 'fulfilled', 'denied')`))
    .addColumn("item_id", "text", (c) => c.references("items.id").onDelete("set null"))
    .addColumn("created_at", "timestamptz", (c) => c.notNull())
    .addColumn("closed_at", "timestamptz")
    .execute();
  await db.schema
    .createIndex("need_requests_by_org_created")
    .on("need_requests")
    .columns(["organisation_id", "created_at"])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("need_requests").execute();
}
