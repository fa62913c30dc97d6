// What a failed query may say about itself: its SQLSTATE and the statement's name, nothing else.
//
// pg and PGlite errors carry the parameters (`params`, sealed values and token hashes among them),
// the SQL (`query`, `internalQuery`), `detail` ("Key (name)=(...) already exists") and a message that
// quotes the offending value ('invalid input syntax for type uuid: "..."'). Every query goes through
// `withSafeDatabaseErrors`, so whoever logs or rethrows a database error holds only the safe summary.
import type {
  CompiledQuery,
  DatabaseConnection,
  Dialect,
  Driver,
  QueryCompiler,
  QueryResult,
  TransactionSettings,
} from "kysely";

/** A database failure reduced to what may be logged: `code` (SQLSTATE) and `statement`. */
export class DatabaseError extends Error {
  override readonly name = "DatabaseError";
  /** The SQLSTATE ("23505"), a driver code ("ECONNREFUSED"), or "unknown". */
  readonly code: string;
  /** The Kysely operation and table, such as "insert audit_events"; "database" when unknown. */
  readonly statement: string;

  constructor(code: string, statement: string) {
    super(`database error ${code} in ${statement}`);
    this.code = code;
    this.statement = statement;
  }
}

/**
 * The safe summary of `error`; the original is dropped (not kept as `cause`, which loggers print).
 * The stack keeps only its frames: its first line is the database's message.
 *
 * @example toDatabaseError(pgError, "insert organisations") // DatabaseError: database error 23505 in insert organisations
 */
export function toDatabaseError(error: unknown, statement = "database"): DatabaseError {
  if (error instanceof DatabaseError) return error;
  const safe = new DatabaseError(databaseErrorCode(error), statement);
  const frames = (error as { stack?: unknown } | null)?.stack;
  if (typeof frames === "string") {
    const lines = frames.split("\n").filter((line) => /^\s+at /.test(line));
    safe.stack = [`DatabaseError: ${safe.message}`, ...lines].join("\n");
  }
  return safe;
}

/** The SQLSTATE or driver code of `error` when it has the shape of one, else "unknown". */
export function databaseErrorCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[A-Za-z0-9_]{1,32}$/.test(code) ? code : "unknown";
}

/**
 * True for an error straight from pg or PGlite (a PostgreSQL `severity`, or the SQL or parameters
 * attached), which must never reach a log as it is.
 */
export function isRawDatabaseError(error: unknown): boolean {
  if (typeof error !== "object" || error === null || error instanceof DatabaseError) return false;
  const fields = error as Record<string, unknown>;
  if (typeof fields.severity === "string" && typeof fields.code === "string") return true;
  return ["query", "params", "parameters", "internalQuery", "where", "detail"].some(
    (key) => fields[key] !== undefined,
  );
}

/** Operation and table of a compiled query, from Kysely's tree, never from the SQL text. */
export function statementName(query: CompiledQuery): string {
  const node = query.query as unknown as Record<string, unknown>;
  const kind = typeof node.kind === "string" ? node.kind : "";
  if (kind === "RawNode") return rawStatementName(query.sql);
  // "SelectQueryNode" -> "select", "CreateTableNode" -> "create table".
  const operation = kind
    .replace(/(?:Query)?Node$/, "")
    .replace(/([a-z])([A-Z])/g, "$1 $2")
    .toLowerCase();
  if (!/^[a-z ]{1,32}$/.test(operation)) return "database";
  const from = node.from as { froms?: unknown[] } | undefined;
  const table = tableName(node.into ?? node.table ?? from?.froms?.[0]);
  return table ? `${operation} ${table}` : operation;
}

/** `sql\`...\`` queries: "raw" plus their first keyword ("raw select"), which our code wrote. */
function rawStatementName(sqlText: string): string {
  const keyword = /^\s*([A-Za-z]{1,16})\b/.exec(sqlText)?.[1]?.toLowerCase();
  return keyword ? `raw ${keyword}` : "raw";
}

/** The table of a TableNode, also behind an alias; undefined unless it is a plain identifier. */
function tableName(node: unknown): string | undefined {
  const candidate = node as { kind?: string; node?: unknown; table?: { identifier?: { name?: unknown } } };
  if (candidate?.kind === "AliasNode") return tableName(candidate.node);
  if (candidate?.kind !== "TableNode") return undefined;
  const name = candidate.table?.identifier?.name;
  return typeof name === "string" && /^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name) ? name : undefined;
}

