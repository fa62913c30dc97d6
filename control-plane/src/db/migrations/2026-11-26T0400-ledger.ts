// The audit becomes a hash-chained ledger per organisation (DECISIONS "Ledger and telemetry"):
// seq without gaps, prev_hash, hash, trace_id; a head row per organisation that appending updates
// (the lock that serialises one organisation's appends, and nothing else's); signed checkpoints;
// and a trigger that refuses UPDATE, DELETE and TRUNCATE on both, except the deletion of a whole
// organisation by the transaction that names it in `latch.delete_organisation`.
//
// Rows written before this migration are chained here, in id order, with the same canonical form
// the application computes (shared/src/ledger/ledger-format.ts: the form is fixed for ever, or old chains break).

import { type LedgerRow, rowHash, ZERO_HASH } from "@latch/shared/ledger/ledger-format";
import { type Kysely, sql } from "kysely";

const BATCH = 500;

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("audit_events")
    .addColumn("seq", "bigint")
    .addColumn("prev_hash", "text")
    .addColumn("hash", "text")
    .addColumn("trace_id", "text")
    .execute();
  // The ledger's times have milliseconds (RFC 3339 as exported); older rows had microseconds.
  await sql`update audit_events set at = date_trunc('milliseconds', at)`.execute(db);
  await chainExistingRows(db);
  await sql`
    alter table audit_events
      alter column seq set not null,
      alter column prev_hash set not null,
      alter column hash set not null,
      add constraint audit_events_seq_positive check (seq >= 1),
      add constraint audit_events_hash_hex check (hash ~ '^[0-9a-f]{64}$' and prev_hash ~ '^[0-9a-f]{64}$')
  `.execute(db);
  await db.schema
    .createIndex("audit_events_chain")
    .unique()
    .on("audit_events")
    .columns(["organisation_id", "seq"])
    .execute();

  await db.schema
    .createTable("audit_heads")
    .addColumn("organisation_id", "text", (c) =>
      c.primaryKey().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("seq", "bigint", (c) => c.notNull())
    .addColumn("prev_hash", "text", (c) => c.notNull())
    .addColumn("hash", "text", (c) => c.notNull())
    .addColumn("at", "timestamptz", (c) => c.notNull())
    .execute();
  await sql`
    insert into audit_heads (organisation_id, seq, prev_hash, hash, at)
    select distinct on (organisation_id) organisation_id, seq, prev_hash, hash, at
    from audit_events order by organisation_id, seq desc
  `.execute(db);

  await db.schema
    .createTable("audit_checkpoints")
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("seq", "bigint", (c) => c.notNull())
    .addColumn("hash", "text", (c) => c.notNull())
    .addColumn("at", "timestamptz", (c) => c.notNull())
    .addColumn("key_id", "text", (c) => c.notNull())
    .addColumn("signature", "text", (c) => c.notNull())
    .addPrimaryKeyConstraint("audit_checkpoints_pk", ["organisation_id", "seq"])
    .execute();

  // The one exception (spec 4.3, deleting an organisation deletes everything in it): a transaction
  // that set latch.delete_organisation to that organisation's id may delete its rows.
  await sql`
    create function latch_ledger_append_only() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' then
        if old.organisation_id = current_setting('latch.delete_organisation', true) then
          return old;
        end if;
      end if;
      raise exception 'the audit ledger is append-only: % on % is refused', tg_op, tg_table_name
        using errcode = 'insufficient_privilege';
    end
    $$
  `.execute(db);
  for (const table of ["audit_events", "audit_checkpoints"]) {
    await sql`
      create trigger ${sql.id(`${table}_append_only`)} before update or delete on ${sql.table(table)}
      for each row execute function latch_ledger_append_only()
    `.execute(db);
    await sql`
      create trigger ${sql.id(`${table}_no_truncate`)} before truncate on ${sql.table(table)}
      for each statement execute function latch_ledger_append_only()
    `.execute(db);
  }
}

/** Gives every existing row its seq, prev_hash and hash, organisation by organisation. */
async function chainExistingRows(db: Kysely<unknown>): Promise<void> {
  const organisations = await sql<{ organisation_id: string }>`
    select distinct organisation_id from audit_events
  `.execute(db);
  for (const { organisation_id } of organisations.rows) {
    let seq = 0;
    let prevHash = ZERO_HASH;
    let afterId = "0";
    for (;;) {
      const batch = await sql<{
        id: string;
        at: Date;
        environment: string | null;
        actor: string;
        action: string;
        item_name: string | null;
        host: string | null;
        reason: string | null;
        detail: LedgerRow["detail"];
      }>`
        select id, at, environment, actor, action, item_name, host, reason, detail from audit_events
        where organisation_id = ${organisation_id} and id > ${afterId}::bigint order by id limit ${BATCH}
      `.execute(db);
      if (batch.rows.length === 0) break;
      const chained = batch.rows.map((row) => {
        seq += 1;
        const hash = rowHash({
          type: "event",
          organisation_id,
          seq,
          prev_hash: prevHash,
          at: new Date(row.at).toISOString(),
          environment: row.environment,
          actor: row.actor,
          action: row.action,
          item_name: row.item_name,
          host: row.host,
          reason: row.reason,
          detail: row.detail,
          trace_id: null,
        });
        const values = sql`(${String(row.id)}::bigint, ${seq}::bigint, ${prevHash}, ${hash})`;
        prevHash = hash;
        return values;
      });
      await sql`
        update audit_events set seq = v.seq, prev_hash = v.prev_hash, hash = v.hash
        from (values ${sql.join(chained)}) as v(id, seq, prev_hash, hash)
        where audit_events.id = v.id
      `.execute(db);
      afterId = String(batch.rows.at(-1)!.id);
    }
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ["audit_events", "audit_checkpoints"]) {
    await sql`drop trigger if exists ${sql.id(`${table}_append_only`)} on ${sql.table(table)}`.execute(db);
    await sql`drop trigger if exists ${sql.id(`${table}_no_truncate`)} on ${sql.table(table)}`.execute(db);
  }
  await sql`drop function if exists latch_ledger_append_only()`.execute(db);
  await db.schema.dropTable("audit_checkpoints").execute();
  await db.schema.dropTable("audit_heads").execute();
  await db.schema.dropIndex("audit_events_chain").execute();
  await sql`
    alter table audit_events drop constraint audit_events_seq_positive,
      drop constraint audit_events_hash_hex,
      drop column seq, drop column prev_hash, drop column hash, drop column trace_id
  `.execute(db);
}
