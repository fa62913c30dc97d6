// What an HTTP request may put in a log line: method, path without its query (approval links
// carry single-use tokens there), status and timing. No header, cookie or body, ever.
import type { FastifyServerOptions } from "fastify";
import type { Logger } from "pino";

export function requestLogging(
  logger: Logger,
): Pick<FastifyServerOptions, "loggerInstance" | "requestIdHeader"> & { loggerInstance: Logger } {
  return {
    loggerInstance: logger.child(
      {},
      {
        serializers: {
          req: (req: { method?: string; url?: string; id?: string }) => ({
            id: req.id,
            method: req.method,
            path: (req.url ?? "").split("?")[0],
          }),
          res: (res: { statusCode?: number }) => ({ status: res.statusCode }),
        },
      },
    ),
    // Request ids come from us, not from a caller's header (which could smuggle text into logs).
    requestIdHeader: false,
  };
}
