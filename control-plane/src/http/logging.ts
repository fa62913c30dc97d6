// What an HTTP request may put in a log line: method, path without its query (approval links
// carry single-use tokens there) and without the interaction id of an OAuth resume path (it is the
// authorization server's interaction cookie value), status and timing. No header, cookie or body, ever. An error is
// logged with its type, message and stack, except a database error: its SQLSTATE and statement only.
import { type FastifyReply, type FastifyRequest, type FastifyServerOptions, LogController } from "fastify";
import { type Logger, stdSerializers } from "pino";
import { databaseErrorCode, isRawDatabaseError } from "../db/database-error.ts";
import { generateRequestId } from "./request-context.ts";

/**
 * The GETs a console polls every few seconds and the health checks a load balancer or orchestrator
 * sends: logged at debug, not info, so that an idle console does not bury the lines that matter.
 * An answer of 400 or above on them is still logged at info (or as an error).
 */
export const QUIET_GET_PATHS: ReadonlySet<string> = new Set(["/health", "/ready", "/api/inbox"]);

/** Fastify's request lines, at debug instead of info for a GET or HEAD of one of `quietPaths`. */
class QuietPollLogController extends LogController {
  readonly #quietPaths: ReadonlySet<string>;

  constructor(quietPaths: ReadonlySet<string>) {
    super();
    this.#quietPaths = quietPaths;
  }

  #isQuiet(request: FastifyRequest): boolean {
    return (
      (request.method === "GET" || request.method === "HEAD") && this.#quietPaths.has(loggedPath(request.url))
    );
  }

  override incomingRequest(request: FastifyRequest, reply: FastifyReply) {
    if (!this.#isQuiet(request)) return super.incomingRequest(request, reply);
    request.log.debug({ req: request }, "incoming request");
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply) {
    // A failing probe (a 503 from /ready) is worth a line at info.
    if (error || reply.statusCode >= 400 || !this.#isQuiet(request)) {
      return super.requestCompleted(error, request, reply);
    }
    reply.log.debug({ res: reply, responseTime: reply.elapsedTime }, "request completed");
  }
}

export function requestLogging(
  logger: Logger,
  quietPaths: ReadonlySet<string> = QUIET_GET_PATHS,
): Pick<FastifyServerOptions, "loggerInstance" | "requestIdHeader" | "genReqId" | "logController"> & {
  loggerInstance: Logger;
} {
  return {
    logController: new QuietPollLogController(quietPaths),
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
  if (raw === undefined) {
    const serialized = stdSerializers.err(error as Error) as unknown as Record<string, unknown>;
    // Node's HTTP parse errors (Fastify logs them at trace) carry the request's bytes as they came:
    // its bearer, its cookies, its query. The code and message say what went wrong.
    if (serialized && typeof serialized === "object") delete serialized.rawPacket;
    return serialized;
  }
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
