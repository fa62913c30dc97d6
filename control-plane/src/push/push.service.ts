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
     * Pushes a new approval request to every device of every member who may approve it. Never
     * throws: the request stands whatever happens to its notices.
     */
    async pushApprovalRequest(organisationId: string, payload: ApprovalPushPayload): Promise<PushOutcome[]> {
      try {
        const approvers = await deps.findApprovers(organisationId);
        const rows = await deps.repo.findSubscriptionsOf(approvers, organisationId);
        const settled = await Promise.allSettled(rows.map((row) => pushTo(organisationId, row, payload)));
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
