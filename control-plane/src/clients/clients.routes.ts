// Issuing, rotating and revoking model and trusted clients (spec 4.3 "Clients").
import { checkTextFields } from "@latch/shared/text/safe-string";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Kysely } from "kysely";
import { requireOperator, requireOrganisation } from "../auth/operator-guard.ts";
import { OPERATOR_ONLY } from "../auth/principal.ts";
import type { Database } from "../db/schema.ts";
import type { ClientKind, ClientsService } from "./clients.service.ts";

export function registerClientsRoutes(
  app: FastifyInstance,
  deps: { db: Kysely<Database>; clients: ClientsService },
): void {
  const organisationOf = async (request: FastifyRequest) =>
    requireOrganisation(await requireOperator(request, deps.db, { mfa: true }));
  const body = (raw: unknown) =>
    typeof raw === "object" && raw !== null ? (raw as Record<string, unknown>) : {};

  for (const kind of ["model", "trusted"] as ClientKind[]) {
    app.post(`/api/clients/${kind}`, { config: OPERATOR_ONLY }, async (request, reply) => {
      const organisationId = await organisationOf(request);
      const input = body(request.body);
      checkTextFields(input, { environment: "line", name: "line" });
      return reply.status(201).send(await deps.clients.issueClient(organisationId, kind, input));
    });
  }
  app.post<{ Params: { id: string } }>(
    "/api/clients/:id/rotate",
    { config: OPERATOR_ONLY },
    async (request) => deps.clients.rotateClient(await organisationOf(request), request.params.id),
  );
  app.post<{ Params: { id: string } }>(
    "/api/clients/:id/revoke",
    { config: OPERATOR_ONLY },
    async (request) => {
      await deps.clients.revokeClient(await organisationOf(request), request.params.id);
      return { ok: true };
    },
  );
}
