// Issuing, rotating and revoking model and trusted clients (spec 4.3 "Clients").
import type { FastifyInstance, FastifyRequest } from "fastify";
import { requireOperator, requireOrganisation } from "../auth/operator-guard.ts";
import { operatorOnly } from "../auth/principal.ts";
import { checkedFirst, idParams, okAnswer, type ZodTypeProvider } from "../http/route-schemas.ts";
import { clientInput, issuedClient } from "./clients.schemas.ts";
import type { ClientKind, ClientsService } from "./clients.service.ts";

export function registerClientsRoutes(app: FastifyInstance, deps: { clients: ClientsService }): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const organisationOf = async (request: FastifyRequest) =>
    requireOrganisation(await requireOperator(request, { mfa: true }));
  /** The organisation and who acts in it, as an audit row names the member (DECISIONS "Teams"). */
  const actingIn = async (request: FastifyRequest) => {
    const operator = await requireOperator(request, { mfa: true });
    return { organisationId: requireOrganisation(operator), actor: `operator:${operator.operatorId}` };
  };
  // Issuing, rotating and revoking clients: owners and admins (DECISIONS "Teams").
  const clientsWrite = checkedFirst(operatorOnly("clients.write"), organisationOf);

  for (const kind of ["model", "trusted"] as ClientKind[]) {
    api.post(
      `/api/clients/${kind}`,
      { ...clientsWrite, schema: { body: clientInput, response: { 201: issuedClient } } },
      async (request, reply) => {
        const { organisationId, actor } = await actingIn(request);
        return reply
          .status(201)
          .send(await deps.clients.issueClient(organisationId, kind, request.body, actor));
      },
    );
  }
  api.post(
    "/api/clients/:id/rotate",
    { ...clientsWrite, schema: { params: idParams, response: { 200: issuedClient } } },
    async (request) => {
      const { organisationId, actor } = await actingIn(request);
      return deps.clients.rotateClient(organisationId, request.params.id, actor);
    },
  );
  api.post(
    "/api/clients/:id/revoke",
    { ...clientsWrite, schema: { params: idParams, response: { 200: okAnswer } } },
    async (request) => {
      const { organisationId, actor } = await actingIn(request);
      await deps.clients.revokeClient(organisationId, request.params.id, actor);
      return { ok: true as const };
    },
  );
}
