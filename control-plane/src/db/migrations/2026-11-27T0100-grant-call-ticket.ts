// A one-call approval remembers the ticket its call was handed to the proxy under, until the
// call's outcome is settled (answered, given back, or written as unknown), and whether the proxies
// spent ids in this database's table when it left. A control plane killed in between leaves the
// ticket here; calls/abandoned-calls.ts finds it later, fences it and gives the approval back when
// no proxy ran it, or writes the outcome the ledger is missing.
//
// That conclusion holds only while the table still remembers every spend, so the table now keeps
// each spent id five minutes past its expiry whatever a proxy asks: a trigger skips the DELETE of a
// younger row (a proxy of an earlier release swept after one minute).
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("grants")
    .addColumn("call_ticket_id", "text")
    .addColumn("call_ticket_expires_at", "timestamptz")
    .addColumn("call_ticket_shared", "boolean")
    .execute();
  await db.schema
    .createIndex("grants_unsettled_calls")
    .on("grants")
    .column("call_ticket_expires_at")
    .where(sql.ref("call_ticket_id"), "is not", null)
    .execute();
  await sql`
    create function egress_spent_tickets_keep() returns trigger language plpgsql as $$
    begin
      if old.expires_at > now() - interval '5 minutes' then
        return null;
      end if;
      return old;
    end
    $$
  `.execute(db);
  // A table a proxy of an earlier release made itself belongs to the proxies' role: no trigger can
  // be put on it from here, and the migration must not stop every replica's start for that. The
  // table then gets no guard, and abandoned-calls.ts concludes nothing from it (grants.repo.ts
  // findUnsettledCalls: is_remembered asks for the trigger), so those approvals stay spent.
  await sql`DO $$
    BEGIN
      IF EXISTS (
        SELECT 1 FROM pg_catalog.pg_tables
        WHERE schemaname = current_schema() AND tablename = 'egress_spent_tickets'
          AND tableowner = current_user
      ) THEN
        CREATE TRIGGER egress_spent_tickets_keep BEFORE DELETE ON egress_spent_tickets
        FOR EACH ROW EXECUTE FUNCTION egress_spent_tickets_keep();
      ELSE
        RAISE NOTICE 'egress_spent_tickets belongs to another role: no keep trigger';
      END IF;
    END $$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger if exists egress_spent_tickets_keep on egress_spent_tickets`.execute(db);
  await sql`drop function egress_spent_tickets_keep()`.execute(db);
  await db.schema.dropIndex("grants_unsettled_calls").execute();
  await db.schema
    .alterTable("grants")
    .dropColumn("call_ticket_id")
    .dropColumn("call_ticket_expires_at")
    .dropColumn("call_ticket_shared")
    .execute();
}
