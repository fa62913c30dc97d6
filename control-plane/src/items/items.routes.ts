// The hosted items API (spec 4.3 "Items and collect"): list without values, create, edit, rotate,
// delete, folders. Every route needs a ready operator session acting in an organisation.
import { checkTextFields } from "@latch/shared/text/safe-string";
import type { FastifyInstance } from "fastify";
import type { Kysely } from "kysely";
import { requireOrgOperator } from "../auth/operator-guard.ts";
import { OPERATOR_ONLY } from "../auth/principal.ts";
import type { Database } from "../db/schema.ts";
import type { ItemsService } from "./items.service.ts";

export function registerItemsRoutes(
  app: FastifyInstance,
  deps: { db: Kysely<Database>; items: ItemsService },
): void {
  const operatorOf = (request: Parameters<typeof requireOrgOperator>[0]) =>
    requireOrgOperator(request, deps.db);
  const body = (raw: unknown) =>
    typeof raw === "object" && raw !== null ? (raw as Record<string, unknown>) : {};

  app.get<{ Querystring: { environment?: string } }>(
    "/api/items",
    { config: OPERATOR_ONLY },
    async (request) => {
      const { organisationId } = await operatorOf(request);
      return { items: await deps.items.listItems(organisationId, request.query.environment) };
    },
  );
  app.post("/api/items", { config: OPERATOR_ONLY }, async (request, reply) => {
    const { organisationId, actor } = await operatorOf(request);
    return reply.status(201).send({ item: await deps.items.storeItem(organisationId, actor, request.body) });
  });
  for (const path of ["/api/items/:id", "/api/items/:id/meta"]) {
    app.post<{ Params: { id: string } }>(path, { config: OPERATOR_ONLY }, async (request) => {
      const { organisationId, actor } = await operatorOf(request);
      return { item: await deps.items.updateItem(organisationId, actor, request.params.id, request.body) };
    });
  }
  app.post<{ Params: { id: string } }>(
    "/api/items/:id/rotate",
    { config: OPERATOR_ONLY },
    async (request) => {
      const { organisationId, actor } = await operatorOf(request);
      return {
        item: await deps.items.rotateItem(organisationId, actor, request.params.id, body(request.body).value),
      };
    },
  );
  app.delete<{ Params: { id: string } }>("/api/items/:id", { config: OPERATOR_ONLY }, async (request) => {
    const { organisationId, actor } = await operatorOf(request);
    await deps.items.deleteItem(organisationId, actor, request.params.id);
    return { ok: true };
  });
  app.post("/api/folders", { config: OPERATOR_ONLY }, async (request, reply) => {
    const { organisationId } = await operatorOf(request);
    const input = body(request.body);
    checkTextFields(input, { environment: "line", name: "line" });
    return reply
      .status(201)
      .send({ folder: await deps.items.createFolder(organisationId, input.environment, input.name) });
  });
}
