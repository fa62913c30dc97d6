// A client remembers the operator who holds its live bearer: who issued it, or who last rotated it
// (both see the token once). Removing that member from the organisation revokes the trusted
// clients (avt_) they hold (clients.service.ts revokeHeldBy). Rows from before are filled from the
// audit trail: the actor (`operator:<id>`) of the client's last `client_issued` or
// `client_rotated` row; one last issued or rotated by `system`, or with no such row, has none.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("clients").addColumn("issued_by", "text").execute();
  // One pass over the trail, not one search of it per client: an old organisation holds millions of
  // rows, and the clients table stays locked by the ALTER above until this transaction ends.
  await sql`
    update clients set issued_by = last.issued_by
    from (
      select distinct on (organisation_id, detail->>'client_id')
        organisation_id,
        detail->>'client_id' as client_id,
        case when actor like 'operator:%' then substr(actor, 10) end as issued_by
      from audit_events
      where action in ('client_issued', 'client_rotated')
      order by organisation_id, detail->>'client_id', seq desc
    ) as last
    where last.organisation_id = clients.organisation_id
      and last.client_id = clients.id
      and clients.oauth_client_id is null
      and clients.revoked_at is null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("clients").dropColumn("issued_by").execute();
}
