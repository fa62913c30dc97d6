// Single use of tickets: a ticket id is spent the first time any proxy replica is about to send
// it, and a ticket the control plane fenced (its Execute did not answer) is spent already.
import pg from "pg";

export interface ReplayStore {
  /** `shared`: the egress_spent_tickets table every replica and the control plane write. */
  readonly kind: "memory" | "shared";
  /** The shared store's id (its `store:` row), reported in GetInfo; empty for memory. */
  readonly storeId: string;
  /**
   * Since when (ms since the epoch) this store knows every ticket spent: a memory store only the
   * ones spent since its process started; the shared table all of them.
   */
  readonly knowsSpendsSinceMs: number;
  /** True when `id` was unspent and is now spent; false when it had been spent before. */
  spend(id: string, expiresAtMs: number): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * One replica's memory. Enough when a single proxy serves the tickets (npm start, vault serve);
 * entries are kept until the ticket would have expired anyway, then swept.
 */
export function createMemoryReplayStore(now: () => number = Date.now): ReplayStore {
  const spent = new Map<string, number>();
  let lastSweep = now();
  return {
    kind: "memory",
    storeId: "",
    knowsSpendsSinceMs: now(),
    async spend(id, expiresAtMs) {
      const t = now();
      if (t - lastSweep > 10_000) {
        for (const [key, expiry] of spent) if (expiry < t) spent.delete(key);
        lastSweep = t;
      }
      if (spent.has(id)) return false;
      spent.set(id, expiresAtMs);
      return true;
    },
    async close() {
      spent.clear();
    },
  };
}

const TABLE = "egress_spent_tickets";
/**
 * A spend waits this long at most for a connection, then for its statement: under the shortest
 * ticket's lifetime (a 1 s timeout_ms plus the link's 1.5 s), so a stalled database fails the call
 * rather than holding it until its ticket is long expired (the expiry is read again after the
 * spend all the same, verify.ts).
 */
const CONNECT_TIMEOUT_MS = 2_000;
const STATEMENT_TIMEOUT_MS = 2_000;
/** The client's own bound, a little past the server's: a link that went silent answers nothing. */
const QUERY_TIMEOUT_MS = 2_500;

export interface PostgresReplayStoreOptions {
  /** NODE_ENV=production: a role that can read more than its table refuses the start. */
  isProduction: boolean;
  /** Told (one sentence) when, outside production, the role can read more than its table. */
  warn?: (sentence: string) => void;
}

/**
 * Shared across replicas through PostgreSQL: the primary key makes the first INSERT win, so two
 * replicas handed the same ticket at the same instant cannot both spend it, and a ticket the
 * control plane fenced can never be spent by a proxy. The table comes from the control plane's
 * migrations: this store runs no DDL, and checks first that its role holds what it needs and, in
 * production, nothing more (DECISIONS "Faults and isolation in deployments").
 */
export async function createPostgresReplayStore(
  connectionString: string,
  options: PostgresReplayStoreOptions,
): Promise<ReplayStore> {
  const pool = new pg.Pool({
    connectionString,
    max: 8,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    statement_timeout: STATEMENT_TIMEOUT_MS,
    query_timeout: QUERY_TIMEOUT_MS,
  });
  // A connection that breaks while idle is dropped by the pool; without a listener it would
  // throw from the pool's event emitter and end the process.
  pool.on("error", () => {});
  let storeId: string;
  try {
    storeId = await checkRole(pool, options);
  } catch (error) {
    await pool.end();
    throw error;
  }
  let lastSweep = 0;
  return {
    kind: "shared",
    storeId,
    knowsSpendsSinceMs: 0,
    async spend(id, expiresAtMs) {
      const result = await pool.query(
        `INSERT INTO ${TABLE} (id, expires_at) VALUES ($1, to_timestamp($2 / 1000.0)) ON CONFLICT (id) DO NOTHING`,
        [id, expiresAtMs],
      );
      if (Date.now() - lastSweep > 60_000) {
        lastSweep = Date.now();
        // Five minutes of grace past each expiry: a fence asked late (a control plane's own, or one
        // recovering the call of a control plane that died, calls/abandoned-calls.ts) still finds
        // the spend.
        pool.query(`DELETE FROM ${TABLE} WHERE expires_at < now() - interval '5 minutes'`).catch(() => {});
      }
      return result.rowCount === 1;
    },
    close: () => pool.end(),
  };
}

/**
 * The role's privileges, read from the catalog (superuser, role membership, PUBLIC grants and
 * pg_read_all_data all count): SELECT, INSERT and DELETE on the table, and in production no
 * SELECT, no write and no way to become the owner of any other table, view or foreign table of
 * the database, nor a privilege that reaches past their grants (`findServerPrivileges`). Answers
 * the store's id.
 */
async function checkRole(pool: pg.Pool, options: PostgresReplayStoreOptions): Promise<string> {
  const table = await pool.query<{ oid: string | null }>("SELECT to_regclass($1)::oid::text AS oid", [TABLE]);
  const oid = table.rows[0]?.oid;
  if (!oid) {
    throw new Error(
      `EGRESS_REPLAY_DATABASE_URL: the table ${TABLE} does not exist in that database; the control plane's migrations make it, so start the control plane on that database first`,
    );
  }
  const own = await pool.query<{ privilege: string; held: boolean }>(
    `SELECT p AS privilege, has_table_privilege($1::oid, p) AS held
       FROM unnest(ARRAY['SELECT', 'INSERT', 'DELETE']) AS p`,
    [oid],
  );
  const missing = own.rows.filter((r) => !r.held).map((r) => r.privilege);
  if (missing.length > 0) {
    throw new Error(
      `EGRESS_REPLAY_DATABASE_URL: its role may not ${missing.join(", ")} on ${TABLE}; grant SELECT, INSERT, DELETE on ${TABLE} to it (README "Deployment")`,
    );
  }
  // First what reaches past every table's grants: a superuser is told that, not one table it reads.
  const held = await findServerPrivileges(pool);
  if (held.length > 0) {
    const sentence = `EGRESS_REPLAY_DATABASE_URL: its role holds ${held.join(", ")}, more than its rights on ${TABLE}; give the proxy a role that may only SELECT, INSERT and DELETE ${TABLE} (latch_egress, README "Deployment")`;
    if (options.isProduction) throw new Error(sentence);
    options.warn?.(sentence);
  }
  // Read, written, or reachable by SET ROLE to its owner (a membership that does not inherit still
  // lets the role become the owner): any of them gives the proxy more than its one table.
  const reachable = await pool.query<{ name: string; how: "read" | "write" | "own" }>(
    `SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname) AS name,
            CASE WHEN has_any_column_privilege(c.oid, 'SELECT') THEN 'read'
                 WHEN has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE') THEN 'write'
                 ELSE 'own' END AS how
       FROM pg_catalog.pg_class c
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
        AND n.nspname <> 'information_schema'
        AND n.nspname NOT LIKE 'pg\\_%'
        AND c.oid <> $1::oid
        AND (has_any_column_privilege(c.oid, 'SELECT')
             OR has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')
             OR pg_has_role(c.relowner, 'MEMBER'))
      ORDER BY c.relname <> 'items', n.nspname, c.relname
      LIMIT 1`,
    [oid],
  );
  const other = reachable.rows[0];
  if (other) {
    const what = { read: "can read", write: "can write", own: "can become the owner of" }[other.how];
    const sentence = `EGRESS_REPLAY_DATABASE_URL: its role ${what} the table ${other.name}, not only ${TABLE}; give the proxy a role that may only SELECT, INSERT and DELETE ${TABLE} (latch_egress, README "Deployment")`;
    if (options.isProduction) throw new Error(sentence);
    options.warn?.(sentence);
  }
  const store = await pool.query<{ id: string }>(`SELECT id FROM ${TABLE} WHERE id LIKE 'store:%' LIMIT 1`);
  return store.rows[0]?.id ?? "";
}

/**
 * The roles whose members reach past every table's grants: the server's programs and files, or
 * every table at once. A membership that does not inherit counts (SET ROLE reaches it).
 */
const SERVER_ROLES = [
  { role: "pg_execute_server_program", does: "runs programs on the database server" },
  { role: "pg_read_server_files", does: "reads any file on the database server" },
  { role: "pg_write_server_files", does: "writes any file on the database server" },
  { role: "pg_read_all_data", does: "reads every table" },
  { role: "pg_write_all_data", does: "writes every table" },
] as const;

/** A role the connecting role is or can SET ROLE to, holding an attribute it needs none of. */
interface HeldRoleRow {
  name: string;
  is_self: boolean;
  is_superuser: boolean;
  can_create_role: boolean;
  can_replicate: boolean;
  can_bypass_rls: boolean;
}

/** The attributes it needs none of, and how the refusal names each. */
const ATTRIBUTES = [
  { column: "can_create_role", named: "CREATEROLE (makes roles and grants them, to itself too)" },
  { column: "can_replicate", named: "REPLICATION (streams every table's rows)" },
  { column: "can_bypass_rls", named: "BYPASSRLS (reads past row-level security)" },
] as const;

interface ServerPrivilegeRow {
  member_of: string[];
  create_schemas: string[];
  can_create_schema: boolean;
  /** The database's owner when the role is it or can SET ROLE to it, else null. */
  database_owner: string | null;
  owns_database: boolean;
}

/**
 * What the role holds beyond tables, each a way to read the others without a grant on them, named
 * as the refusal names it: a superuser reads everything; CREATEROLE grants itself any role (the
 * table owner's, a server role; PostgreSQL 15 and older); REPLICATION streams every row;
 * BYPASSRLS reads past row security; CREATE on a schema (or on the database, which makes a schema
 * named after another role, first on that role's search_path) plants a table or function the
 * control plane's own queries then find, and the database's owner may grant itself that CREATE.
 * A role it can SET ROLE to counts as its own, through other roles and whether or not the
 * membership inherits: a member of a superuser role is one SET ROLE from being a superuser
 * (`pg_has_role(..., 'MEMBER')` walks memberships as the server does, as
 * control-plane/src/db/database-role.ts does). The server roles are matched by name, so a server
 * without one of them (PostgreSQL 13 has no pg_read_all_data) is no error. The proxy runs no DDL,
 * so it needs none of them.
 */
async function findServerPrivileges(pool: pg.Pool): Promise<string[]> {
  const held = await pool.query<HeldRoleRow>(
    `SELECT g.rolname::text AS name, g.rolname = current_user AS is_self,
            g.rolsuper AS is_superuser, g.rolcreaterole AS can_create_role,
            g.rolreplication AS can_replicate, g.rolbypassrls AS can_bypass_rls
       FROM pg_catalog.pg_roles g
      WHERE pg_has_role(current_user, g.oid, 'MEMBER')
        AND (g.rolname = current_user OR g.rolsuper OR g.rolcreaterole OR g.rolreplication OR g.rolbypassrls)
      ORDER BY g.rolname`,
  );
  const roles = held.rows;
  const self = roles.find((r) => r.is_self);
  if (!self) return [];
  // A superuser holds all of the others too: naming it is enough.
  if (self.is_superuser) return ["SUPERUSER (reads every table and runs programs on the database server)"];
  const superuser = roles.find((r) => r.is_superuser);
  if (superuser) {
    return [
      `membership of the superuser role ${superuser.name} (SET ROLE makes it a superuser, which reads every table and runs programs on the database server)`,
    ];
  }
  const { rows } = await pool.query<ServerPrivilegeRow>(
    `SELECT ARRAY(SELECT g.rolname::text FROM pg_catalog.pg_roles g
                   WHERE g.rolname = ANY($1::text[]) AND pg_has_role(r.oid, g.oid, 'MEMBER')
                   ORDER BY array_position($1::text[], g.rolname::text)) AS member_of,
            ARRAY(SELECT quote_ident(n.nspname) FROM pg_catalog.pg_namespace n
                   WHERE n.nspname NOT LIKE 'pg\\_temp\\_%' AND n.nspname NOT LIKE 'pg\\_toast\\_temp\\_%'
                     AND (has_schema_privilege(r.oid, n.oid, 'CREATE') OR pg_has_role(r.oid, n.nspowner, 'MEMBER'))
                   ORDER BY n.nspname) AS create_schemas,
            has_database_privilege(r.oid, current_database(), 'CREATE') AS can_create_schema,
            (SELECT quote_ident(o.rolname) FROM pg_catalog.pg_database d
               JOIN pg_catalog.pg_roles o ON o.oid = d.datdba
              WHERE d.datname = current_database() AND pg_has_role(r.oid, d.datdba, 'MEMBER')) AS database_owner,
            EXISTS (SELECT 1 FROM pg_catalog.pg_database d
                     WHERE d.datname = current_database() AND d.datdba = r.oid) AS owns_database
       FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`,
    [SERVER_ROLES.map((s) => s.role)],
  );
  const role = rows[0];
  if (!role) return [];
  const attributes = ATTRIBUTES.flatMap((attribute) => {
    const holder =
      roles.find((r) => r[attribute.column] && r.is_self) ?? roles.find((r) => r[attribute.column]);
    if (!holder) return [];
    return [holder.is_self ? attribute.named : `${attribute.named} through membership of ${holder.name}`];
  });
  const database = role.owns_database
    ? ["ownership of the database (makes schemas, and grants itself any right on the database)"]
    : role.database_owner
      ? [
          `membership of ${role.database_owner}, the database's owner (SET ROLE makes it the owner: makes schemas, and grants itself any right on the database)`,
        ]
      : role.can_create_schema
        ? ["CREATE on the database (makes schemas)"]
        : [];
  return [
    ...attributes,
    ...SERVER_ROLES.filter((s) => role.member_of.includes(s.role)).map(
      (s) => `membership of ${s.role} (${s.does})`,
    ),
    ...role.create_schemas.map(
      (schema) => `CREATE on the schema ${schema} (makes tables and functions there)`,
    ),
    ...database,
  ];
}
