// Issuing, rotating and revoking clients (spec 4.3 "Clients").
import type { FastifyInstance, FastifyRequest } from "fastify";
import { requireOperator, requireOrganisation } from "../auth/operator-guard.ts";
import { operatorOnly } from "../auth/principal.ts";
import type { StepUpRule } from "../auth/step-up.ts";
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
  /**
   * An avt_ reads every credential of its environment in plaintext (POST /runtime/resolve): more
   * than any standing approval, so issuing one, or a new bearer for one, needs the same step-up
   * (auth/step-up.ts: 5 minutes, a passkey when the operator has one or the organisation asks).
   * A model client's rotation does not: its every call still waits for an approval.
   */
  const STEP_UP: Record<ClientKind, StepUpRule | undefined> = {
    model: undefined,
    trusted: { doing: "issuing a trusted client" },
  };
  const ROTATES_TRUSTED: StepUpRule = {
    doing: "rotating a trusted client",
    // Judged after the role (operator-guard.ts), so the session acts in an organisation.
    when: async (request) => {
      const organisationId = request.operatorSession?.organisation_id;
      const id = (request.params as { id?: unknown }).id;
      if (!organisationId || typeof id !== "string") return false;
      return (await deps.clients.kindOf(organisationId, id)) === "trusted";
    },
  };
  // Issuing, rotating and revoking clients: owners and admins (DECISIONS "Teams").
  const clientsWrite = (stepUp?: StepUpRule) =>
    checkedFirst({ ...operatorOnly("clients.write"), ...(stepUp ? { stepUp } : {}) }, organisationOf);

  for (const kind of ["model", "trusted"] as ClientKind[]) {
    api.post(
      `/api/clients/${kind}`,
      { ...clientsWrite(STEP_UP[kind]), schema: { body: clientInput, response: { 201: issuedClient } } },
      async (request, reply) => {
        const { organisationId, actor } = await actingIn(request);
        return reply
          .status(201)
          .send(await deps.clients.issueClient(organisationId, kind, request.body, actor));
      },
    );
  }
  const rotates = clientsWrite(ROTATES_TRUSTED);
  api.post(
    "/api/clients/:id/rotate",
    {
      ...rotates,
      // 409 stale_version: another rotation of the client committed first.
      config: { ...rotates.config, openapi: { errors: [409] } },
      schema: { params: idParams, response: { 200: issuedClient } },
    },
    async (request) => {
      const { organisationId, actor } = await actingIn(request);
      return deps.clients.rotateClient(organisationId, request.params.id, actor);
    },
  );
  api.post(
    "/api/clients/:id/revoke",
    { ...clientsWrite(), schema: { params: idParams, response: { 200: okAnswer } } },
    async (request) => {
      const { organisationId, actor } = await actingIn(request);
      await deps.clients.revokeClient(organisationId, request.params.id, actor);
      return { ok: true as const };
    },
  );
}
