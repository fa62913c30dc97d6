// Web Push to the operators' devices (DECISIONS "Approvals that reach the operator"): subscribe a
// browser, unsubscribe it, and push a new approval request to every subscribed member who may
// approve it. Each push goes out through the egress proxy (SendPush, a signed single-use ticket);
// a push service that answers 404 or 410 has dropped the subscription, so it is deleted here too.
// A push is a notice: it never carries a secret or the approval code, and a failed one is logged,
// never fatal to the request that caused it.
import { newId } from "@latch/shared/ids";
import type { Logger } from "pino";
import type { EgressClient } from "../egress/egress-client.ts";
import type { TicketMinter } from "../egress/tickets.ts";
import type { PushRepo, PushSubscriptionRow } from "./push.repo.ts";
import {
  type ApprovalPushPayload,
  checkPushEndpoint,
  checkSubscriptionKeys,
  pushSpecFor,
} from "./push-message.ts";
import type { VapidKeys } from "./vapid-keys.ts";

/** Devices one operator keeps subscribed; a new one beyond it replaces the oldest. */
export const MAX_SUBSCRIPTIONS_PER_OPERATOR = 20;

/**
 * Pushes of one organisation in flight in this process; the rest wait their turn. Each push holds
 * one of the organisation's places on an egress proxy replica (64, shared with its agents' calls:
 * egress-proxy calls/organisation-calls.ts) for up to its timeout, and is encrypted and signed
 * synchronously before it leaves. All at once, a request reaching many devices while the push
 * service hangs would take every place, its agents' calls and the later pushes refused as
 * `egress_unavailable`, and encrypt every message in one turn of the event loop.
 */
export const MAX_PUSHES_IN_FLIGHT = 8;

export interface PushServiceDeps {
  repo: PushRepo;
  keys: VapidKeys;
  /** RFC 8292 `sub`: how the push service reaches whoever runs this server (https: or mailto:). */
  subject: string;
  allowedHosts: readonly string[];
  egress: Pick<EgressClient, "sendPush">;
  minter: Pick<TicketMinter, "mintPushTicket">;
  /** The operators of the organisation who may approve its requests (owner, admin, approver). */
  findApprovers(organisationId: string): Promise<string[]>;
  logger: Pick<Logger, "info" | "warn">;
  now: () => Date;
}

export interface PushSubscriptionView {
  id: string;
  /** The push service's host, for a person to tell devices apart. */
  service: string;
  created_at: string;
}

/** What one push came to, for the log and the tests. */
export type PushOutcome = "sent" | "gone" | "refused" | "failed";

export function createPushService(deps: PushServiceDeps) {
  /** Per organisation: its pushes running, and the turns of those waiting, first come first. */
  const lanes = new Map<string, { running: number; waiting: (() => void)[] }>();

  /** Runs `push` once fewer than MAX_PUSHES_IN_FLIGHT of the organisation's are running. */
  async function inTurn<T>(organisationId: string, push: () => Promise<T>): Promise<T> {
    let lane = lanes.get(organisationId);
    if (!lane) {
      lane = { running: 0, waiting: [] };
      lanes.set(organisationId, lane);
    }
    const own = lane;
    if (own.running < MAX_PUSHES_IN_FLIGHT) own.running++;
    else await new Promise<void>((resolve) => own.waiting.push(resolve));
    try {
      return await push();
    } finally {
      // The place goes to the next waiting, else back; an empty lane is forgotten.
      const next = own.waiting.shift();
      if (next) next();
      else if (--own.running === 0) lanes.delete(organisationId);
    }
  }

  const view = (row: PushSubscriptionRow): PushSubscriptionView => ({
    id: row.id,
    service: new URL(row.endpoint).hostname,
    created_at: row.created_at.toISOString(),
  });

  async function pushTo(
    organisationId: string,
    row: PushSubscriptionRow,
    payload: ApprovalPushPayload,
  ): Promise<PushOutcome> {
    let target: ReturnType<typeof checkPushEndpoint>;
    try {
      // Checked again at send: PUSH_SERVICE_HOSTS may have narrowed since it subscribed.
      target = checkPushEndpoint(row.endpoint, deps.allowedHosts);
    } catch {
      await deps.repo.deleteSubscription(row.id);
      return "gone";
    }
    const spec = pushSpecFor(row, target, payload, { ...deps.keys, subject: deps.subject });
    const answer = await deps.egress.sendPush(
      deps.minter.mintPushTicket(spec, { organisationId }),
      spec.timeoutMs,
    );
    const status = answer.originStatus;
    // RFC 8030 8.3: 404 and 410 say the subscription expired or was withdrawn.
    if (status === 404 || status === 410) {
      await deps.repo.deleteSubscription(row.id);
      deps.logger.info(
        { subscription: row.id, host: target.host, status },
        "push subscription gone; deleted",
      );
      return "gone";
    }
    if (status >= 200 && status < 300) {
      await deps.repo.updatePushed(row.id, deps.now());
      return "sent";
    }
    deps.logger.warn(
      { subscription: row.id, host: target.host, status, code: answer.error?.code },
      "push not accepted",
    );
    return answer.error && !answer.reachedOrigin ? "refused" : "failed";
  }

  return {
    vapidPublicKey: () => deps.keys.publicKey,

    /** Subscribes a browser for `operatorId` in session `sessionId`; the endpoint and keys are checked first. */
    async subscribe(
      operatorId: string,
      input: { endpoint: string; keys: { p256dh: string; auth: string } },
      /** The session it is made in: the device is pushed to only while that session lives. */
      sessionId: string | null = null,
    ): Promise<PushSubscriptionView> {
      checkPushEndpoint(input.endpoint, deps.allowedHosts);
      checkSubscriptionKeys(input.keys);
      const row = await deps.repo.upsertSubscription({
        id: newId("psh"),
        operator_id: operatorId,
        endpoint: input.endpoint,
        p256dh: input.keys.p256dh,
        auth: input.keys.auth,
        created_at: deps.now(),
        last_pushed_at: null,
        session_id: sessionId,
      });
      await deps.repo.deleteOldestBeyond(operatorId, MAX_SUBSCRIPTIONS_PER_OPERATOR);
      return view(row);
    },

    /** Unsubscribes one of the operator's own devices; another's (or none) is false (404). */
    unsubscribe: (operatorId: string, id: string): Promise<boolean> =>
      deps.repo.deleteOwnSubscription(operatorId, id),

    /**
     * Pushes a new approval request to every device of every member who may approve it, each in
     * its organisation's turn (MAX_PUSHES_IN_FLIGHT). Never throws: the request stands whatever
     * happens to its notices.
     */
    async pushApprovalRequest(organisationId: string, payload: ApprovalPushPayload): Promise<PushOutcome[]> {
      try {
        const approvers = await deps.findApprovers(organisationId);
        const rows = await deps.repo.findSubscriptionsOf(approvers, organisationId);
        const settled = await Promise.allSettled(
          rows.map((row) => inTurn(organisationId, () => pushTo(organisationId, row, payload))),
        );
        return settled.map((result) => {
          if (result.status === "fulfilled") return result.value;
          deps.logger.warn({ err: result.reason }, "push failed");
          return "failed";
        });
      } catch (error) {
        deps.logger.warn({ err: error }, "push failed");
        return [];
      }
    },
  };
}

export type PushService = ReturnType<typeof createPushService>;
