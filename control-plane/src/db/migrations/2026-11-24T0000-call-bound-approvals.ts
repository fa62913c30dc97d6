// Approvals bound to the call they were asked for (DECISIONS "Approvals"): a pending grant made by
// http_request records that call's method, host, validated path with its query, and the SHA-256 of
// the exact body bytes, so a prompt or session approval covers what the operator saw and no more.
import type { Kysely } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("grants")
    .addColumn("call_method", "text")
    .addColumn("call_host", "text")
    .addColumn("call_path", "text")
    .addColumn("call_body_sha256", "text")
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("grants")
    .dropColumn("call_method")
    .dropColumn("call_host")
    .dropColumn("call_path")
    .dropColumn("call_body_sha256")
    .execute();
}
