// The authenticator step a session last verified with (a code is single use, RFC 6238 5.2): the
// one code a form behind a step-up may carry again is the one this session spent, never one
// another session or device spent, nor any after a step-up made with a backup code.
import type { Kysely } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("operator_sessions").addColumn("verified_totp_step", "bigint").execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("operator_sessions").dropColumn("verified_totp_step").execute();
}
