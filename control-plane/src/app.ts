// The hosted control plane's HTTP application without listen(): tests call app.inject().
// Every route is registered here from the services it is given; nothing is wired inside routes.
import Fastify, { type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { registerHealthRoutes } from "./health/health.routes.ts";
import { registerErrorHandling } from "./http/errors.ts";
import { requestLogging } from "./http/logging.ts";

/** Spec 4.3 and 8: JSON bodies over 128 KiB are 413. */
export const BODY_LIMIT_BYTES = 128 * 1024;
export const PRODUCT_NAME = "Latch";

export interface AppDeps {
  logger: Logger;
  isDatabaseReady(): Promise<boolean>;
  isEgressReady(): Promise<boolean>;
}

export function buildApp(deps: AppDeps): FastifyInstance {
  const app = Fastify({
    ...requestLogging(deps.logger),
    bodyLimit: BODY_LIMIT_BYTES,
    // One exact route table: /api/items/ is not /api/items.
    routerOptions: { ignoreTrailingSlash: false, ignoreDuplicateSlashes: false },
    trustProxy: false,
  }) as unknown as FastifyInstance;
  registerJsonOnly(app);
  registerErrorHandling(app);
  app.addHook("onSend", async (_request, reply) => {
    reply.header("x-content-type-options", "nosniff");
    reply.header("referrer-policy", "no-referrer");
    reply.header("cache-control", "no-store");
  });
  registerHealthRoutes(app, {
    product: PRODUCT_NAME,
    isDatabaseReady: deps.isDatabaseReady,
    isEgressReady: deps.isEgressReady,
  });
  return app;
}

/** JSON routes take application/json only (spec 4.3: anything else is 415). */
export function registerJsonOnly(app: FastifyInstance): void {
  app.removeContentTypeParser("text/plain");
}
