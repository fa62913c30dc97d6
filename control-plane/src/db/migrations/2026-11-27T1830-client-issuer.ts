// A client remembers the operator who holds its live bearer: who issued it, or who last rotated it
// (both see the token once). Removing that member from the organisation revokes the trusted
// clients (avt_) they hold (clients.service.ts revokeHeldBy). Rows from before have none.
import type { Kysely } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("clients").addColumn("issued_by", "text").execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("clients").dropColumn("issued_by").execute();
}
