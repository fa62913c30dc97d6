// A policy list waiting for a second member (DECISIONS "Teams", two-person rule; "Policies"): under
// `standing_approvals_need` 2 a list that may allow more than the saved one is not applied but kept
// here, one per organisation (a newer proposal replaces it), until another member confirms it
// against the version it was made from, or someone discards it.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("policy_proposals")
    .addColumn("organisation_id", "text", (c) =>
      c.primaryKey().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("id", "text", (c) => c.notNull().unique())
    .addColumn("base_version", "integer", (c) => c.notNull().check(sql`base_version >= 0`))
    .addColumn("rules", "jsonb", (c) => c.notNull())
    .addColumn("proposed_by", "text", (c) => c.notNull())
    .addColumn("proposed_at", "timestamptz", (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("policy_proposals").execute();
}
