// Fence: the control plane's question about a ticket whose Execute ended without an answer,
// asked when it cannot write the shared spent-ticket table itself (one proxy, its memory store).
// The answer spends the id here exactly as a proxy about to dial would, so whichever came first
// wins: FENCED (nobody ran it and nobody ever will: the control plane gives the approval back),
// TAKEN (a replica spent it and may have reached the origin), UNKNOWN (this store cannot tell).
import { FenceOutcome, type SignedTicket } from "@latch/proto/egress";
import type { ReplayStore } from "./replay-store.ts";
import { DEFAULT_SKEW_MS, type TicketChecker } from "./verify.ts";

export type TicketFencer = (signed: SignedTicket | undefined) => Promise<FenceOutcome>;

export function createTicketFencer(deps: {
  checkTicket: TicketChecker;
  replayStore: ReplayStore;
  skewMs?: number;
  now?: () => number;
}): TicketFencer {
  const skew = deps.skewMs ?? DEFAULT_SKEW_MS;
  const now = deps.now ?? Date.now;
  return async (signed) => {
    // Signed by the control plane, for this deployment: nobody else may burn a ticket id.
    const ticket = await deps.checkTicket(signed, { isFence: true });
    // A store that started after the ticket was issued (a restarted process, its memory empty)
    // cannot know whether its predecessor ran it; nor can one that has already forgotten spends
    // that old (both stores keep an id until expiry + skew). Saying FENCED then could send a
    // request twice, so nothing is written and the approval stays spent.
    if (ticket.issuedAtMs - skew <= deps.replayStore.knowsSpendsSinceMs)
      return FenceOutcome.FENCE_OUTCOME_UNKNOWN;
    if (ticket.expiresAtMs + skew < now()) return FenceOutcome.FENCE_OUTCOME_UNKNOWN;
    return (await deps.replayStore.spend(ticket.id, ticket.expiresAtMs + skew))
      ? FenceOutcome.FENCE_OUTCOME_FENCED
      : FenceOutcome.FENCE_OUTCOME_TAKEN;
  };
}
