// Emailed approval links (spec 4.3 GET|POST /approve?token=): a single-use token per pending grant,
// stored as its SHA-256 only.
import type { Kysely } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("grants").addColumn("approval_token_hash", "text").execute();
  await db.schema
    .createIndex("grants_by_approval_token")
    .on("grants")
    .column("approval_token_hash")
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("grants").dropColumn("approval_token_hash").execute();
}
