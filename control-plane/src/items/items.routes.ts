// The hosted items API (spec 4.3 "Items and collect"): list without values, create, edit, rotate,
// delete, folders. Every route needs a ready operator session acting in an organisation.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { requireOrgOperator } from "../auth/operator-guard.ts";
import { operatorOnly } from "../auth/principal.ts";
import { checkedFirst, idParams, okAnswer, type ZodTypeProvider } from "../http/route-schemas.ts";
import { findProviderByHost } from "../providers/providers.ts";
import type { ItemView } from "./items.schemas.ts";
import {
  folderAnswer,
  folderInput,
  itemAnswer,
  itemEdit,
  itemInput,
  itemList,
  itemRotation,
  itemsQuery,
} from "./items.schemas.ts";
import type { ItemsService } from "./items.service.ts";

/**
 * The provider an app credential can connect a user account of (spec 4.3
 * `/api/integrations/:provider/start`): an item injected as `client_credentials` on a provider's
 * hosts. The console offers "Connect" on it, so every provider connects from the Vault, Stripe
 * included (no agent ever asks Stripe for a user account).
 */
function withConnectProvider(item: ItemView): ItemView & { connect_provider: string | null } {
  const provider =
    item.inject === "client_credentials"
      ? item.allowed_hosts.map((host) => findProviderByHost(host)).find((p) => p !== undefined)
      : undefined;
  return { ...item, connect_provider: provider?.id ?? null };
}

export function registerItemsRoutes(app: FastifyInstance, deps: { items: ItemsService }): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const operatorOf = (request: FastifyRequest) => requireOrgOperator(request);
  const readItems = checkedFirst(operatorOnly("org.read"), operatorOf);
  const writeItems = checkedFirst(operatorOnly("credentials.write"), operatorOf);

  api.get(
    "/api/items",
    { ...readItems, schema: { querystring: itemsQuery, response: { 200: itemList } } },
    async (request) => {
      const { organisationId } = await operatorOf(request);
      const items = await deps.items.listItems(organisationId, request.query.environment);
      return { items: items.map(withConnectProvider) };
    },
  );
  // The service judges names, values, hosts and inject modes (invalid_name, empty_value,
  // invalid_host ...); the schema gives the shape and the safe-text rule.
  api.post(
    "/api/items",
    { ...writeItems, schema: { body: itemInput, response: { 201: itemAnswer } } },
    async (request, reply) => {
      const { organisationId, actor, role } = await operatorOf(request);
      return reply
        .status(201)
        .send({ item: await deps.items.storeItem(organisationId, actor, request.body, { role }) });
    },
  );
  for (const path of ["/api/items/:id", "/api/items/:id/meta"]) {
    api.post(
      path,
      {
        ...writeItems,
        schema: { params: idParams, body: itemEdit, response: { 200: itemAnswer } },
      },
      async (request) => {
        const { organisationId, actor, role } = await operatorOf(request);
        return {
          item: await deps.items.updateItem(organisationId, actor, request.params.id, request.body, {
            role,
          }),
        };
      },
    );
  }
  api.post(
    "/api/items/:id/rotate",
    {
      ...writeItems,
      schema: { params: idParams, body: itemRotation, response: { 200: itemAnswer } },
    },
    async (request) => {
      const { organisationId, actor } = await operatorOf(request);
      return {
        item: await deps.items.rotateItem(organisationId, actor, request.params.id, request.body.value),
      };
    },
  );
  api.delete(
    "/api/items/:id",
    { ...writeItems, schema: { params: idParams, response: { 200: okAnswer } } },
    async (request) => {
      const { organisationId, actor } = await operatorOf(request);
      await deps.items.deleteItem(organisationId, actor, request.params.id);
      return { ok: true as const };
    },
  );
  api.post(
    "/api/folders",
    { ...writeItems, schema: { body: folderInput, response: { 201: folderAnswer } } },
    async (request, reply) => {
      const { organisationId } = await operatorOf(request);
      const { environment, name } = request.body;
      return reply
        .status(201)
        .send({ folder: await deps.items.createFolder(organisationId, environment, name) });
    },
  );
}
