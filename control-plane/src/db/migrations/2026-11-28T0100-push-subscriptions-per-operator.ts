// A push subscription is unique per (operator, endpoint), no longer per endpoint: subscribing an
// endpoint another operator holds reassigned that operator's row, so anyone who learned a device's
// endpoint URL could take its row, and the device's own operator stopped hearing of requests (the
// pushes then encrypted to the taker's keys). Now each operator's subscription is its own row. The
// unique index leads with operator_id, so it also serves the per-operator lookups of the old index.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table push_subscriptions drop constraint push_subscriptions_endpoint_key`.execute(db);
  await db.schema
    .createIndex("push_subscriptions_operator_endpoint")
    .on("push_subscriptions")
    .columns(["operator_id", "endpoint"])
    .unique()
    .execute();
  await db.schema.dropIndex("push_subscriptions_by_operator").execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  // Back to one row per endpoint: of an endpoint several operators hold, the newest row stays.
  await sql`
    delete from push_subscriptions p using push_subscriptions newer
    where newer.endpoint = p.endpoint
      and (newer.created_at, newer.id) > (p.created_at, p.id)`.execute(db);
  await db.schema
    .createIndex("push_subscriptions_by_operator")
    .on("push_subscriptions")
    .column("operator_id")
    .execute();
  await db.schema.dropIndex("push_subscriptions_operator_endpoint").execute();
  await sql`alter table push_subscriptions add constraint push_subscriptions_endpoint_key unique (endpoint)`.execute(
    db,
  );
}
