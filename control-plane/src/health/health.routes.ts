// GET /health (liveness: the process answers) and GET /ready (the database and the egress proxy
// answer), spec 4.3. Neither says anything about keys or versions.
import type { FastifyInstance } from "fastify";

export interface HealthDeps {
  product: string;
  isDatabaseReady(): Promise<boolean>;
  isEgressReady(): Promise<boolean>;
}

export function registerHealthRoutes(app: FastifyInstance, deps: HealthDeps): void {
  app.get("/health", async () => ({ ok: true, product: deps.product }));
  app.get("/ready", async (_request, reply) => {
    const [database, egress] = await Promise.all([deps.isDatabaseReady(), deps.isEgressReady()]);
    const ok = database && egress;
    return reply.status(ok ? 200 : 503).send({
      ok,
      checks: { database: database ? "ok" : "unavailable", egress: egress ? "ok" : "unavailable" },
    });
  });
}
