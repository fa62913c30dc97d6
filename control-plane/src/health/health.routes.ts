// GET /health (liveness: the process answers) and GET /ready (spec 4.3: 503 only when the database
// ping fails). The egress proxies' state is said in the body, but never fails readiness: with
// every proxy down the console and the approvals still work, and a load balancer that took every
// control-plane pod out would take them down too (DECISIONS "Faults and isolation"). Neither route
// says anything about keys or versions.
import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "../http/route-schemas.ts";
import { liveness, readiness } from "./health.schemas.ts";

export interface HealthDeps {
  product: string;
  isDatabaseReady(): Promise<boolean>;
  /** From the balancer's view of the replicas: no RPC, so /ready never waits on a silent proxy. */
  isEgressServing(): boolean;
}

/** How long one database ping answers /ready for: far shorter than any probe's period. */
export const READY_PING_REUSE_MS = 1000;

/**
 * The database's readiness, asked at most once at a time and reused for READY_PING_REUSE_MS.
 * /ready is public: without this, every request took a connection of the pool for its own ping, so
 * a flood of them queued the plane's real queries and timed their own pings out, answering 503 on
 * a healthy database until the load balancer took the pod out.
 */
function sharedPing(isDatabaseReady: () => Promise<boolean>): () => Promise<boolean> {
  let inFlight: Promise<boolean> | undefined;
  let last: { isReady: boolean; at: number } | undefined;
  return () => {
    if (last && performance.now() - last.at < READY_PING_REUSE_MS) return Promise.resolve(last.isReady);
    inFlight ??= isDatabaseReady()
      .catch(() => false)
      .then((isReady) => {
        last = { isReady, at: performance.now() };
        return isReady;
      })
      .finally(() => {
        inFlight = undefined;
      });
    return inFlight;
  };
}

export function registerHealthRoutes(app: FastifyInstance, deps: HealthDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const isDatabaseReady = sharedPing(() => deps.isDatabaseReady());
  api.get("/health", { schema: { response: { 200: liveness } } }, async () => ({
    ok: true as const,
    product: deps.product,
  }));
  api.get("/ready", { schema: { response: { 200: readiness, 503: readiness } } }, async (_request, reply) => {
    const database = await isDatabaseReady();
    const egress = deps.isEgressServing();
    return reply.status(database ? 200 : 503).send({
      ok: database,
      checks: { database: database ? "ok" : "unavailable", egress: egress ? "ok" : "unavailable" },
    });
  });
}
