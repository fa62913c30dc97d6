// Resolve: the plaintext of one credential for a trusted runtime, behind a resolve ticket. The
// control plane authorises the runtime; the proxy only checks that the ticket says so.

import type { ResolveResponse, SignedTicket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import type { Logger } from "pino";
import type { SealingKeyring } from "../keys/sealing-keys.ts";
import { partOfKind } from "../tickets/ticket-kind.ts";
import type { TicketChecker, TicketSpender } from "../tickets/verify.ts";

export function createResolve(deps: {
  checkTicket: TicketChecker;
  spendTicket: TicketSpender;
  keyring: Pick<SealingKeyring, "current" | "open">;
  logger: Logger;
}): (signed: SignedTicket | undefined) => Promise<ResolveResponse> {
  return async (signed) => {
    // Checked before spent, as in Execute: an unsigned ticket can never burn a real ticket's id.
    const ticket = await deps.checkTicket(signed);
    const credential = partOfKind(ticket, "resolve", "the ticket carries no resolve request").credential;
    if (!credential) throw new AppError("ticket_invalid", "the ticket carries no resolve request");
    await deps.spendTicket(ticket);
    const value = deps.keyring.open(credential.keyId, credential.sealedValue);
    deps.logger.info(
      { ticket: ticket.id.slice(0, 8), item: credential.itemName },
      "value resolved for a trusted runtime",
    );
    return { value };
  };
}
