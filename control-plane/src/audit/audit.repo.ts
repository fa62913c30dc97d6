// The audit trail: names, hosts, reasons and outcomes. A value never reaches this table; the
// service layer builds rows from metadata only, and the leak tests search it for canaries. Rows
// are appended to the organisation's hash chain by ledger.repo.ts; this file reads them for people.

import type { LedgerRow } from "@latch/shared/ledger/ledger-format";
import { type Kysely, sql } from "kysely";
import type { Database } from "../db/schema.ts";
import { createLedgerRepo, type LedgerRepoOptions } from "./ledger.repo.ts";

export interface AuditEvent {
  organisationId: string;
  environment?: string | undefined;
  /** Who acted: "operator", "agent:<name>", "system". */
  actor: string;
  action: string;
  itemName?: string | undefined;
  host?: string | undefined;
  reason?: string | undefined;
  detail?: Record<string, unknown> | undefined;
  /** The W3C trace id of the request that caused it (set by services.ts when telemetry is on). */
  traceId?: string | undefined;
}

export interface AuditEventView {
  id: string;
  at: string;
  environment: string | null;
  actor: string;
  /**
   * Who acted, for a person to read: a client (agent:<id>, trusted:<id>) by the name it was issued
   * or registered with, an operator by email.
   */
  actor_name: string | null;
  action: string;
  item_name: string | null;
  host: string | null;
  reason: string | null;
  detail: Record<string, unknown>;
}

export interface AuditFilter {
  itemName?: string | undefined;
  actions?: readonly string[] | undefined;
  actor?: string | undefined;
  /** Any of these actors (a client acts as agent:<id> or trusted:<id>). */
  actors?: readonly string[] | undefined;
  environment?: string | undefined;
  /** Events at or after, and before, these instants. */
  since?: Date | undefined;
  until?: Date | undefined;
  /** Older than this event id: the next page of a listing. */
  before?: string | undefined;
  limit?: number | undefined;
}

/** An audited call, as a policy preview replays it (policies/policy-preview.ts). */
export interface AuditedCall {
  seq: number;
  at: Date;
  environment: string | null;
  actor: string;
  /** The client's name (agent:<id>), as it is now. */
  actor_name: string | null;
  action: string;
  item_name: string | null;
  host: string | null;
  detail: Record<string, unknown>;
}

export interface AuditRepo {
  /** Appends the event to its organisation's ledger: one statement. */
  insertAuditEvent(event: AuditEvent): Promise<void>;
  /** The same, returning the row as the ledger exports it. */
  appendEvent(event: AuditEvent): Promise<LedgerRow>;
  findAuditEvents(organisationId: string, filter?: AuditFilter): Promise<AuditEventView[]>;
  /** The credential names each actor fetched (a call that reached its API, or a trusted resolve). */
  findFetchedNames(organisationId: string): Promise<Map<string, string[]>>;
  /**
   * Rows of `actions`, newest first, older than `beforeSeq` when given: the ledger's chain index
   * walked backwards, so reading the last days of a long ledger never reads its first years.
   */
  findCallsBefore(
    organisationId: string,
    filter: { actions: readonly string[]; beforeSeq?: number | undefined; limit: number },
  ): Promise<AuditedCall[]>;
  /**
   * Rows of `actions` after `afterSeq`, oldest first (the live inbox's replay and follow). A row
   * with seq N is committed only after every row before it (ledger.repo.ts), so reading `seq > N`
   * again later misses nothing.
   */
  findRowsAfter(
    organisationId: string,
    filter: { actions: readonly string[]; afterSeq: number; limit: number },
  ): Promise<AuditedCall[]>;
  /** Each organisation's last seq (0 for one with no rows yet): one indexed read for many. */
  findHeadSeqs(organisationIds: readonly string[]): Promise<Map<string, number>>;
}

/** A client's actor string: agent:<client id> or trusted:<client id>. */
const CLIENT_ACTOR = /^(?:agent|trusted):(cli_[A-Za-z0-9_-]+)$/;
/** An operator's actor string: operator:<operator id>. */
const OPERATOR_ACTOR = /^operator:(op[A-Za-z0-9_-]*)$/;

