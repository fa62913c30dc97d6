// The live inbox's loop when the database fails mid-way: a tick that cannot read the ledger moves
// no cursor, so the next tick delivers what the failed one would have, once; and a page cut at
// INBOX_PAGE rows is read on from its last row, never skipping to the head.
import { describe, expect, it } from "vitest";
import type { AuditedCall } from "../audit/audit.repo.ts";
import type { InboxEvent } from "./inbox-events.ts";
import { createInboxHub, INBOX_PAGE, type InboxSubscriber } from "./inbox-hub.ts";

const requested = (seq: number): AuditedCall => ({
  seq,
  at: new Date("2026-11-26T05:00:00.000Z"),
  environment: "production",
  actor: "agent:cli_abc",
  actor_name: "agent",
  action: "grant_requested",
  item_name: "API_KEY",
  host: "api.example.com",
  detail: { grant_id: `grt_${seq}` },
});

function ledger(rows: AuditedCall[]) {
  const state = { failNext: 0, reads: 0 };
  const audit = {
    async findHeadSeqs(ids: readonly string[]) {
      if (state.failNext > 0) {
        state.failNext--;
        throw new Error("connection terminated unexpectedly");
      }
      return new Map(ids.map((id) => [id, rows.at(-1)?.seq ?? 0]));
    },
    async findRowsAfter(_org: string, filter: { afterSeq: number; limit: number }) {
      state.reads++;
      return rows.filter((r) => r.seq > filter.afterSeq).slice(0, filter.limit);
    },
  };
  return { audit, state };
}

function subscriber(cursor: number) {
  const received: InboxEvent[] = [];
  const s: InboxSubscriber = { cursor, send: (events) => received.push(...events) };
  return { s, received };
}

describe("the inbox hub", () => {
  it("a tick whose read fails moves no cursor; the next delivers every event once", async () => {
    const rows = [requested(1), requested(2), requested(3)];
    const { audit, state } = ledger(rows);
    const warnings: unknown[] = [];
    const hub = createInboxHub({
      audit,
      pollMs: 60_000,
      logger: { warn: (f: unknown) => void warnings.push(f) },
    });
    const { s, received } = subscriber(1);
    const stop = hub.subscribe("org_1", s);
    state.failNext = 1;
    await hub.tick();
    expect(received).toEqual([]);
    expect(s.cursor).toBe(1);
    expect(warnings).toHaveLength(1);
    await hub.tick();
    await hub.tick();
    expect(received.map((e) => e.id)).toEqual([2, 3]);
    expect(s.cursor).toBe(3);
    stop();
    hub.close();
  });

  it("a stream far behind catches up page by page, in order, missing nothing", async () => {
    const rows = Array.from({ length: INBOX_PAGE * 2 + 5 }, (_, i) => requested(i + 1));
    const { audit } = ledger(rows);
    const hub = createInboxHub({ audit, pollMs: 60_000, logger: { warn: () => {} } });
    const { s, received } = subscriber(0);
    hub.subscribe("org_1", s);
    for (let i = 0; i < 4; i++) await hub.tick();
    expect(received.map((e) => e.id)).toEqual(rows.map((r) => r.seq));
    hub.close();
  });

  it("two streams at different cursors each get only what they have not seen", async () => {
    const rows = [requested(1), requested(2), requested(3), requested(4)];
    const { audit } = ledger(rows);
    const hub = createInboxHub({ audit, pollMs: 60_000, logger: { warn: () => {} } });
    const early = subscriber(1);
    const late = subscriber(3);
    hub.subscribe("org_1", early.s);
    hub.subscribe("org_1", late.s);
    await hub.tick();
    expect(early.received.map((e) => e.id)).toEqual([2, 3, 4]);
    expect(late.received.map((e) => e.id)).toEqual([4]);
    hub.close();
  });
});
