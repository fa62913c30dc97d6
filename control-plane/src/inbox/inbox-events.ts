// The live inbox's events (DECISIONS "Approvals that reach the operator"), read from the audit
// ledger: a request or decision is an audit row, and the row's seq (per organisation, no gaps,
// committed in order) is the event's id, so `Last-Event-ID` resumes on any replica without a table
// of its own. An event carries names, hosts, methods and paths, as the inbox shows them; never a
// value and never an approval code (neither is ever in an audit row).
import { showHidden } from "@latch/shared/text/show-hidden";
import type { AuditedCall } from "../audit/audit.repo.ts";

/** The audit actions the inbox follows, and the event each one is. */
export const INBOX_EVENT_OF = {
  grant_requested: "approval_requested",
  grant_approved: "approval_decided",
  // The two-person rule's first of two approvals: still pending, now "1 of 2" (DECISIONS "Teams").
  grant_first_approved: "approval_decided",
  grant_denied: "approval_decided",
  need_requested: "need_created",
  need_fulfilled: "need_closed",
  need_denied: "need_closed",
  need_closed: "need_closed",
} as const;

export const INBOX_ACTIONS = Object.keys(INBOX_EVENT_OF) as (keyof typeof INBOX_EVENT_OF)[];

export type InboxEventType = (typeof INBOX_EVENT_OF)[keyof typeof INBOX_EVENT_OF];

export interface InboxEvent {
  /** The row's seq in its organisation's ledger: the SSE id a reconnect sends back. */
  id: number;
  type: InboxEventType;
  data: Record<string, unknown>;
}

const text = (value: unknown): string | null => (typeof value === "string" ? value : null);

/** What approval_decided says was decided; a first of two leaves the request pending. */
const DECISION_OF: Readonly<Record<string, string>> = {
  grant_approved: "approved",
  grant_first_approved: "first_of_two",
  grant_denied: "denied",
};

/**
 * The agent a row names: its client id and, hosted, its name as issued or registered. The name is
 * the agent's own words (a client registers it over OAuth) and the console shows it in a browser
 * notification, so it reads as wherever an approval is shown (grants/grant-view.ts
 * shownToOperator, the push): invisible characters, a direction override among them, as U+FFFD.
 */
function agentOf(row: AuditedCall): { id: string | null; name: string | null } {
  const id = text(row.detail.agent_id) ?? /^agent:(.+)$/.exec(row.actor)?.[1] ?? null;
  const name = row.actor.startsWith("agent:") ? row.actor_name : null;
  return { id, name: name === null ? null : showHidden(name).text };
}

/**
 * The event an audit row is, or undefined for a row the inbox does not follow.
 * @example toInboxEvent(row)?.type // "approval_requested"
 */
export function toInboxEvent(row: AuditedCall): InboxEvent | undefined {
  const type = INBOX_EVENT_OF[row.action as keyof typeof INBOX_EVENT_OF];
  if (!type) return undefined;
  const common = { seq: row.seq, at: row.at.toISOString(), environment: row.environment };
  const { detail } = row;
  switch (type) {
    case "approval_requested":
      return {
        id: row.seq,
        type,
        data: {
          ...common,
          grant_id: text(detail.grant_id),
          agent: agentOf(row),
          item_name: row.item_name,
          host: row.host,
          method: text(detail.method),
          path: text(detail.path),
          rule_id: text(detail.rule_id),
        },
      };
    case "approval_decided":
      return {
        id: row.seq,
        type,
        data: {
          ...common,
          grant_id: text(detail.grant_id),
          decision: DECISION_OF[row.action] ?? "approved",
          ...(typeof detail.approvals === "string" ? { approvals: detail.approvals } : {}),
          policy: text(detail.policy),
          item_name: row.item_name,
          by: row.actor,
        },
      };
    case "need_created":
      return {
        id: row.seq,
        type,
        data: {
          ...common,
          need_id: text(detail.need_id),
          kind: text(detail.kind),
          agent: agentOf(row),
          suggested_name: row.item_name,
          host: row.host,
        },
      };
    case "need_closed":
      return {
        id: row.seq,
        type,
        data: {
          ...common,
          need_id: text(detail.need_id),
          status: row.action.replace(/^need_/, ""),
          by: row.actor,
        },
      };
  }
}

/**
 * One event as the SSE wire carries it (WHATWG HTML 9.2): `id`, `event`, one `data` line of JSON
 * (JSON.stringify never writes a raw newline, so a value cannot end the field or forge another).
 */
export function formatServerSentEvent(event: { id: number; type: string; data: unknown }): string {
  return `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event.data)}\n\n`;
}
