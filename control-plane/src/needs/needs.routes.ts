// Need-item routes (spec 4.3 "Items and collect"): the operator reads, fulfils or denies a collect
// request; GET /collect/:id is the page where the value is typed. Unauthenticated or another
// organisation's request is 404, so a leaked collect link tells a stranger nothing.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { requireOrgOperator } from "../auth/operator-guard.ts";
import type { RouteAction } from "../auth/permissions.ts";
import type { RouteAccess } from "../auth/principal.ts";
import { checkedFirst, idParams, okAnswer, type ZodTypeProvider } from "../http/route-schemas.ts";
import { readPage, sendPage } from "../pages/page-files.ts";
import { fulfilledNeed, needAnswer, needFulfilment } from "./needs.schemas.ts";
import type { NeedsService } from "./needs.service.ts";

/**
 * Operators only; anyone else is told nothing, not even that the request exists. Reading it is
 * any member's; storing the value writes a credential; denying it is an approval decision.
 */
function needRequestAccess(action: RouteAction) {
  return { principals: ["operator"], anonymousStatus: 404, action } as const satisfies RouteAccess;
}

export function registerNeedsRoutes(app: FastifyInstance, deps: { needs: NeedsService }): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const operatorOf = (request: FastifyRequest) => requireOrgOperator(request);

  api.get(
    "/api/need-items/:id",
    {
      ...checkedFirst(needRequestAccess("org.read"), operatorOf),
      schema: { params: idParams, response: { 200: needAnswer } },
    },
    async (request) => {
      const { organisationId } = await operatorOf(request);
      return { need: await deps.needs.getNeed(organisationId, request.params.id) };
    },
  );
  api.post(
    "/api/need-items/:id/fulfill",
    {
      ...checkedFirst(needRequestAccess("credentials.write"), operatorOf),
      schema: { params: idParams, body: needFulfilment, response: { 200: fulfilledNeed } },
    },
    async (request) => {
      const { organisationId, actor } = await operatorOf(request);
      return deps.needs.fulfilNeed(organisationId, actor, request.params.id, request.body);
    },
  );
  api.post(
    "/api/need-items/:id/deny",
    {
      ...checkedFirst(needRequestAccess("approvals.decide"), operatorOf),
      schema: { params: idParams, response: { 200: okAnswer } },
    },
    async (request) => {
      const { organisationId, actor } = await operatorOf(request);
      await deps.needs.denyNeed(organisationId, request.params.id, actor);
      return { ok: true as const };
    },
  );
  // A shell with no details in it: its script (/assets/collect.js) loads the request as the
  // signed-in operator, so the page itself is the same for everyone.
  const collectPage = readPage("pages/collect.html").fill({});
  api.get("/collect/:id", { schema: { params: idParams } }, async (_request, reply) =>
    sendPage(reply, "collect", collectPage),
  );
}
