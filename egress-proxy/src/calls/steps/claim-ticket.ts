// Single use, claimed right before anything leaves for an origin (the token endpoint of a mint, or
// the API): the expiry is read again, then the id is spent in the replay store. A ticket the
// control plane fenced after its Execute went unanswered, or that another replica ran, stops here
// with nothing opened and nothing sent; a stalled process that wakes up finds its tickets fenced.
// Everything before this row (the spec check, DNS) spends nothing and sends nothing.
import type { TicketSpender } from "../../tickets/verify.ts";
import type { OutgoingCall } from "./outgoing-call.ts";

export async function claimTicket(call: OutgoingCall, deps: { spendTicket: TicketSpender }): Promise<void> {
  await deps.spendTicket({ id: call.ticketId, expiresAtMs: call.ticketExpiresAtMs });
}
