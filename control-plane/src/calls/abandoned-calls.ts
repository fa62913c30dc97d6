// The calls of one-call approvals whose control plane died mid-way (DECISIONS "No approval is lost
// to a fault"): killed after the approval was spent and the ticket handed to a proxy, before the
// outcome was written. The grant still names its ticket (migration 2026-11-27T0100). Once any live
// control plane would have given up on its own fence, this fences the ticket in the proxies' shared
// table, inside the transaction that writes the outcome: fence won, no proxy ran it (and none can:
// it has expired), so the approval is given back and the ledger says call_not_sent; fence lost, a
// proxy took it, so it stays spent and the ledger says call_outcome_unknown. Where no shared table
// can tell (a proxy's own memory, or the table has forgotten by now), the outcome is unknown.
import { TICKET_CLOCK_SKEW_MS } from "@latch/shared/tickets/ticket-signature";
import type { Logger } from "pino";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { LIVE_FENCE_HORIZON_MS, type TicketFence } from "../egress/ticket-fence.ts";
import type { GrantsRepo, UnsettledCall } from "../grants/grants.repo.ts";
import { startRounds } from "../rounds.ts";

/** How often a replica looks; each row is taken by one replica (SKIP LOCKED). */
const ROUND_EVERY_MS = 15_000;
/** After the live fence's horizon, a margin for clocks that differ between hosts. */
const LOOK_AFTER_MS = LIVE_FENCE_HORIZON_MS + 10_000;
/**
 * How long past its ticket's expiry a held one-call approval's call is sure to be decided: the
 * live fence has ended by LOOK_AFTER_MS, and a round of this sweep runs within ROUND_EVERY_MS of
 * it. Its mark (grants.held_until) lasts until then at most; a decision ends it sooner.
 */
export const HELD_DECIDED_MS = LOOK_AFTER_MS + ROUND_EVERY_MS;
const ROWS_PER_ROUND = 50;

export interface AbandonedCallsTransaction {
  repo: Pick<
    GrantsRepo,
    "findUnsettledCalls" | "updateGrantRestored" | "updateGrantCallSettled" | "updateGrantHoldEnded"
  >;
  recordEvent(event: AuditEvent): Promise<void>;
  /** Spends `id` in the spent-ticket table on this transaction's connection; true when it was free. */
  insertFence(id: string, expiresAt: Date): Promise<boolean>;
}

export interface AbandonedCallsDeps {
  inTransaction<T>(fn: (tx: AbandonedCallsTransaction) => Promise<T>): Promise<T>;
  fence: Pick<TicketFence, "isStoreShared">;
  now: () => Date;
}

/**
 * `not_sent`: the fence won, no proxy ran it (the approval is given back unless it was revoked
 * since); `taken`: a proxy spent it; `unknown`: no table could tell.
 */
export type AbandonedOutcome = "not_sent" | "taken" | "unknown";

export function createAbandonedCalls(deps: AbandonedCallsDeps) {
  /** What became of one call: its fence decides, and its row says so. */
  async function settle(
    tx: AbandonedCallsTransaction,
    call: UnsettledCall,
    isStoreShared: boolean,
  ): Promise<AbandonedOutcome> {
    // The table can tell only if the proxies spent ids in it when the ticket left and still do,
    // and only while it remembers every spend of this ticket (by the database's clock).
    const canTell = call.call_ticket_shared === true && isStoreShared && call.is_remembered;
    const isFenced =
      canTell &&
      (await tx.insertFence(
        call.call_ticket_id,
        new Date(call.call_ticket_expires_at.getTime() + TICKET_CLOCK_SKEW_MS),
      ));
    const outcome: AbandonedOutcome = !canTell ? "unknown" : isFenced ? "not_sent" : "taken";
    // A grant revoked since is never given back; its call still gets its row.
    const isRevoked = call.status !== "consumed";
    if (outcome === "not_sent" && !isRevoked) await tx.repo.updateGrantRestored(call.id, call.call_ticket_id);
    else await tx.repo.updateGrantCallSettled(call.id, call.call_ticket_id);
    // Decided: a held approval's mark goes with it (a no-op where the call was never held).
    await tx.repo.updateGrantHoldEnded(call.id);
    await tx.recordEvent({
      organisationId: call.organisation_id,
      environment: call.environment,
      actor: `agent:${call.agent_id}`,
      action: outcome === "not_sent" ? "call_not_sent" : "call_outcome_unknown",
      itemName: call.item_name,
      host: call.call_host ?? undefined,
      // Its control plane stopped before writing the outcome, or the ledger refused that row.
      reason: "outcome_unwritten",
      detail: {
        grant_id: call.id,
        ...(call.call_method ? { method: call.call_method } : {}),
        ...(call.call_path ? { path: call.call_path.split("?")[0] } : {}),
        fence: outcome === "not_sent" ? "recovered" : outcome === "taken" ? "lost" : "unknown",
        ...(isRevoked ? { approval: "revoked" } : {}),
      },
    });
    return outcome;
  }

  return {
    /** One round: the calls abandoned long enough ago, each settled in its own transaction. */
    async sweep(): Promise<AbandonedOutcome[]> {
      const outcomes: AbandonedOutcome[] = [];
      // Asked before any transaction opens (it may read the database on its own connection).
      const isStoreShared = await deps.fence.isStoreShared();
      for (;;) {
        const before = new Date(deps.now().getTime() - LOOK_AFTER_MS);
        const settled = await deps.inTransaction(async (tx) => {
          const [call] = await tx.repo.findUnsettledCalls(before, 1);
          if (!call) return undefined;
          // No proxy has said yet which store it uses (none answers since the restart): a call
          // the shared table could still tell about waits for the next round.
          if (isStoreShared === undefined) throw new Error("the egress proxies' store is not known yet");
          return settle(tx, call, isStoreShared);
        });
        if (settled === undefined) return outcomes;
        outcomes.push(settled);
        if (outcomes.length >= ROWS_PER_ROUND) return outcomes;
      }
    },
  };
}

export type AbandonedCalls = ReturnType<typeof createAbandonedCalls>;

/** Runs a round every 15 s; answers the function that stops it. */
export function startAbandonedCallsSchedule(
  calls: Pick<AbandonedCalls, "sweep">,
  logger: Pick<Logger, "error" | "info">,
  intervalMs = ROUND_EVERY_MS,
): () => void {
  return startRounds({
    everyMs: intervalMs,
    logger,
    failure: "calls of a stopped control plane not settled yet; trying again",
    round: async () => {
      const outcomes = await calls.sweep();
      if (outcomes.length > 0) logger.info({ outcomes }, "calls of a stopped control plane settled");
    },
  });
}
