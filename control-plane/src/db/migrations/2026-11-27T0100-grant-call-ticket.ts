// A one-call approval remembers the ticket its call was handed to the proxy under, until the
// call's outcome is settled (answered, given back, or written as unknown). A control plane killed
// in between leaves the ticket here; calls/abandoned-calls.ts finds it later, fences it and gives
// the approval back when no proxy ran it, or writes the outcome the ledger is missing.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("grants")
    .addColumn("call_ticket_id", "text")
    .addColumn("call_ticket_expires_at", "timestamptz")
    .execute();
  await db.schema
    .createIndex("grants_unsettled_calls")
    .on("grants")
    .column("call_ticket_expires_at")
    .where(sql.ref("call_ticket_id"), "is not", null)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex("grants_unsettled_calls").execute();
  await db.schema
    .alterTable("grants")
    .dropColumn("call_ticket_id")
    .dropColumn("call_ticket_expires_at")
    .execute();
}