/**
 * The actions that fetched a credential for its actor (spec 4.3 Access: "fetched names"). A change
 * here changes the predicate of db/online-indexes.ts `audit_events_fetched_names` too.
 */
const FETCH_ACTIONS = ["http_request", "resolved"];

const DEFAULT_LIMIT = 200;

/** Built while serving (db/online-indexes.ts): the fetch rows by (organisation, actor, name). */
const FETCHED_NAMES_INDEX = "audit_events_fetched_names";

/**
 * The distinct (actor, item_name) pairs an organisation's fetch rows hold, in that order, by one
 * statement that reads O(pairs x log rows), not every call ever made: a skip scan, each step one
 * probe of FETCHED_NAMES_INDEX for the first pair after the last one found. Without that index
 * (being built, or its build failed) each probe would read every fetch row, so the statement then
 * reads them once with DISTINCT instead: a one-time filter above each branch's CTE runs only one
 * (`every_row` is materialized so that its scan is never started, its parallel workers too).
 * The actions are literals, not parameters, so that the planner sees the index's predicate holds.
 */
function fetchedNamesQuery(organisationId: string) {
  const actions = sql.join(FETCH_ACTIONS.map((action) => sql.lit(action)));
  return sql<{ actor: string; item_name: string }>`
    with recursive fetched (actor, item_name) as (
      (select actor, item_name from audit_events
        where organisation_id = ${organisationId} and action in (${actions}) and item_name is not null
        order by actor, item_name limit 1)
      union all
      select next.actor, next.item_name from fetched
      cross join lateral (
        select e.actor, e.item_name from audit_events e
        where e.organisation_id = ${organisationId} and e.action in (${actions})
          and e.item_name is not null and (e.actor, e.item_name) > (fetched.actor, fetched.item_name)
        order by e.actor, e.item_name limit 1) next
    ),
    every_row as materialized (
      select distinct actor, item_name from audit_events
      where organisation_id = ${organisationId} and action in (${actions}) and item_name is not null
      order by actor, item_name
    ),
    indexed (ok) as (
      select exists (select 1 from pg_catalog.pg_index i
        where i.indexrelid = to_regclass(${sql.lit(FETCHED_NAMES_INDEX)}) and i.indisvalid)
    )
    select actor, item_name from fetched where (select ok from indexed)
    union all
    select actor, item_name from every_row where not (select ok from indexed)`;
}

/** The label of each id `pattern` finds in `actors`, by one lookup (none when there is no id). */
async function labelsOf(
  actors: readonly string[],
  pattern: RegExp,
  lookup: (ids: string[]) => Promise<{ id: string; label: string }[]>,
): Promise<Map<string, string>> {
  const ids = [...new Set(actors.map((a) => pattern.exec(a)?.[1]).filter((id) => id !== undefined))];
  return new Map(ids.length === 0 ? [] : (await lookup(ids)).map((row) => [row.id, row.label] as const));
}

