// A pending authenticator enrolment belongs to the session that started it: another session of the
// same account (one that could not have started it) neither reads its secret nor confirms it.
import type { Kysely } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("operators").addColumn("pending_totp_session_id", "text").execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("operators").dropColumn("pending_totp_session_id").execute();
}
