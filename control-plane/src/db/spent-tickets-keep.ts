// The keep trigger of the proxies' spent-ticket table (migration 2026-11-27T0100), put on at every
// start once the table is this role's: a table a proxy of an earlier release made itself belonged
// to the proxies' role when that migration ran, so it got none, and the table has since been handed
// over (`ALTER TABLE ... OWNER TO`, as README "Deployment" and compose's role script do). Until
// then the recovery of abandoned calls concludes nothing from the table (grants.repo.ts
// is_remembered asks for the trigger). Replicas starting at once may race: the second is a no-op.
import { type Kysely, sql } from "kysely";

export async function ensureSpentTicketsKeep(db: Kysely<unknown>): Promise<void> {
  await sql`DO $$
    BEGIN
      IF EXISTS (
        SELECT 1 FROM pg_catalog.pg_tables
        WHERE schemaname = current_schema() AND tablename = 'egress_spent_tickets'
          AND tableowner = current_user
      ) AND NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_trigger
        WHERE tgname = 'egress_spent_tickets_keep' AND tgrelid = to_regclass('egress_spent_tickets')
      ) THEN
        CREATE TRIGGER egress_spent_tickets_keep BEFORE DELETE ON egress_spent_tickets
        FOR EACH ROW EXECUTE FUNCTION egress_spent_tickets_keep();
      END IF;
    EXCEPTION WHEN duplicate_object THEN NULL;
    END $$`.execute(db);
}
