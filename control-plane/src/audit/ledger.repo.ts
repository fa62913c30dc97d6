// The ledger in the database (DECISIONS "Ledger and telemetry"): append, export, heads and
// checkpoints. An append is ONE statement: an upsert of the organisation's head row (which locks
// that row, so appends of one organisation queue behind each other while other organisations go
// on, on every replica) computes seq, prev_hash and the hash there, and the same statement inserts
// the row. The hash is SHA-256 over the row's canonical form (shared/src/ledger/ledger-format.ts): the application
// writes every member of it, and the database fills in the three it alone knows under the lock.

import type { JsonValue } from "@latch/shared/ledger/canonical-json";
import {
  canonicalTemplate,
  type LedgerCheckpoint,
  type LedgerLine,
  type LedgerRow,
  ledgerTime,
  rowHash,
  ZERO_HASH,
} from "@latch/shared/ledger/ledger-format";
import { toSafeJson, toSafeText } from "@latch/shared/text/safe-text";
import { type Kysely, type RawBuilder, sql } from "kysely";
import type { Database } from "../db/schema.ts";
import type { AuditEvent } from "./audit.repo.ts";

export interface LedgerHead {
  seq: number;
  hash: string;
}

export interface LedgerRepo {
  /** Appends one row to the organisation's chain: one database statement. */
  appendEvent(event: AuditEvent): Promise<LedgerRow>;
  /** Every row after `sinceSeq`, in seq order, each checkpoint right after the row it covers. */
  exportLines(organisationId: string, sinceSeq?: number): AsyncGenerator<LedgerLine>;
  findHead(organisationId: string): Promise<LedgerHead | undefined>;
  findLastCheckpoint(organisationId: string): Promise<LedgerCheckpoint | undefined>;
  /** The organisation's last `limit` checkpoints, newest first. */
  findLastCheckpoints(organisationId: string, limit: number): Promise<LedgerCheckpoint[]>;
  /** Stores a checkpoint; a second one for the same seq (another replica signed it) is dropped. */
  insertCheckpoint(checkpoint: LedgerCheckpoint): Promise<void>;
  /**
   * Heads no checkpoint covers yet, what the hourly signing signs: in organisation id order, after
   * `afterOrganisationId` when given (one pass over all of them, however many stay unsigned).
   */
  findHeadsWithoutCheckpoint(
    limit: number,
    afterOrganisationId?: string,
  ): Promise<(LedgerHead & { organisation_id: string })[]>;
}

/** Rows read per query of an export. */
const EXPORT_BATCH = 500;

/** A ledger row's columns: what an append writes and what an export reads back, in one list. */
const LEDGER_COLUMNS = [
  "organisation_id",
  "seq",
  "prev_hash",
  "hash",
  "at",
  "environment",
  "actor",
  "action",
  "item_name",
  "host",
  "reason",
  "detail",
  "trace_id",
] as const;

/** A W3C trace id: 32 lowercase hex digits, not all zero. */
const TRACE_ID = /^(?!0{32})[0-9a-f]{32}$/;

/** The time a row is stamped with: the statement's, to the millisecond (RFC 3339 as exported). */
const STATEMENT_TIME = sql`date_trunc('milliseconds', statement_timestamp())`;

/** The members of a row the application knows before the append, in their stored (safe) form. */
function knownFields(event: AuditEvent) {
  // A row is never skipped for its text: a field that slipped past the edge with a NUL or an
  // unpaired surrogate (which PostgreSQL's text and jsonb refuse, and JCS cannot write) is stored
  // and hashed with U+FFFD in place of the offending characters.
  const text = (value: string | undefined) => (value === undefined ? null : toSafeText(value));
  // Through JSON once: what jsonb stores and gives back is what is hashed (no undefined members,
  // no non-finite numbers, no toJSON objects).
  const detail = JSON.parse(JSON.stringify(toSafeJson(event.detail ?? {}) ?? {})) as LedgerRow["detail"];
  return {
    type: "event" as const,
    organisation_id: toSafeText(event.organisationId),
    environment: text(event.environment),
    actor: toSafeText(event.actor),
    action: toSafeText(event.action),
    item_name: text(event.itemName),
    host: text(event.host),
    reason: text(event.reason),
    detail: (detail && typeof detail === "object" && !Array.isArray(detail) ? detail : {}) as {
      [key: string]: JsonValue;
    },
    trace_id: event.traceId && TRACE_ID.test(event.traceId) ? event.traceId : null,
  };
}

