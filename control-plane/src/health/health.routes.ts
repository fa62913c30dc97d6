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

export function registerHealthRoutes(app: FastifyInstance, deps: HealthDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  api.get("/health", { schema: { response: { 200: liveness } } }, async () => ({
    ok: true as const,
    product: deps.product,
  }));
  api.get("/ready", { schema: { response: { 200: readiness, 503: readiness } } }, async (_request, reply) => {
    const database = await deps.isDatabaseReady();
    const egress = deps.isEgressServing();
    return reply.status(database ? 200 : 503).send({
      ok: database,
      checks: { database: database ? "ok" : "unavailable", egress: egress ? "ok" : "unavailable" },
    });
  });
}
