// POST /runtime/resolve (spec 4.3 "Trusted resolve"): a trusted runtime (avt_ bearer) gets the
// plaintext of one credential, opened by the egress proxy for this one answer. A model token is 403.
import type { SignedTicket } from "@latch/proto/egress";
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

/**
 * A stored value the proxy cannot open (no sealing key of that id on it, or a damaged sealed
 * value): the deployment or the store is at fault, not the request, so it answers 502 (the
 * route's documented statuses), not the generic 500 of shared/errors' table.
 */
class CredentialUnavailable extends AppError {
  override readonly status = 502;
}

/**
 * The proxy's value, or its refusal as what it is. A `ticket_*` refusal (another audience, a
 * signing key it does not know, clocks apart, a replayed id) is a fault between this plane and its
 * proxy: shared/errors' table says 401 for those, which the runtime would read as its own bearer
 * refused, and an operator would answer by rotating a good token. It answers 503 here instead.
 */
async function openValue(egress: EgressClient, ticket: SignedTicket): Promise<string> {
  try {
    return await egress.resolve(ticket);
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    if (error.code === "ticket_predates_proxy") {
      throw new AppError(
        "egress_unavailable",
        "the egress proxy restarted while this value was being read; nothing was read, ask again",
        { cause: error },
      );
    }
    if (error.code.startsWith("ticket_")) {
      throw new AppError(
        "egress_unavailable",
        "the egress proxy refused this service's ticket (a deployment fault: its audience, signing key or clock); the bearer was not refused",
        { cause: error },
      );
    }
    if (error.code === "credential_unavailable") {
      throw new CredentialUnavailable(
        "credential_unavailable",
        "the egress proxy cannot open this credential (it holds no key for it, or the stored value is damaged); store the value again or check the proxy's sealing keys",
        { cause: error },
      );
    }
    throw error;
  }
}

export function registerResolveRoutes(app: FastifyInstance, deps: ResolveDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  api.post(
    "/runtime/resolve",
    { config: TRUSTED_ONLY, schema: { body: resolveInput, response: { 200: resolvedItem } } },
    async (request) => {
      const client = clientOf(request);
      const principal = request.principal;
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
      const value = await openValue(deps.egress, ticket);
      // Spec 3.4: revoking stops the token at once. The bearer was checked before the body was read,
      // and a revoke may have landed while the proxy was opening the value: asked once more (one
      // statement) before the value leaves or is recorded as given.
      if (principal.kind !== "trusted" || !(await principal.isStillLive())) {
        throw new AppError(
          "unauthorized",
          "this client was revoked or its token rotated; nothing was resolved",
        );
      }
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