/**
 * SQL for the hex SHA-256 of the row's canonical form, given SQL for its at, prev_hash and seq:
 * the application's JCS text between them as bytea parameters, the three members written as JCS
 * writes them (a quoted RFC 3339 time with milliseconds, a quoted hex string, an integer).
 */
function hashSql(
  template: ReturnType<typeof canonicalTemplate<"at" | "prev_hash" | "seq">>,
  members: { at: RawBuilder<unknown>; prev_hash: RawBuilder<unknown>; seq: RawBuilder<unknown> },
): RawBuilder<string> {
  const written = {
    at: sql`convert_to('"' || to_char(${members.at} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"', 'UTF8')`,
    prev_hash: sql`convert_to('"' || ${members.prev_hash} || '"', 'UTF8')`,
    seq: sql`convert_to((${members.seq})::text, 'UTF8')`,
  };
  const parts: RawBuilder<unknown>[] = [];
  template.literals.forEach((literal, i) => {
    parts.push(sql`${Buffer.from(literal, "utf8")}::bytea`);
    const hole = template.holes[i];
    if (hole) parts.push(written[hole]);
  });
  return sql<string>`encode(sha256(${sql.join(parts, sql` || `)}), 'hex')`;
}

export interface LedgerRepoOptions {
  /**
   * This process is the database's only writer (the local vault on its embedded database, which
   * one process holds: local/local-lock.ts). Then the head of each chain is known here after the
   * first append, and an append hashes the row in JavaScript and writes it with the head in one
   * statement that holds only if the head is still the one known (else the usual append runs):
   * on PGlite the database-side hash and upsert cost about three times the plain insert. That
   * statement is a function (migration 2026-11-26T0800), planned once rather than on every append.
   */
  isSoleWriter?: boolean;
}

