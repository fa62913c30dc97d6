// Fencing a ticket whose Execute ended without the proxy's answer (DECISIONS "Faults and isolation
// in deployments"). The control plane spends the ticket's id itself, in the store the proxies
// spend ids in before they dial; whichever insert came first wins. Fence won: no proxy ran the
// ticket and none ever will, so a one-call approval can be given back. Fence lost: a proxy took it
// and may have reached the origin. Where it cannot ask yet (the database or the only proxy does not
// answer) it keeps asking every second until the proxies would have forgotten the ticket.
import { FenceOutcome, type SignedTicket, Ticket } from "@latch/proto/egress";
import { TICKET_CLOCK_SKEW_MS } from "@latch/shared/tickets/ticket-signature";
import type { Logger } from "pino";
import type { EgressClient } from "./egress-client.ts";
import type { SpentTicketsRepo } from "./spent-tickets.repo.ts";

/** What a fence ends as: `unknown` when no store could tell in time (the approval stays spent). */
export type LateFence = "fenced" | "taken" | "unknown";
/**
 * `fenced`: never ran, never will. `taken`: a proxy spent it. `unknown`: no store can tell.
 * `pending`: nobody answered now; asked again every second, and `later` hears the end.
 */
export type FenceResult = LateFence | "pending";

export interface TicketFence {
  fence(ticket: SignedTicket, later: (outcome: LateFence) => void): Promise<FenceResult>;
  /**
   * Whether the proxies spend ids in this control plane's own table (so a fence can be written
   * there with no proxy answering); undefined while no proxy has said which store it uses.
   */
  isStoreShared(): Promise<boolean | undefined>;
  /** Tickets still waiting for an answer. */
  readonly pending: number;
}

export interface TicketFenceDeps {
  egress: Pick<EgressClient, "fence" | "getInfo" | "replicaStates">;
  /**
   * The control plane's own spent-ticket table, used when the proxies report the same store (the
   * `store:` row of its migration): the one fence that needs no proxy to answer.
   */
  spentTickets?: SpentTicketsRepo | undefined;
  logger?: Pick<Logger, "info" | "warn"> | undefined;
  now?: () => number;
}

const RETRY_MS = 1_000;
/**
 * How long past a ticket's expiry (plus skew) a fence in the shared table still concludes: the
 * proxies keep each spent id a minute past that (replay-store.ts sweeps with a minute of grace), and
 * no proxy spends a ticket after it. Under the minute, for clocks that differ between hosts.
 */
const SHARED_STORE_GRACE_MS = 45_000;
/** When a live control plane has given up on its own fence: abandoned-calls.ts may look after this. */
export const LIVE_FENCE_HORIZON_MS = TICKET_CLOCK_SKEW_MS + SHARED_STORE_GRACE_MS;
/** How long the proxies' store id is trusted before GetInfo is asked again. */
const STORE_INFO_TTL_MS = 60_000;

