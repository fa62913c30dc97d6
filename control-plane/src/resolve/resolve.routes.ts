// POST /runtime/resolve (spec 4.3 "Trusted resolve"): a trusted runtime (avt_ bearer) gets the
// plaintext of one credential, opened by the egress proxy for this one answer. A model token is 403.
import { AppError } from "@latch/shared/errors";
import type { FastifyInstance } from "fastify";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { clientOf, TRUSTED_ONLY } from "../auth/principal.ts";
import type { EgressClient } from "../egress/egress-client.ts";
import type { TicketMinter } from "../egress/tickets.ts";
import type { ZodTypeProvider } from "../http/route-schemas.ts";
import type { ItemsService } from "../items/items.service.ts";
import { resolvedItem, resolveInput } from "./resolve.schemas.ts";

export interface ResolveDeps {
  items: ItemsService;
  minter: TicketMinter;
  egress: EgressClient;
  recordEvent(event: AuditEvent): Promise<void>;
}

export function registerResolveRoutes(app: FastifyInstance, deps: ResolveDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  api.post(
    "/runtime/resolve",
    { config: TRUSTED_ONLY, schema: { body: resolveInput, response: { 200: resolvedItem } } },
    async (request) => {
      const client = clientOf(request);
      const input = request.body;
      const item = await deps.items.findCallableByName(
        client.organisation_id,
        client.environment,
        input.item_name,
      );
      if (!item)
        throw new AppError("not_found", `no credential named ${input.item_name} in ${client.environment}`);
      const ticket = deps.minter.mintResolveTicket(
        {
          credential: {
            itemName: item.name,
            keyId: item.sealingKeyId,
            sealedValue: Buffer.from(item.sealedValue),
            username: item.username ?? "",
          },
        },
        { organisationId: client.organisation_id },
      );
      const value = await deps.egress.resolve(ticket);
      await deps.recordEvent({
        organisationId: client.organisation_id,
        environment: client.environment,
        actor: `trusted:${client.id}`,
        action: "resolved",
        itemName: item.name,
      });
      return { item_name: item.name, value };
    },
  );
}
