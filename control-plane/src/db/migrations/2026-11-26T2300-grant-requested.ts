// Which grants were asked for (request_grant, an http_request waiting for approval, POST
// /api/grants/request), as against approvals an operator wrote ahead of any request: spec 8's 30
// new requests an hour count the first kind, hosted and local alike. Until now only hosted requests
// were counted, by their approval code; those are marked here.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("grants")
    .addColumn("requested", "boolean", (column) => column.notNull().defaultTo(false))
    .execute();
  await sql`update grants set requested = true where approval_code_expires_at is not null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("grants").dropColumn("requested").execute();
}