export function createTicketFence(deps: TicketFenceDeps): TicketFence {
  const now = deps.now ?? Date.now;
  const waiting = new Map<
    string,
    { ticket: SignedTicket; expiresAtMs: number; horizonMs: number; later: (outcome: LateFence) => void }
  >();
  let timer: NodeJS.Timeout | undefined;
  let ownStoreId: string | undefined;
  let proxyStore: { id: string; at: number } | undefined;

  /** Whether the proxies spend ids in this control plane's own table (asked, then cached). */
  async function isSharedWithProxies(): Promise<boolean> {
    if (!deps.spentTickets) return false;
    if (ownStoreId === undefined) ownStoreId = (await deps.spentTickets.findStoreId()) ?? "";
    if (!proxyStore || now() - proxyStore.at > STORE_INFO_TTL_MS) {
      try {
        const info = await deps.egress.getInfo();
        proxyStore = { id: info.replayStoreId, at: now() };
      } catch {
        // No proxy answers: what they said last still holds (a fleet does not move its store).
        if (!proxyStore) return false;
      }
    }
    return ownStoreId !== "" && proxyStore.id === ownStoreId;
  }

  let hasWarnedUnshared = false;
  const warnUnshared = () => {
    if (hasWarnedUnshared) return;
    hasWarnedUnshared = true;
    deps.logger?.warn(
      "several egress proxies keep spent tickets in their own memory: an unanswered call's approval stays spent; give them the shared table (EGRESS_REPLAY_DATABASE_URL)",
    );
  };

  /** Until when a fence of a ticket expiring at `expiresAtMs` may still conclude anything. */
  const horizonOf = (expiresAtMs: number) =>
    expiresAtMs + TICKET_CLOCK_SKEW_MS + (deps.spentTickets ? SHARED_STORE_GRACE_MS : 0);

  /** One attempt: an answer, or undefined when nobody could be asked now. */
  async function attempt(
    ticket: SignedTicket,
    id: string,
    expiresAtMs: number,
  ): Promise<LateFence | undefined> {
    // Past this, a proxy's store may have swept the id of a ticket it ran: a fence that "won" then
    // could send a request twice, so the approval stays spent.
    if (now() > horizonOf(expiresAtMs)) return "unknown";
    let isShared: boolean | undefined;
    try {
      isShared = await isSharedWithProxies();
      if (isShared) {
        const isWon = await deps.spentTickets!.insertFence(id, new Date(expiresAtMs + TICKET_CLOCK_SKEW_MS));
        return isWon ? "fenced" : "taken";
      }
    } catch {
      // The database did not answer: ask a proxy below, or later.
    }
    // Past the ticket's expiry (plus skew) a proxy answers UNKNOWN to a fence: its memory may have
    // forgotten the spend. Only the shared table can still tell, so wait for the database to answer
    // (until the horizon) when it is, or may be, the proxies' store.
    if (now() > expiresAtMs + TICKET_CLOCK_SKEW_MS) return isShared === false ? "unknown" : undefined;
    // Several proxies, each spending ids in its own memory: the one a fence reaches may never have
    // seen the ticket another ran, and would say FENCED. Only a shared store can tell.
    if (isShared === false && deps.egress.replicaStates().length > 1) {
      warnUnshared();
      return "unknown";
    }
    try {
      const outcome = await deps.egress.fence(ticket);
      if (outcome === FenceOutcome.FENCE_OUTCOME_FENCED) return "fenced";
      if (outcome === FenceOutcome.FENCE_OUTCOME_TAKEN) return "taken";
      return "unknown";
    } catch {
      return undefined;
    }
  }

  function schedule(): void {
    if (timer || waiting.size === 0) return;
    timer = setTimeout(async () => {
      timer = undefined;
      for (const [id, entry] of [...waiting]) {
        const outcome = await attempt(entry.ticket, id, entry.expiresAtMs);
        if (outcome === undefined && now() <= entry.horizonMs) continue;
        waiting.delete(id);
        deps.logger?.info(
          { ticket: id.slice(0, 8), outcome: outcome ?? "unknown" },
          "late ticket fence settled",
        );
        entry.later(outcome ?? "unknown");
      }
      schedule();
    }, RETRY_MS);
    timer.unref();
  }

  return {
    get pending() {
      return waiting.size;
    },
    async isStoreShared() {
      if (!deps.spentTickets) return false;
      const isShared = await isSharedWithProxies();
      return isShared || proxyStore !== undefined ? isShared : undefined;
    },
    async fence(signed, later) {
      const ticket = Ticket.decode(signed.payload);
      const outcome = await attempt(signed, ticket.id, ticket.expiresAtMs);
      if (outcome !== undefined) return outcome;
      deps.logger?.warn(
        { ticket: ticket.id.slice(0, 8) },
        "no proxy or database answers: the ticket fence is asked again every second",
      );
      waiting.set(ticket.id, {
        ticket: signed,
        expiresAtMs: ticket.expiresAtMs,
        horizonMs: horizonOf(ticket.expiresAtMs),
        later,
      });
      schedule();
      return "pending";
    },
  };
}
