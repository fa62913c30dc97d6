// A need request made by http_request records the call that asked (DECISIONS "Approvals"), so the
// one-call approval that fulfilling it activates covers that call only, as a pending grant would.
import type { Kysely } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("need_requests")
    .addColumn("call_method", "text")
    .addColumn("call_host", "text")
    .addColumn("call_path", "text")
    .addColumn("call_body_sha256", "text")
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("need_requests")
    .dropColumn("call_method")
    .dropColumn("call_host")
    .dropColumn("call_path")
    .dropColumn("call_body_sha256")
    .execute();
}
