// Need-item routes (spec 4.3 "Items and collect"): the operator reads, fulfils or denies a collect
// request; GET /collect/:id is the page where the value is typed. Unauthenticated or another
// organisation's request is 404, so a leaked collect link tells a stranger nothing.
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Kysely } from "kysely";
import { requireOrgOperator } from "../auth/operator-guard.ts";
import type { RouteAccess } from "../auth/principal.ts";
import type { Database } from "../db/schema.ts";
import { readPage, sendPage } from "../pages/page-files.ts";
import type { NeedsService } from "./needs.service.ts";

/** Operators only; anyone else is told nothing, not even that the request exists. */
const NEED_REQUEST_ACCESS = { principals: ["operator"], anonymousStatus: 404 } as const satisfies RouteAccess;

export function registerNeedsRoutes(
  app: FastifyInstance,
  deps: { db: Kysely<Database>; needs: NeedsService },
): void {
  const operatorOf = (request: FastifyRequest) => requireOrgOperator(request, deps.db);
  const body = (raw: unknown) =>
    typeof raw === "object" && raw !== null ? (raw as Record<string, unknown>) : {};

  app.get<{ Params: { id: string } }>(
    "/api/need-items/:id",
    { config: NEED_REQUEST_ACCESS },
    async (request) => {
      const { organisationId } = await operatorOf(request);
      return { need: await deps.needs.getNeed(organisationId, request.params.id) };
    },
  );
  app.post<{ Params: { id: string } }>(
    "/api/need-items/:id/fulfill",
    { config: NEED_REQUEST_ACCESS },
    async (request) => {
      const { organisationId, actor } = await operatorOf(request);
      return deps.needs.fulfilNeed(organisationId, actor, request.params.id, body(request.body));
    },
  );
  app.post<{ Params: { id: string } }>(
    "/api/need-items/:id/deny",
    { config: NEED_REQUEST_ACCESS },
    async (request) => {
      const { organisationId } = await operatorOf(request);
      await deps.needs.denyNeed(organisationId, request.params.id);
      return { ok: true };
    },
  );
  // A shell with no details in it: its script (/assets/collect.js) loads the request as the
  // signed-in operator, so the page itself is the same for everyone.
  const collectPage = readPage("pages/collect.html").fill({});
  app.get<{ Params: { id: string } }>("/collect/:id", async (_request, reply) =>
    sendPage(reply, "collect", collectPage),
  );
}
