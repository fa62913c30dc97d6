// The hosted control plane's HTTP application without listen(): tests call app.inject().
// Every route is registered here from the services it is given; nothing is wired inside routes.
import fastifyCookie from "@fastify/cookie";
import Fastify, { type FastifyContextConfig, type FastifyInstance, type FastifySchema } from "fastify";
import type { Logger } from "pino";
import { registerOperatorSessions } from "./auth/operator-guard.ts";
import type { RouteAction } from "./auth/permissions.ts";
import type { PrincipalKind } from "./auth/principal.ts";
import type { SessionsRepo } from "./auth/sessions.ts";
import type { StepUpFactors } from "./auth/step-up.ts";
import type { ClientRow, OperatorSessionRow } from "./db/schema.ts";
import { registerHealthRoutes } from "./health/health.routes.ts";
import { registerCanonicalHost } from "./http/canonical-host.ts";
import { answerFrameworkError, registerErrorHandling } from "./http/errors.ts";
import { registerJsonBody } from "./http/json-body.ts";
import { requestLogging } from "./http/logging.ts";
import { registerRequestContext } from "./http/request-context.ts";
import { registerRequestTextCheck } from "./http/request-text.ts";
import { registerRouteSchemas } from "./http/route-schemas.ts";
import { type ControlPlaneMetrics, registerHttpMetrics } from "./metrics/metrics.ts";
import { readPage } from "./pages/page-files.ts";
import { pageHeaders, strictTransportSecurity } from "./pages/page-headers.ts";

/** Spec 4.3 and 8: JSON bodies over 128 KiB are 413. */
export const BODY_LIMIT_BYTES = 128 * 1024;
export const PRODUCT_NAME = "Latch";

export interface AppDeps {
  logger: Logger;
  isDatabaseReady(): Promise<boolean>;
  /** Whether some proxy replica serves now (said by /ready, never its status). */
  isEgressServing(): boolean;
  /** Operator sessions from the cookie, and the Origin wall (spec 5 rules 4 and 6). */
  sessions?: {
    sessions: SessionsRepo;
    baseUrl: string;
    now: () => Date;
    authenticateBearer?: (token: string) => Promise<ClientRow | undefined>;
    /** A bearer found live within the last minutes, for routes that confirm it themselves. */
    recallBearer?: (token: string) => Promise<{ client: ClientRow; bearerHash: string } | undefined>;
    hasAuthenticator: (operatorId: string) => Promise<boolean>;
    stepUpFactors?: (session: OperatorSessionRow) => Promise<StepUpFactors>;
  };
  /** TRUST_PROXY: load balancers whose X-Forwarded-For names the caller (request.ip). */
  trustedProxies?: readonly string[];
  /** Prometheus counters of every answered request (METRICS_LISTEN). */
  metrics?: Pick<ControlPlaneMetrics, "observeRequest">;
  /** Feature routes, registered after the walls. */
  routes?: ((app: FastifyInstance) => void)[];
}

/** A route as registered, with the principals it declared: the authorization suite's route list. */
export interface RegisteredRoute {
  method: string;
  url: string;
  principals: readonly PrincipalKind[] | undefined;
  /** What an operator does there (auth/permissions.ts), judged against their role. */
  action: RouteAction | undefined;
  /** The route's zod schemas (params, querystring, body, response): what /openapi.json is made of. */
  schema: FastifySchema | undefined;
  /** The route's config: who may call it, and what else it declares (http/openapi.ts reads it). */
  config: FastifyContextConfig | undefined;
}

declare module "fastify" {
  interface FastifyInstance {
    /** Every route registered on this app (HEAD twins left out), in registration order. */
    registeredRoutes: readonly RegisteredRoute[];
  }
}

/** How long a request may take to arrive whole, headers and body (Node's http `requestTimeout`). */
export const REQUEST_TIMEOUT_MS = 60_000;

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    ...requestLogging(deps.logger),
    bodyLimit: BODY_LIMIT_BYTES,
    // A request is received whole within a minute or answered 408 and closed (Fastify's default,
    // 0, waits for ever): a client holding its body back keeps no socket, and no action starts
    // long after its headers were judged. Nothing legitimate sends slower: bodies are at most
    // 1 MiB, and the long-lived streams (SSE, GET /mcp) are responses, which this does not time.
    requestTimeout: REQUEST_TIMEOUT_MS,
    // One exact route table: /api/items/ is not /api/items.
    routerOptions: { ignoreTrailingSlash: false, ignoreDuplicateSlashes: false },
    // request.ip is the socket's address unless it is a load balancer named in TRUST_PROXY.
    trustProxy: deps.trustedProxies?.length ? [...deps.trustedProxies] : false,
    frameworkErrors: answerFrameworkError,
  }) as unknown as FastifyInstance;
  // Recorded from the first route on, so that no route (a plugin's included) escapes the suite.
  const registered: RegisteredRoute[] = [];
  app.decorate("registeredRoutes", registered);
  app.addHook("onRoute", (route) => {
    for (const method of [route.method].flat()) {
      if (method === "HEAD") continue;
      registered.push({
        method,
        url: route.url,
        principals: route.config?.principals,
        action: route.config?.action,
        schema: route.schema,
        config: route.config,
      });
    }
  });
  const hsts = deps.sessions && strictTransportSecurity(deps.sessions.baseUrl);
  if (hsts) {
    // On the response itself, in the first hook, before any hook can answer: the answers handed
    // over to others (oidc-provider's, the live streams) never pass onSend and carry it too.
    app.addHook("onRequest", async (_request, reply) => {
      reply.raw.setHeader("strict-transport-security", hsts);
    });
  }
  registerRequestContext(app);
  if (deps.metrics) registerHttpMetrics(app, deps.metrics);
  registerJsonOnly(app);
  registerErrorHandling(app, {
    notFoundPage: { html: readPage("pages/not-found.html").fill({}), headers: pageHeaders("site") },
  });
  app.addHook("onSend", async (_request, reply) => {
    reply.header("x-content-type-options", "nosniff");
    reply.header("referrer-policy", "no-referrer");
    reply.header("cache-control", "no-store");
  });
  // Awaited, so its cookie parsing runs before the session hook below.
  await app.register(fastifyCookie);
  if (deps.sessions) {
    registerCanonicalHost(app, deps.sessions.baseUrl);
    registerOperatorSessions(app, deps.sessions);
  }
  registerHealthRoutes(app, {
    product: PRODUCT_NAME,
    isDatabaseReady: deps.isDatabaseReady,
    isEgressServing: deps.isEgressServing,
  });
  for (const register of deps.routes ?? []) register(app);
  return app;
}

/**
 * JSON routes take application/json only (spec 4.3: anything else is 415), parsed with the edge's
 * depth and text checks; every path and query parameter is judged as typed text, then by the
 * route's own zod schemas.
 */
export function registerJsonOnly(app: FastifyInstance): void {
  app.removeContentTypeParser("text/plain");
  registerJsonBody(app);
  registerRequestTextCheck(app);
  registerRouteSchemas(app);
}