/**
 * Wraps a dialect so that every failure of its driver reaches Kysely's callers as a
 * `DatabaseError`. Queries, transaction control and savepoints are all covered.
 */
export function withSafeDatabaseErrors(dialect: Dialect): Dialect {
  return {
    createDriver: () => new SafeErrorDriver(dialect.createDriver()),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createAdapter: () => dialect.createAdapter(),
    createIntrospector: (db) => dialect.createIntrospector(db),
  };
}

/** Rethrows whatever `run` rejects with as the safe summary. */
async function safely<T>(statement: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw toDatabaseError(error, statement);
  }
}

type CompileQuery = QueryCompiler["compileQuery"];
type AbortableOperationOptions = Parameters<Driver["releaseConnection"]>[1];

/**
 * Hands Kysely a wrapped connection and the driver's own connection back to the driver, whose
 * transaction methods rely on private state of the connections it made.
 */
class SafeErrorDriver implements Driver {
  readonly #inner: Driver;
  readonly #connections = new WeakMap<DatabaseConnection, DatabaseConnection>();

  constructor(inner: Driver) {
    this.#inner = inner;
  }

  init(...args: Parameters<Driver["init"]>): Promise<void> {
    return safely("connect", () => this.#inner.init(...args));
  }

  async acquireConnection(...args: Parameters<Driver["acquireConnection"]>): Promise<DatabaseConnection> {
    const inner = await safely("connect", () => this.#inner.acquireConnection(...args));
    const outer = wrapConnection(inner);
    this.#connections.set(outer, inner);
    return outer;
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    return safely("begin", () => this.#inner.beginTransaction(this.#unwrap(connection), settings));
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return safely("commit", () => this.#inner.commitTransaction(this.#unwrap(connection)));
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    return safely("rollback", () => this.#inner.rollbackTransaction(this.#unwrap(connection)));
  }

  savepoint(connection: DatabaseConnection, name: string, compile: CompileQuery): Promise<void> {
    return this.#savepointCommand("savepoint", this.#inner.savepoint, connection, name, compile);
  }

  rollbackToSavepoint(connection: DatabaseConnection, name: string, compile: CompileQuery): Promise<void> {
    const method = this.#inner.rollbackToSavepoint;
    return this.#savepointCommand("rollback to savepoint", method, connection, name, compile);
  }

  releaseSavepoint(connection: DatabaseConnection, name: string, compile: CompileQuery): Promise<void> {
    const method = this.#inner.releaseSavepoint;
    return this.#savepointCommand("release savepoint", method, connection, name, compile);
  }

  releaseConnection(connection: DatabaseConnection, options?: AbortableOperationOptions): Promise<void> {
    return this.#inner.releaseConnection(this.#unwrap(connection), options);
  }

  destroy(...args: Parameters<Driver["destroy"]>): Promise<void> {
    return this.#inner.destroy(...args);
  }

  #unwrap(connection: DatabaseConnection): DatabaseConnection {
    return this.#connections.get(connection) ?? connection;
  }

  #savepointCommand(
    statement: string,
    method: Driver["savepoint"],
    connection: DatabaseConnection,
    name: string,
    compile: CompileQuery,
  ): Promise<void> {
    if (!method) return Promise.reject(new Error(`${statement} is not supported by this database driver`));
    return safely(statement, () => method.call(this.#inner, this.#unwrap(connection), name, compile));
  }
}

function wrapConnection(inner: DatabaseConnection): DatabaseConnection {
  const outer: DatabaseConnection = {
    executeQuery<R>(query: CompiledQuery, options?: Parameters<DatabaseConnection["executeQuery"]>[1]) {
      return safely<QueryResult<R>>(statementName(query), () => inner.executeQuery<R>(query, options));
    },
    async *streamQuery<R>(
      query: CompiledQuery,
      chunkSize: number,
      options?: Parameters<DatabaseConnection["streamQuery"]>[2],
    ) {
      try {
        yield* inner.streamQuery<R>(query, chunkSize, options);
      } catch (error) {
        throw toDatabaseError(error, statementName(query));
      }
    },
  };
  // Optional abort support (Kysely 0.30): offered only when the driver's connection has it.
  if (inner.cancelQuery) outer.cancelQuery = (provider) => inner.cancelQuery?.(provider) as Promise<void>;
  if (inner.killSession) outer.killSession = (provider) => inner.killSession?.(provider) as Promise<void>;
  if (inner.collectSessionInfo)
    outer.collectSessionInfo = () => inner.collectSessionInfo?.() as Promise<void>;
  return outer;
}
