// Opens the database: PostgreSQL when DATABASE_URL is set, else an embedded PGlite (a real
// PostgreSQL compiled to WebAssembly) kept in DATA_DIR/pgdata. One schema, one set of migrations.
import { chmodSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { type Dialect, Kysely, PGliteDialect, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { withSafeDatabaseErrors } from "./database-error.ts";
import { migrateToLatest } from "./migrate.ts";
import type { Database } from "./schema.ts";
import { ensureSpentTicketsKeep } from "./spent-tickets-keep.ts";

export type DatabaseKind = "pglite" | "postgres";

export interface OpenDatabase {
  db: Kysely<Database>;
  kind: DatabaseKind;
  /** A round trip within `timeoutMs`; /ready answers from it. */
  ping(timeoutMs?: number): Promise<boolean>;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  databaseUrl?: string | undefined;
  /** Where PGlite keeps its files; ignored with databaseUrl. */
  dataDir: string;
  /** An already-open PGlite (tests share one per worker). */
  pglite?: PGlite;
  migrate?: boolean;
  /**
   * Judges the open database before any migration runs (the control plane's role check): when it
   * throws, the database is closed and nothing has been written.
   */
  beforeMigrate?: (db: Kysely<Database>, kind: DatabaseKind) => Promise<void>;
}

export async function openDatabase(options: DatabaseOptions): Promise<OpenDatabase> {
  const kind: DatabaseKind = options.databaseUrl ? "postgres" : "pglite";
  let pool: pg.Pool | undefined;
  let pglite: PGlite | undefined;
  let dialect: Dialect;
  if (options.databaseUrl) {
    pool = new pg.Pool({ connectionString: options.databaseUrl, max: 10 });
    // An idle client that loses its server emits 'error'; without a listener that kills the process.
    pool.on("error", () => {});
    dialect = new PostgresDialect({ pool });
  } else {
    const pgdata = join(options.dataDir, "pgdata");
    pglite = options.pglite ?? new PGlite(pgdata);
    await pglite.waitReady;
    if (!options.pglite) restrictToOwner(pgdata);
    dialect = new PGliteDialect({ pglite });
  }
  // Errors leave the driver as DatabaseError (SQLSTATE and statement name): a pg or PGlite error
  // quotes SQL, parameters and values, and any catch block may log what it caught.
  const db = new Kysely<Database>({ dialect: withSafeDatabaseErrors(dialect) });
  const ownsPglite = pglite !== undefined && options.pglite === undefined;
  try {
    await options.beforeMigrate?.(db, kind);
  } catch (error) {
    if (ownsPglite || pool) await db.destroy();
    throw error;
  }
  if (options.migrate !== false) {
    await migrateToLatest(db as unknown as Kysely<unknown>);
    await ensureSpentTicketsKeep(db as unknown as Kysely<unknown>);
  }

  return {
    db,
    kind,
    async ping(timeoutMs = 2000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
      const query = sql`select 1 as ok`
        .execute(db)
        .then(() => true)
        .catch(() => false);
      try {
        return await Promise.race([query, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
    async close() {
      if (ownsPglite) {
        await db.destroy();
      } else if (pool) {
        await db.destroy();
      }
    },
  };
}

/**
 * Makes `pgdata` and everything in it owner-only (directories 0700, files 0600), once PGlite has
 * started. PGlite writes its initial files 0666 and rewrites pg_internal.init 0644 at each start:
 * its file layer (Emscripten) chmods a new file to the mode asked for less its own umask, so the
 * process umask has no say. Files PostgreSQL makes later (relations, WAL segments, temp files) are
 * created 0600, and recycled WAL segments keep the mode set here. Also repairs older data dirs.
 */
function restrictToOwner(dir: string): void {
  chmodSync(dir, 0o700);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) restrictToOwner(path);
    else if (entry.isFile()) chmodSync(path, 0o600);
  }
}

/** True when `error` is PostgreSQL's unique_violation (23505), from pg or PGlite. */
export function isUniqueViolation(error: unknown): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === "23505";
}
