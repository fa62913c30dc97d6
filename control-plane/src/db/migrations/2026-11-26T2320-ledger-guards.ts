// The ledger's guards, tightened (DECISIONS "Ledger": deleting an organisation deletes its rows, all
// of them, and nothing else may). Before, a transaction that merely named an organisation in
// latch.delete_organisation could delete any of its rows and checkpoints, and the heads could be
// set anywhere: cut the chain's end, move the head back, and the verifier saw a whole chain.
//   - Ledger rows and checkpoints go only with their organisation: the named organisation must be
//     gone already (the cascade runs after its row is deleted).
//   - A head only moves forward by one row, onto the row it names as before it; it is made at seq 1
//     from 64 zeros, and goes only with its organisation.
import { type Kysely, sql } from "kysely";

/** The organisation named for deletion (orgs.repo.ts `deleteOrganisation`). */
const NAMED_FOR_DELETION = "old.organisation_id = current_setting('latch.delete_organisation', true)";
/** ... and already gone: the cascade runs after its organisation's row is deleted. */
const DELETED_WHOLE = `${NAMED_FOR_DELETION} and not exists (select 1 from organisations where id = old.organisation_id)`;

/** The ledger's append-only trigger function, letting a DELETE through where `deleteAllowed` holds. */
async function replaceAppendOnly(db: Kysely<unknown>, deleteAllowed: string): Promise<void> {
  await sql`
    create or replace function latch_ledger_append_only() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' then
        if ${sql.raw(deleteAllowed)} then
          return old;
        end if;
      end if;
      raise exception 'the audit ledger is append-only: % on % is refused', tg_op, tg_table_name
        using errcode = 'insufficient_privilege';
    end
    $$
  `.execute(db);
}

export async function up(db: Kysely<unknown>): Promise<void> {
  await replaceAppendOnly(db, DELETED_WHOLE);
  await sql`
    create function latch_ledger_head_moves_forward() returns trigger language plpgsql as $$
    begin
      if tg_op = 'INSERT' then
        if new.seq = 1 and new.prev_hash = repeat('0', 64) then
          return new;
        end if;
      elsif tg_op = 'UPDATE' then
        if new.organisation_id = old.organisation_id and new.seq = old.seq + 1
           and new.prev_hash = old.hash then
          return new;
        end if;
      elsif tg_op = 'DELETE' then
        if ${sql.raw(DELETED_WHOLE)} then
          return old;
        end if;
      end if;
      raise exception 'the audit ledger''s head only moves forward: % on audit_heads is refused', tg_op
        using errcode = 'insufficient_privilege';
    end
    $$
  `.execute(db);
  await sql`
    create trigger audit_heads_forward before insert or update or delete on audit_heads
    for each row execute function latch_ledger_head_moves_forward()
  `.execute(db);
  await sql`
    create trigger audit_heads_no_truncate before truncate on audit_heads
    for each statement execute function latch_ledger_head_moves_forward()
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger audit_heads_no_truncate on audit_heads`.execute(db);
  await sql`drop trigger audit_heads_forward on audit_heads`.execute(db);
  await sql`drop function latch_ledger_head_moves_forward()`.execute(db);
  await replaceAppendOnly(db, NAMED_FOR_DELETION);
}
