// Counts the statements every process of a bench sends to PostgreSQL, for real: a TCP relay on
// 127.0.0.1 in front of the server that reads the frontend side of the wire protocol (PostgreSQL
// "Frontend/Backend Protocol", message formats) as it passes. Each simple Query ('Q') and each
// extended-protocol Execute ('E') is one statement; the text of each Parse ('P'), and of each
// Query, names what it was ("select clients", "insert audit_events"). Nothing is changed on the
// way. The control plane and the proxies are pointed at the relay's address instead of the server.
import { connect, createServer, type Server, type Socket } from "node:net";

export interface StatementCounts {
  /** Statements sent since the last reset. */
  total: number;
  /** By what they were: "<verb> <first table>" from their SQL. */
  byKind: Map<string, number>;
}

export interface PgStatementCounter {
  /** postgres:// URL of the relay for `databaseUrl`'s user and database. */
  url: string;
  /** The counts since the last reset, then zero. */
  take(): StatementCounts;
  close(): Promise<void>;
}

/**
 * "insert audit_events", "select clients+items+grants": the verb and the tables a statement names
 * (after from, join, into, update), each once, in order.
 */
export function statementKind(sql: string): string {
  const text = sql.replace(/\s+/g, " ").trim().toLowerCase();
  const verb = /^(with|select|insert|update|delete|begin|commit|rollback|set|show|savepoint|release)\b/.exec(
    text,
  )?.[1];
  if (!verb) return text.slice(0, 24);
  // "do update set" names no table.
  const tables = [...text.matchAll(/\b(?:from|into|update|join)\s+"?([a-z_][a-z0-9_]*)"?/g)]
    .map((m) => m[1]!)
    .filter((name) => name !== "set");
  const distinct = [...new Set(tables)];
  return distinct.length > 0 ? `${verb} ${distinct.join("+")}` : verb;
}

/**
 * Starts the relay in front of the server `databaseUrl` names.
 *
 * @example
 * const counter = await startPgStatementCounter(process.env.DATABASE_URL);
 * // DATABASE_URL=counter.url for the processes under test; counter.take().total afterwards
 */
export async function startPgStatementCounter(databaseUrl: string): Promise<PgStatementCounter> {
  const target = new URL(databaseUrl);
  const targetHost = target.hostname || "127.0.0.1";
  const targetPort = Number(target.port || 5432);
  let counts: StatementCounts = { total: 0, byKind: new Map() };
  const sockets = new Set<Socket>();

  const count = (kind: string) => {
    counts.total++;
    counts.byKind.set(kind, (counts.byKind.get(kind) ?? 0) + 1);
  };

  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, targetHost);
    sockets.add(client);
    sockets.add(upstream);
    // Statement names of this connection's prepared statements, for an Execute of a named one.
    const parsed = new Map<string, string>();
    let unnamed = "";
    let isStartup = true;
    let pending: Buffer = Buffer.alloc(0);
    client.on("data", (chunk: Buffer) => {
      upstream.write(chunk);
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      for (;;) {
        if (isStartup) {
          // Untyped: length (4) then the body; SSLRequest and GSSENCRequest keep us in startup.
          if (pending.length < 8) break;
          const length = pending.readUInt32BE(0);
          if (pending.length < length) break;
          const code = pending.readUInt32BE(4);
          isStartup = code === 80877103 || code === 80877104;
          pending = pending.subarray(length);
          continue;
        }
        if (pending.length < 5) break;
        const type = String.fromCharCode(pending[0]!);
        const length = pending.readUInt32BE(1);
        if (pending.length < 1 + length) break;
        const body = pending.subarray(5, 1 + length);
        if (type === "Q") count(statementKind(body.toString("utf8", 0, body.indexOf(0))));
        else if (type === "P") {
          const nameEnd = body.indexOf(0);
          const name = body.toString("utf8", 0, nameEnd);
          const sql = body.toString("utf8", nameEnd + 1, body.indexOf(0, nameEnd + 1));
          if (name === "") unnamed = statementKind(sql);
          else parsed.set(name, statementKind(sql));
        } else if (type === "B") {
          // Bind: portal name, then the statement it binds; Execute runs the portal.
          const portalEnd = body.indexOf(0);
          const statement = body.toString("utf8", portalEnd + 1, body.indexOf(0, portalEnd + 1));
          if (statement !== "") unnamed = parsed.get(statement) ?? statement;
        } else if (type === "E") count(unnamed || "execute");
        pending = pending.subarray(1 + length);
      }
    });
    upstream.on("data", (chunk) => client.write(chunk));
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  const port = await new Promise<number>((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)),
  );
  const url = new URL(databaseUrl);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  return {
    url: url.toString(),
    take() {
      const taken = counts;
      counts = { total: 0, byKind: new Map() };
      return taken;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
