// One process's followers of the live inbox: every open stream is a subscriber with its own cursor
// (a ledger seq); one loop, running only while a stream is open, reads the heads of the watched
// organisations every `pollMs` and, for each head that moved, the inbox rows after the lowest
// cursor, once, for all that organisation's streams. The ledger is shared, so a request written by
// any replica reaches a stream held by any other, within a poll (DECISIONS: within 1 s). A
// database that fails is retried on the next tick; cursors do not move, so nothing is skipped.
import type { Logger } from "pino";
import type { AuditRepo } from "../audit/audit.repo.ts";
import { INBOX_ACTIONS, type InboxEvent, toInboxEvent } from "./inbox-events.ts";

/** Rows one tick reads for one organisation; a stream further behind catches up over ticks. */
export const INBOX_PAGE = 500;

export interface InboxSubscriber {
  /** The last seq this stream has seen (or replayed past). */
  cursor: number;
  send(events: readonly InboxEvent[]): void;
}

export interface InboxHubDeps {
  audit: Pick<AuditRepo, "findHeadSeqs" | "findRowsAfter">;
  pollMs: number;
  logger: Pick<Logger, "warn">;
}

export function createInboxHub(deps: InboxHubDeps) {
  const watched = new Map<string, Set<InboxSubscriber>>();
  let timer: NodeJS.Timeout | undefined;
  let isTicking = false;

  async function followOrganisation(organisationId: string, head: number, subscribers: Set<InboxSubscriber>) {
    let lowest = Number.POSITIVE_INFINITY;
    for (const subscriber of subscribers) lowest = Math.min(lowest, subscriber.cursor);
    if (head <= lowest) return;
    const rows = await deps.audit.findRowsAfter(organisationId, {
      actions: INBOX_ACTIONS,
      afterSeq: lowest,
      limit: INBOX_PAGE,
    });
    const events = rows.map(toInboxEvent).filter((event): event is InboxEvent => event !== undefined);
    // Every row up to `head` was committed before the head moved there, so a full read reaches
    // it; a cut page reaches only its last row, and the next tick reads on from there.
    const reached = rows.length === INBOX_PAGE ? rows.at(-1)!.seq : Math.max(head, rows.at(-1)?.seq ?? 0);
    for (const subscriber of subscribers) {
      const fresh = events.filter((event) => event.id > subscriber.cursor);
      subscriber.cursor = Math.max(subscriber.cursor, reached);
      if (fresh.length > 0) subscriber.send(fresh);
    }
  }

  async function tick() {
    if (isTicking || watched.size === 0) return;
    isTicking = true;
    try {
      const heads = await deps.audit.findHeadSeqs([...watched.keys()]);
      for (const [organisationId, subscribers] of watched) {
        await followOrganisation(organisationId, heads.get(organisationId) ?? 0, subscribers);
      }
    } catch (error) {
      deps.logger.warn({ err: error }, "live inbox: reading the ledger failed; retrying");
    } finally {
      isTicking = false;
    }
  }

  return {
    /** Follows `organisationId` for `subscriber` until the answered function is called. */
    subscribe(organisationId: string, subscriber: InboxSubscriber): () => void {
      const subscribers = watched.get(organisationId) ?? new Set();
      subscribers.add(subscriber);
      watched.set(organisationId, subscribers);
      timer ??= setInterval(() => void tick(), deps.pollMs);
      return () => {
        subscribers.delete(subscriber);
        if (subscribers.size === 0) watched.delete(organisationId);
        if (watched.size === 0 && timer) {
          clearInterval(timer);
          timer = undefined;
        }
      };
    },
    /** Streams open in this process. */
    get size(): number {
      let count = 0;
      for (const subscribers of watched.values()) count += subscribers.size;
      return count;
    },
    /** One tick now (tests; the loop runs on its own otherwise). */
    tick,
    close() {
      if (timer) clearInterval(timer);
      timer = undefined;
      watched.clear();
    },
  };
}

export type InboxHub = ReturnType<typeof createInboxHub>;
