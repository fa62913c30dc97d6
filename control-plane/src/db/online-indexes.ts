// Indexes built while the service runs, not in a migration. A migration runs in a transaction, where
// CREATE INDEX holds a lock that stops every write to the table until the build ends: on
// `audit_events`, which every call appends to and an old installation holds millions of rows of,
// that is minutes without calls. Built here with CONCURRENTLY (PostgreSQL), writes go on meanwhile.
// Each start looks: one replica at a time builds (a session advisory lock; another skips), a build
// a killed replica left invalid is dropped and built again, and a failure is logged, never fatal:
// the queries are correct without these indexes, only slower.
import { type Kysely, sql } from "kysely";
import type { Database } from "./schema.ts";

interface OnlineIndex {
  name: string;
  /** The index's definition after `ON`: table, columns, predicate. */
  definition: string;
  /** What it serves. */
  for: string;
}

export const ONLINE_INDEXES: readonly OnlineIndex[] = [
  {
    name: "audit_events_by_action",
    definition: "audit_events (organisation_id, action, id)",
    for: "the Access view's ledger actions (audit.repo.ts), without a scan of the trail",
  },
  {
    // Its predicate is audit.repo.ts FETCH_ACTIONS, word for word: the planner uses a partial index
    // only for a query whose own WHERE it can see implies the index's.
    name: "audit_events_fetched_names",
    definition:
      "audit_events (organisation_id, actor, item_name) WHERE action IN ('http_request', 'resolved') AND item_name IS NOT NULL",
    for: "the access snapshot's fetched names (audit.repo.ts findFetchedNames): one probe per distinct (actor, name), not a read of every call row",
  },
  {
    name: "grants_by_approval_code",
    definition: "grants (organisation_id, approval_code_hash) WHERE approval_code_hash IS NOT NULL",
    for: "approve-by-code (grants.repo.ts findGrantByCodeHash)",
  },
  {
    name: "need_requests_pending",
    definition: "need_requests (organisation_id, created_at DESC) WHERE status = 'pending'",
    for: "the inbox's pending requests (needs.repo.ts findPendingNeeds)",
  },
];

/** The advisory lock one replica holds while it builds. */
const BUILD_LOCK = "latch:online-indexes";

/**
 * Builds the ONLINE_INDEXES that are missing or invalid. `isPostgres` false (PGlite: one process, a
 * small database) builds them plainly. Answers the names built.
 */
export async function buildOnlineIndexes(db: Kysely<Database>, isPostgres: boolean): Promise<string[]> {
  if (!isPostgres) {
    for (const index of ONLINE_INDEXES) {
      await sql.raw(`CREATE INDEX IF NOT EXISTS ${index.name} ON ${index.definition}`).execute(db);
    }
    return [];
  }
  // One connection for the whole look: the session lock is that connection's.
  return db.connection().execute(async (conn) => {
    const locked = await sql<{ ok: boolean }>`
      select pg_try_advisory_lock(hashtextextended(${BUILD_LOCK}, 0)) as ok`.execute(conn);
    if (!locked.rows[0]?.ok) return [];
    try {
      const built: string[] = [];
      for (const index of ONLINE_INDEXES) {
        const found = await sql<{ valid: boolean }>`
          select i.indisvalid as valid from pg_catalog.pg_index i
          where i.indexrelid = to_regclass(${index.name})`.execute(conn);
        if (found.rows[0]?.valid === true) continue;
        if (found.rows.length > 0)
          await sql.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${index.name}`).execute(conn);
        await sql
          .raw(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${index.name} ON ${index.definition}`)
          .execute(conn);
        built.push(index.name);
      }
      return built;
    } finally {
      await sql`select pg_advisory_unlock(hashtextextended(${BUILD_LOCK}, 0))`.execute(conn);
    }
  });
}
