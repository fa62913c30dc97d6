// A deleted organisation's id is never used again (DECISIONS "Ledger": its rows go only when the
// whole organisation goes). Before, one transaction could name an organisation for deletion, delete
// it (its ledger, head and checkpoints went with it), insert it again under the same id and append a
// chain of its choosing from seq 1 with plain inserts and forward moves of the head: the kept rows
// less the ones it wanted gone, which the next checkpoint then signed with the real key.
//   - Deleting an organisation leaves its id in `deleted_organisations`, append-only like the ledger.
//   - An organisation is never inserted (or renamed to) an id found there.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("deleted_organisations")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("deleted_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`
    create function latch_organisation_tombstone() returns trigger language plpgsql as $$
    begin
      insert into deleted_organisations (id) values (old.id) on conflict (id) do nothing;
      return old;
    end
    $$
  `.execute(db);
  await sql`
    create trigger organisations_tombstone after delete on organisations
    for each row execute function latch_organisation_tombstone()
  `.execute(db);
  await sql`
    create function latch_tombstones_append_only() returns trigger language plpgsql as $$
    begin
      raise exception 'the deleted organisations are append-only: % on % is refused', tg_op, tg_table_name
        using errcode = 'insufficient_privilege';
    end
    $$
  `.execute(db);
  await sql`
    create trigger deleted_organisations_append_only before update or delete on deleted_organisations
    for each row execute function latch_tombstones_append_only()
  `.execute(db);
  await sql`
    create trigger deleted_organisations_no_truncate before truncate on deleted_organisations
    for each statement execute function latch_tombstones_append_only()
  `.execute(db);
  await sql`
    create function latch_organisation_id_unused() returns trigger language plpgsql as $$
    begin
      if exists (select 1 from deleted_organisations where id = new.id) then
        raise exception 'organisation % was deleted, and a deleted organisation''s id is never used again', new.id
          using errcode = 'insufficient_privilege';
      end if;
      return new;
    end
    $$
  `.execute(db);
  await sql`
    create trigger organisations_id_unused before insert or update of id on organisations
    for each row execute function latch_organisation_id_unused()
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger organisations_id_unused on organisations`.execute(db);
  await sql`drop function latch_organisation_id_unused()`.execute(db);
  await sql`drop trigger organisations_tombstone on organisations`.execute(db);
  await sql`drop function latch_organisation_tombstone()`.execute(db);
  await db.schema.dropTable("deleted_organisations").execute();
  await sql`drop function latch_tombstones_append_only()`.execute(db);
}
