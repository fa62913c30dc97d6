// Proven single sign-on domains are checked again (sso/domain-recheck.ts): once a day each proven
// domain's TXT record is read again, and a domain whose record three checks in a row did not find
// stops counting. A DNS that could not be read counts for nothing either way.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("sso_connections")
    // When a replica last took this connection's proven domains to check (null: never).
    .addColumn("domains_checked_at", "timestamptz")
    // Proven domain -> checks in a row that did not find its record.
    .addColumn("domain_misses", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("sso_connections").dropColumn("domain_misses").execute();
  await db.schema.alterTable("sso_connections").dropColumn("domains_checked_at").execute();
}
