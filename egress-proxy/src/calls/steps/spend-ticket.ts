// Single use. Runs only on a verified ticket, so an unsigned or expired ticket can never
// burn a real ticket's id; a replayed ticket stops here, before any credential is opened.
import type { TicketSpender } from "../../tickets/verify.ts";
import type { CallTicket } from "./verify-ticket.ts";

export async function spendTicket(ticket: CallTicket, deps: { spendTicket: TicketSpender }): Promise<void> {
  await deps.spendTicket(ticket);
}
