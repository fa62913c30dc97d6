// A one-call approval held while its call's fence waits (the proxy did not answer, nobody could be
// asked yet: the agent was answered approval "held") is marked until the fence or
// calls/abandoned-calls.ts is sure to have decided it. A retry of the same call meanwhile is
// answered held again instead of opening a second request for it, which an operator would approve
// as a replacement and which, once the first approval came back, would let the call go twice.
// Only that failure path writes it; a decision (given back, or settled as spent) clears it.
import type { Kysely } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("grants").addColumn("held_until", "timestamptz").execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("grants").dropColumn("held_until").execute();
}