export function createLedgerRepo(db: Kysely<Database>, options: LedgerRepoOptions = {}): LedgerRepo {
  /** Sole writer only: the head each chain had after this process's last append. */
  const heads = new Map<string, { seq: number; hash: string; at: Date }>();
  /** Sole writer only: appends one at a time, each from the head the one before wrote. */
  let appending: Promise<unknown> = Promise.resolve();

  /**
   * The row after a head known to be the chain's: seq, prev_hash and at as the database would
   * compute them, hashed here (rowHash, the verifier's own), written with the head in one
   * statement whose head update holds only if the head is still `head`. Undefined when it was not.
   */
  async function appendOnHead(
    event: AuditEvent,
    head: { seq: number; hash: string; at: Date },
  ): Promise<LedgerRow | undefined> {
    const fields = knownFields(event);
    // Never earlier than the row before, to the millisecond, as the SQL append does.
    const at = new Date(Math.max(Date.now(), head.at.getTime()));
    const row = { ...fields, seq: head.seq + 1, prev_hash: head.hash, at: ledgerTime(at) };
    const hash = rowHash(row);
    const written = await sql<{ appended: boolean }>`
      select latch_ledger_append_on_head(
        ${fields.organisation_id}, ${head.seq}::bigint, ${head.hash}, ${hash}, ${at}::timestamptz,
        ${fields.environment}, ${fields.actor}, ${fields.action}, ${fields.item_name}, ${fields.host},
        ${fields.reason}, ${JSON.stringify(fields.detail)}::jsonb, ${fields.trace_id}
      ) as appended
    `.execute(db);
    return written.rows[0]?.appended === true ? { ...row, hash } : undefined;
  }

  /** Sole writer: on the known head when there is one, else (and when it moved) as always. */
  function appendAsSoleWriter(event: AuditEvent): Promise<LedgerRow> {
    const run = appending.then(async () => {
      const organisationId = toSafeText(event.organisationId);
      const head = heads.get(organisationId);
      const written = (head && (await appendOnHead(event, head))) ?? (await appendInDatabase(event));
      heads.set(organisationId, { seq: written.seq, hash: written.hash, at: new Date(written.at) });
      return written;
    });
    appending = run.catch(() => {
      // A failed append leaves the head unknown: the next one asks the database.
      heads.delete(toSafeText(event.organisationId));
    });
    return run;
  }

  /** The append of ledger.repo.ts's header: the database computes seq, prev_hash, at and the hash. */
  async function appendInDatabase(event: AuditEvent): Promise<LedgerRow> {
    const fields = knownFields(event);
    const template = canonicalTemplate(fields, ["at", "prev_hash", "seq"] as const);
    const nextAt = sql`greatest(audit_heads.at, excluded.at)`;
    const written = await db
      .with("head", (qb) =>
        qb
          .insertInto("audit_heads")
          .values({
            organisation_id: fields.organisation_id,
            seq: 1,
            prev_hash: ZERO_HASH,
            hash: hashSql(template, {
              at: STATEMENT_TIME,
              prev_hash: sql`${ZERO_HASH}::text`,
              seq: sql`1`,
            }),
            at: STATEMENT_TIME as RawBuilder<Date>,
          })
          // The head row is locked by this update until the statement (or the transaction
          // around it) ends: the next append of this organisation waits here, then reads the
          // head this one wrote (PostgreSQL re-reads a row it waited for), so seq has no gap
          // and no fork however many replicas append at once.
          .onConflict((oc) =>
            oc.column("organisation_id").doUpdateSet({
              seq: sql`audit_heads.seq + 1`,
              prev_hash: sql`audit_heads.hash`,
              // Never earlier than the row before: the ledger's times only move forward.
              at: nextAt as RawBuilder<Date>,
              hash: hashSql(template, {
                at: nextAt,
                prev_hash: sql`audit_heads.hash`,
                seq: sql`audit_heads.seq + 1`,
              }),
            }),
          )
          .returning(["seq", "prev_hash", "hash", "at"]),
      )
      .insertInto("audit_events")
      .columns(LEDGER_COLUMNS)
      .expression((eb) =>
        eb
          .selectFrom("head")
          .select([
            sql<string>`${fields.organisation_id}::text`.as("organisation_id"),
            "head.seq",
            "head.prev_hash",
            "head.hash",
            "head.at",
            sql<string>`${fields.environment}::text`.as("environment"),
            sql<string>`${fields.actor}::text`.as("actor"),
            sql<string>`${fields.action}::text`.as("action"),
            sql<string>`${fields.item_name}::text`.as("item_name"),
            sql<string>`${fields.host}::text`.as("host"),
            sql<string>`${fields.reason}::text`.as("reason"),
            sql<string>`${JSON.stringify(fields.detail)}::jsonb`.as("detail"),
            sql<string>`${fields.trace_id}::text`.as("trace_id"),
          ]),
      )
      .returning(["seq", "prev_hash", "hash", "at"])
      .executeTakeFirstOrThrow();
    return {
      ...fields,
      seq: Number(written.seq),
      prev_hash: written.prev_hash,
      at: ledgerTime(written.at),
      hash: written.hash,
    };
  }

  return {
    appendEvent: (event) => (options.isSoleWriter ? appendAsSoleWriter(event) : appendInDatabase(event)),

    async *exportLines(organisationId, sinceSeq = 0) {
      let after = sinceSeq;
      for (;;) {
        const rows = await db
          .selectFrom("audit_events")
          .select(LEDGER_COLUMNS)
          .where("organisation_id", "=", organisationId)
          .where("seq", ">", sql<number>`${after}::bigint`)
          .orderBy("seq")
          .limit(EXPORT_BATCH)
          .execute();
        if (rows.length === 0) return;
        const last = Number(rows.at(-1)!.seq);
        const checkpoints = await db
          .selectFrom("audit_checkpoints")
          .selectAll()
          .where("organisation_id", "=", organisationId)
          .where("seq", ">", sql<number>`${after}::bigint`)
          .where("seq", "<=", sql<number>`${last}::bigint`)
          .orderBy("seq")
          .execute();
        const bySeq = new Map(checkpoints.map((c) => [Number(c.seq), toCheckpoint(c)] as const));
        for (const row of rows) {
          const seq = Number(row.seq);
          yield {
            type: "event",
            organisation_id: row.organisation_id,
            seq,
            prev_hash: row.prev_hash,
            at: ledgerTime(row.at),
            environment: row.environment,
            actor: row.actor,
            action: row.action,
            item_name: row.item_name,
            host: row.host,
            reason: row.reason,
            detail: row.detail as LedgerRow["detail"],
            trace_id: row.trace_id,
            hash: row.hash,
          };
          const checkpoint = bySeq.get(seq);
          if (checkpoint) yield checkpoint;
        }
        after = last;
      }
    },

    async findHead(organisationId) {
      const row = await db
        .selectFrom("audit_heads")
        .select(["seq", "hash"])
        .where("organisation_id", "=", organisationId)
        .executeTakeFirst();
      return row ? { seq: Number(row.seq), hash: row.hash } : undefined;
    },

    async findLastCheckpoint(organisationId) {
      const row = await db
        .selectFrom("audit_checkpoints")
        .selectAll()
        .where("organisation_id", "=", organisationId)
        .orderBy("seq", "desc")
        .limit(1)
        .executeTakeFirst();
      return row ? toCheckpoint(row) : undefined;
    },

    async findLastCheckpoints(organisationId, limit) {
      const rows = await db
        .selectFrom("audit_checkpoints")
        .selectAll()
        .where("organisation_id", "=", organisationId)
        .orderBy("seq", "desc")
        .limit(limit)
        .execute();
      return rows.map(toCheckpoint);
    },

    async insertCheckpoint(checkpoint) {
      await db
        .insertInto("audit_checkpoints")
        .values({
          organisation_id: checkpoint.organisation_id,
          seq: checkpoint.seq,
          hash: checkpoint.hash,
          at: new Date(checkpoint.at),
          key_id: checkpoint.key_id,
          signature: checkpoint.signature,
        })
        .onConflict((oc) => oc.columns(["organisation_id", "seq"]).doNothing())
        .execute();
    },

    async findHeadsWithoutCheckpoint(limit, afterOrganisationId) {
      let query = db
        .selectFrom("audit_heads")
        .select(["audit_heads.organisation_id", "audit_heads.seq", "audit_heads.hash"])
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom("audit_checkpoints")
                .select("audit_checkpoints.seq")
                .whereRef("audit_checkpoints.organisation_id", "=", "audit_heads.organisation_id")
                .whereRef("audit_checkpoints.seq", "=", "audit_heads.seq"),
            ),
          ),
        )
        .orderBy("audit_heads.organisation_id")
        .limit(limit);
      if (afterOrganisationId !== undefined) {
        query = query.where("audit_heads.organisation_id", ">", afterOrganisationId);
      }
      const rows = await query.execute();
      return rows.map((r) => ({ organisation_id: r.organisation_id, seq: Number(r.seq), hash: r.hash }));
    },
  };
}

function toCheckpoint(row: {
  organisation_id: string;
  seq: string | number;
  hash: string;
  at: Date;
  key_id: string;
  signature: string;
}): LedgerCheckpoint {
  return {
    type: "checkpoint",
    organisation_id: row.organisation_id,
    seq: Number(row.seq),
    hash: row.hash,
    at: ledgerTime(row.at),
    key_id: row.key_id,
    signature: row.signature,
  };
}
