// A client remembers the operator who holds its live bearer: who issued it, or who last rotated it
// (both see the token once). Removing that member from the organisation revokes the trusted
// clients (avt_) they hold (clients.service.ts revokeHeldBy). Rows from before are filled from the
// audit trail: the actor (`operator:<id>`) of the client's last `client_issued` or
// `client_rotated` row; one last issued or rotated by `system`, or with no such row, has none.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("clients").addColumn("issued_by", "text").execute();
  await sql`
    update clients set issued_by = (
      select case when last.actor like 'operator:%' then substr(last.actor, 10) end
      from (
        select audit_events.actor from audit_events
        where audit_events.organisation_id = clients.organisation_id
          and audit_events.action in ('client_issued', 'client_rotated')
          and audit_events.detail->>'client_id' = clients.id
        order by audit_events.seq desc
        limit 1
      ) as last
    )
    where oauth_client_id is null and revoked_at is null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("clients").dropColumn("issued_by").execute();
}
