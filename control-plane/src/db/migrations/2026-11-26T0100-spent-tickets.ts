// The spent-ticket table of the egress proxies (DECISIONS "Faults and isolation in deployments"):
// made here, so that the proxy runs no DDL and its database role needs nothing but SELECT, INSERT
// and DELETE on this one table. A proxy spends a ticket id by inserting it before it dials; the
// control plane fences a ticket whose Execute did not answer by inserting the same id. The first
// insert wins. Deployments whose proxies made the table themselves keep it (IF NOT EXISTS).
import { type Kysely, sql } from "kysely";

/** The one database role the docs, the chart and compose give the proxies. */
const EGRESS_ROLE = "latch_egress";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("egress_spent_tickets")
    .ifNotExists()
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("expires_at", "timestamptz", (c) => c.notNull())
    .execute();
  // The store's own id, a row that never expires: a proxy reports it (GetInfo), and the control
  // plane fences in its own database only when the proxies spend tickets in this same table.
  await sql`INSERT INTO egress_spent_tickets (id, expires_at)
    SELECT 'store:' || gen_random_uuid()::text, 'infinity'
    WHERE NOT EXISTS (SELECT 1 FROM egress_spent_tickets WHERE id LIKE 'store:%')`.execute(db);
  // A latch_egress role made before this migration (compose's first start, the README's SQL) gets
  // its three privileges here; one made later is granted them by hand (README "Deployment"). A
  // table the proxy made itself, owned by another role, is left to that owner.
  await sql`DO $$
    BEGIN
      IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = ${sql.lit(EGRESS_ROLE)}) THEN
        GRANT SELECT, INSERT, DELETE ON egress_spent_tickets TO ${sql.id(EGRESS_ROLE)};
      END IF;
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END $$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("egress_spent_tickets").execute();
}