export function createAuditRepo(db: Kysely<Database>, options: LedgerRepoOptions = {}): AuditRepo {
  const ledger = createLedgerRepo(db, options);
  /** Rows with their seq as a number and their client's name (agent:<id>) as it is now. */
  async function withActorNames(
    organisationId: string,
    rows: (Omit<AuditedCall, "seq" | "actor_name"> & { seq: string | number })[],
  ): Promise<AuditedCall[]> {
    const names = await labelsOf(
      rows.map((r) => r.actor),
      CLIENT_ACTOR,
      (ids) =>
        db
          .selectFrom("clients")
          .select(["id", "name as label"])
          .where("organisation_id", "=", organisationId)
          .where("id", "in", ids)
          .execute(),
    );
    return rows.map((r) => ({
      ...r,
      seq: Number(r.seq),
      actor_name: names.get(CLIENT_ACTOR.exec(r.actor)?.[1] ?? "") ?? null,
    }));
  }

  return {
    appendEvent: (event) => ledger.appendEvent(event),
    async insertAuditEvent(event) {
      await ledger.appendEvent(event);
    },
    async findFetchedNames(organisationId) {
      const { rows } = await fetchedNamesQuery(organisationId).execute(db);
      const names = new Map<string, string[]>();
      for (const row of rows) {
        const list = names.get(row.actor) ?? [];
        list.push(row.item_name!);
        names.set(row.actor, list);
      }
      return names;
    },
    async findHeadSeqs(organisationIds) {
      if (organisationIds.length === 0) return new Map();
      const rows = await db
        .selectFrom("audit_heads")
        .select(["organisation_id", "seq"])
        .where("organisation_id", "in", [...organisationIds])
        .execute();
      const heads = new Map<string, number>(organisationIds.map((id) => [id, 0]));
      for (const row of rows) heads.set(row.organisation_id, Number(row.seq));
      return heads;
    },
    async findRowsAfter(organisationId, filter) {
      const rows = await db
        .selectFrom("audit_events")
        .select(["seq", "at", "environment", "actor", "action", "item_name", "host", "detail"])
        .where("organisation_id", "=", organisationId)
        .where("seq", ">", filter.afterSeq)
        .where("action", "in", [...filter.actions])
        .orderBy("seq", "asc")
        .limit(filter.limit)
        .execute();
      return withActorNames(organisationId, rows);
    },
    async findCallsBefore(organisationId, filter) {
      let query = db
        .selectFrom("audit_events")
        .select(["seq", "at", "environment", "actor", "action", "item_name", "host", "detail"])
        .where("organisation_id", "=", organisationId)
        .where("action", "in", [...filter.actions])
        .orderBy("seq", "desc")
        .limit(filter.limit);
      if (filter.beforeSeq !== undefined) query = query.where("seq", "<", filter.beforeSeq);
      return withActorNames(organisationId, await query.execute());
    },
    async findAuditEvents(organisationId, filter = {}) {
      let query = db
        .selectFrom("audit_events")
        .selectAll()
        .where("organisation_id", "=", organisationId)
        .orderBy("id", "desc")
        .limit(Math.min(filter.limit ?? DEFAULT_LIMIT, DEFAULT_LIMIT));
      if (filter.itemName) query = query.where("item_name", "=", filter.itemName);
      if (filter.actor) query = query.where("actor", "=", filter.actor);
      if (filter.actors) query = query.where("actor", "in", [...filter.actors]);
      if (filter.actions) query = query.where("action", "in", [...filter.actions]);
      if (filter.environment) query = query.where("environment", "=", filter.environment);
      if (filter.since) query = query.where("at", ">=", filter.since);
      if (filter.until) query = query.where("at", "<", filter.until);
      if (filter.before) query = query.where("id", "<", filter.before);
      const rows = await query.execute();
      const actors = rows.map((r) => r.actor);
      const names = await labelsOf(actors, CLIENT_ACTOR, (ids) =>
        db
          .selectFrom("clients")
          .select(["id", "name as label"])
          .where("organisation_id", "=", organisationId)
          .where("id", "in", ids)
          .execute(),
      );
      // Every operator who acted here, member or not any more: a removed member's decisions stay
      // named in the audit (DECISIONS "Teams"). Only ids from this organisation's rows are looked up.
      const emails = await labelsOf(actors, OPERATOR_ACTOR, (ids) =>
        db
          .selectFrom("operators")
          .select(["operators.id", "operators.email as label"])
          .where("operators.id", "in", ids)
          .execute(),
      );
      const actorName = (actor: string) =>
        names.get(CLIENT_ACTOR.exec(actor)?.[1] ?? "") ??
        emails.get(OPERATOR_ACTOR.exec(actor)?.[1] ?? "") ??
        null;
      return rows.map((r) => ({
        id: String(r.id),
        at: r.at.toISOString(),
        environment: r.environment,
        actor: r.actor,
        actor_name: actorName(r.actor),
        action: r.action,
        item_name: r.item_name,
        host: r.host,
        reason: r.reason,
        detail: r.detail,
      }));
    },
  };
}
