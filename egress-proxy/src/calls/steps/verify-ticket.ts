// The ticket's signature, audience and lifetime, and that it carries a call at all.
// Nothing is spent, opened or sent before this passes.

import type { SignedTicket, Ticket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { partOfKind } from "../../tickets/ticket-kind.ts";
import type { TicketChecker } from "../../tickets/verify.ts";

/** A ticket that passed every check and carries a call spec with a credential. */
export type CallTicket = Ticket & { call: NonNullable<Ticket["call"]> };

export async function verifyTicket(
  signed: SignedTicket | undefined,
  deps: { checkTicket: TicketChecker },
): Promise<CallTicket> {
  const ticket = await deps.checkTicket(signed);
  if (!partOfKind(ticket, "call", "the ticket carries no call").credential) {
    throw new AppError("ticket_invalid", "the ticket carries no call");
  }
  return ticket as CallTicket;
}
