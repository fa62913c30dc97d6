// Need requests (issue 21 items 6 and 10): an agent that names a credential by item_name alone
// asks for it without a host (the operator names the host on the collect page), and a connect
// request closed by a connect that carries need_id is `closed` (spec 3.2), not `fulfilled`.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("need_requests")
    .alterColumn("host", (c) => c.dropNotNull())
    .execute();
  await sql`alter table need_requests drop constraint need_requests_status_check`.execute(db);
  await sql`alter table need_requests add constraint need_requests_status_check
    check (status in ('pending', 'fulfilled', 'denied', 'closed'))`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`update need_requests set status = 'fulfilled' where status = 'closed'`.execute(db);
  await sql`alter table need_requests drop constraint need_requests_status_check`.execute(db);
  await sql`alter table need_requests add constraint need_requests_status_check
    check (status in ('pending', 'fulfilled', 'denied'))`.execute(db);
  await sql`delete from need_requests where host is null`.execute(db);
  await db.schema
    .alterTable("need_requests")
    .alterColumn("host", (c) => c.setNotNull())
    .execute();
}
