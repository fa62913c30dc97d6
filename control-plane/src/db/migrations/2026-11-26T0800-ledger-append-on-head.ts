// The sole writer's append (audit/ledger.repo.ts `appendOnHead`) as one function: the head row moves
// from the head this process knows to the row it hashed, and the row is inserted, or nothing
// happens and false comes back when the head is no longer the one known. A function's statements
// are planned once per connection; the same two as one CTE were parsed and planned on every
// append, which on the embedded database was most of the cost of an agent call. Nobody but the
// tables' owner (the control plane) may run it.
import { type Kysely, sql } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create function latch_ledger_append_on_head(
      p_organisation_id text, p_head_seq bigint, p_head_hash text, p_hash text, p_at timestamptz,
      p_environment text, p_actor text, p_action text, p_item_name text, p_host text,
      p_reason text, p_detail jsonb, p_trace_id text
    ) returns boolean language plpgsql as $$
    begin
      update audit_heads set seq = p_head_seq + 1, prev_hash = p_head_hash, hash = p_hash, at = p_at
        where organisation_id = p_organisation_id and seq = p_head_seq and hash = p_head_hash;
      if not found then
        return false;
      end if;
      insert into audit_events (organisation_id, seq, prev_hash, hash, at, environment, actor, action,
                                item_name, host, reason, detail, trace_id)
        values (p_organisation_id, p_head_seq + 1, p_head_hash, p_hash, p_at, p_environment, p_actor,
                p_action, p_item_name, p_host, p_reason, p_detail, p_trace_id);
      return true;
    end
    $$
  `.execute(db);
  await sql`revoke all on function latch_ledger_append_on_head(text, bigint, text, text, timestamptz, text, text, text, text, text, text, jsonb, text) from public`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop function latch_ledger_append_on_head(text, bigint, text, text, timestamptz, text, text, text, text, text, text, jsonb, text)`.execute(
    db,
  );
}
