// What an HTTP request may put in a log line: method, path without its query (approval links
// carry single-use tokens there) and without the interaction id of an OAuth resume path (it is the
// authorization server's interaction cookie value), status and timing. No header, cookie or body, ever. An error is
// logged with its type, message and stack, except a database error: its SQLSTATE and statement only.
import type { FastifyServerOptions } from "fastify";
import { type Logger, stdSerializers } from "pino";
import { databaseErrorCode, isRawDatabaseError } from "../db/database-error.ts";
import { generateRequestId } from "./request-context.ts";

export function requestLogging(logger: Logger): Pick<
  FastifyServerOptions,
  "loggerInstance" | "requestIdHeader" | "genReqId"
> & {
  loggerInstance: Logger;
} {
  return {
    loggerInstance: logger.child(
      {},
      {
        serializers: {
          req: (req: { method?: string; url?: string; id?: string }) => ({
            id: req.id,
            method: req.method,
            path: loggedPath(req.url ?? ""),
          }),
          res: (res: { statusCode?: number }) => ({ status: res.statusCode }),
          err: serializeLoggedError,
        },
      },
    ),
    // Request ids come from us, not from a caller's header (which could smuggle text into logs).
    requestIdHeader: false,
    genReqId: generateRequestId,
  };
}

/** Paths whose last segment is an OAuth interaction id: logged as the route, not the id. */
const INTERACTION_PATH = /^\/(oauth\/authorize|device)\/[^/]+$/;

/** The path of a request as logged: no query, no interaction id. */
export function loggedPath(url: string): string {
  const path = url.split("?")[0] ?? "";
  return INTERACTION_PATH.test(path) ? path.replace(/\/[^/]+$/, "/:uid") : path;
}

/**
 * pino's error serializer, unless the error or one of its causes came straight from pg or PGlite
 * without passing `withSafeDatabaseErrors`: such an error prints its SQL, parameters and the values
 * it quotes (also through a cause, whose message pino appends), so only its code is kept.
 *
 * @example serializeLoggedError(pgUniqueViolation) // { type: "DatabaseError", code: "23505", statement: "database" }
 */
export function serializeLoggedError(error: unknown): unknown {
  const raw = findRawDatabaseError(error);
  if (raw === undefined) return stdSerializers.err(error as Error);
  return {
    type: "DatabaseError",
    message: `database error ${databaseErrorCode(raw)} in database`,
    code: databaseErrorCode(raw),
    statement: "database",
  };
}

/** The first raw database error in `error`'s cause chain (at most 8 deep, cycles cut). */
function findRawDatabaseError(error: unknown): unknown {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && typeof current === "object" && current !== null; depth += 1) {
    if (isRawDatabaseError(current)) return current;
    const next: unknown = (current as { cause?: unknown }).cause;
    if (next === current) return undefined;
    current = next;
  }
  return undefined;
}
