// Push subscriptions made before the session was recorded (2026-11-26T1900) named none, and were
// pushed to whether or not that device had signed out since: an agent, a credential, a method, a
// host and a path on the lock screen of a device nobody is signed in on. They are dropped; the
// console subscribes a device again when its operator turns notifications on.
import type { Kysely } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await (db as Kysely<{ push_subscriptions: { session_id: string | null } }>)
    .deleteFrom("push_subscriptions")
    .where("session_id", "is", null)
    .execute();
}

export async function down(): Promise<void> {
  // The dropped subscriptions are not brought back: their devices subscribe again.
}
