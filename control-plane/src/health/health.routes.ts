// GET /health (liveness: the process answers) and GET /ready (the database and the egress proxy
// answer), spec 4.3. Neither says anything about keys or versions.
import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "../http/route-schemas.ts";
import { liveness, readiness } from "./health.schemas.ts";

export interface HealthDeps {
  product: string;
  isDatabaseReady(): Promise<boolean>;
  isEgressReady(): Promise<boolean>;
}

export function registerHealthRoutes(app: FastifyInstance, deps: HealthDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  api.get("/health", { schema: { response: { 200: liveness } } }, async () => ({
    ok: true as const,
    product: deps.product,
  }));
  api.get("/ready", { schema: { response: { 200: readiness, 503: readiness } } }, async (_request, reply) => {
    const [database, egress] = await Promise.all([deps.isDatabaseReady(), deps.isEgressReady()]);
    const ok = database && egress;
    return reply.status(ok ? 200 : 503).send({
      ok,
      checks: { database: database ? "ok" : "unavailable", egress: egress ? "ok" : "unavailable" },
    });
  });
}
