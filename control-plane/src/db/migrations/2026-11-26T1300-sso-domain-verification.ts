// Single sign-on's domains, proven (the third wave's SSO, made safe for many organisations on one
// service): listing a domain no longer lets a connection make accounts of its addresses, route
// "Sign in with SSO" to itself or require itself of them. First the organisation publishes a DNS
// TXT record with its own token (`_latch-verification.<domain>`), and Latch reads it through the
// egress proxy. A connection from before keeps its domains listed, none verified.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("sso_connections")
    // The value the organisation's TXT records carry; made with the connection, kept across edits.
    .addColumn("domain_token", "text", (c) => c.notNull().defaultTo(""))
    // The listed domains whose record was found, a subset of email_domains.
    .addColumn("verified_domains", sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'::text[]`))
    .execute();
  // A token for each connection from before (published in DNS: it need be unique, not secret).
  await sql`update sso_connections set domain_token = md5(organisation_id || random()::text || clock_timestamp()::text)
            where domain_token = ''`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("sso_connections").dropColumn("verified_domains").execute();
  await db.schema.alterTable("sso_connections").dropColumn("domain_token").execute();
}
