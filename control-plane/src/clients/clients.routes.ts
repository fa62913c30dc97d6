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
  // Issuing, rotating and revoking clients: owners and admins (DECISIONS "Teams").
  const clientsWrite = checkedFirst(operatorOnly("clients.write"), organisationOf);

  for (const kind of ["model", "trusted"] as ClientKind[]) {
    api.post(
      `/api/clients/${kind}`,
      { ...clientsWrite, schema: { body: clientInput, response: { 201: issuedClient } } },
      async (request, reply) => {
        const organisationId = await organisationOf(request);
        return reply.status(201).send(await deps.clients.issueClient(organisationId, kind, request.body));
      },
    );
  }
  api.post(
    "/api/clients/:id/rotate",
    { ...clientsWrite, schema: { params: idParams, response: { 200: issuedClient } } },
    async (request) => deps.clients.rotateClient(await organisationOf(request), request.params.id),
  );
  api.post(
    "/api/clients/:id/revoke",
    { ...clientsWrite, schema: { params: idParams, response: { 200: okAnswer } } },
    async (request) => {
      const operator = await requireOperator(request, { mfa: true });
      await deps.clients.revokeClient(
        requireOrganisation(operator),
        request.params.id,
        `operator:${operator.operatorId}`,
      );
      return { ok: true as const };
    },
  );
}
