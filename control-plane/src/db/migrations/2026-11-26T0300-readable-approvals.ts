// The approval, readable and reversible (DECISIONS, third wave): who decided each grant, when an
// approval was last used, the body a pending request would send, and a request repeated after a
// Deny; when a credential was last used.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("grants")
    // Operator ids: who approved (any path: inbox, code, link, fulfil, connect) and who denied or
    // revoked. Members and roles (teams) name the member from these.
    .addColumn("approved_by", "text")
    .addColumn("revoked_by", "text")
    .addColumn("last_used_at", "timestamptz")
    // The agent's body as it would be sent, its first 64 KiB (never a stored secret: the proxy
    // injects those later), with the whole body's size and its content type.
    .addColumn("call_body", "text", (c) => c.check(sql`octet_length(call_body) <= 65536`))
    .addColumn("call_body_bytes", "integer")
    .addColumn("call_content_type", "text")
    // Set on a request asked again within 10 minutes of a Deny of the same call by the same agent.
    .addColumn("after_deny_at", "timestamptz")
    .execute();
  await db.schema
    .alterTable("need_requests")
    .addColumn("call_body", "text", (c) => c.check(sql`octet_length(call_body) <= 65536`))
    .addColumn("call_body_bytes", "integer")
    .addColumn("call_content_type", "text")
    .execute();
  await db.schema.alterTable("items").addColumn("last_used_at", "timestamptz").execute();
  // The Approvals section lists an organisation's active approvals.
  await db.schema
    .createIndex("grants_by_status")
    .on("grants")
    .columns(["organisation_id", "status"])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex("grants_by_status").execute();
  await db.schema.alterTable("items").dropColumn("last_used_at").execute();
  await db.schema
    .alterTable("need_requests")
    .dropColumn("call_body")
    .dropColumn("call_body_bytes")
    .dropColumn("call_content_type")
    .execute();
  await db.schema
    .alterTable("grants")
    .dropColumn("approved_by")
    .dropColumn("revoked_by")
    .dropColumn("last_used_at")
    .dropColumn("call_body")
    .dropColumn("call_body_bytes")
    .dropColumn("call_content_type")
    .dropColumn("after_deny_at")
    .execute();
}
