// A single sign-on started as a step-up (DECISIONS "Passkeys and single sign-on"): the sign-in in
// flight keeps the max_age it asked the provider for, so its ID token must say when the person
// last proved themselves (auth_time) and that must be within it (OpenID Connect Core 3.1.2.1).
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("sso_states")
    .addColumn("max_age_s", "integer", (c) => c.check(sql`max_age_s >= 0`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("sso_states").dropColumn("max_age_s").execute();
}
