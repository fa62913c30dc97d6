// The session a push subscription was made in: a device signed out (its session revoked, ended by
// an administrator, or signed out everywhere) gets no more approval requests on its lock screen.
// Subscriptions made before keep none and are pushed to as before, until made again.
import type { Kysely } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("push_subscriptions").addColumn("session_id", "text").execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("push_subscriptions").dropColumn("session_id").execute();
}
