// The operator's inbox (spec 4.3 "Clients, grants, inbox, audit"): the approvals waiting and the
// requests for credentials, from the two features that own them.
import type { FastifyInstance } from "fastify";
import { requireOrgOperator } from "../auth/operator-guard.ts";
import { operatorOnly } from "../auth/principal.ts";
import type { GrantsService } from "../grants/grants.service.ts";
import type { ZodTypeProvider } from "../http/route-schemas.ts";
import type { NeedsService } from "../needs/needs.service.ts";
import { inboxAnswer } from "./inbox.schemas.ts";

export interface InboxRouteDeps {
  grants: Pick<GrantsService, "listPendingApprovals">;
  needs: Pick<NeedsService, "listPending">;
}

export function registerInboxRoutes(app: FastifyInstance, deps: InboxRouteDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  api.get(
    "/api/inbox",
    { config: operatorOnly("org.read"), schema: { response: { 200: inboxAnswer } } },
    async (request) => {
      const operator = await requireOrgOperator(request);
      const approvals = await deps.grants.listPendingApprovals(operator.organisationId);
      const requests = await deps.needs.listPending(operator.organisationId);
      return { approvals, requests };
    },
  );
}
