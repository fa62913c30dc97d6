import { describe, expect, it } from "vitest";
import type { AuditEvent, AuditRepo } from "../audit/audit.repo.ts";
import { batchAuditInserts } from "./audit-batches.ts";

// A repo whose writes the test completes by hand, recording each statement and what it committed.
function heldRepo(refuse: (event: AuditEvent) => boolean = () => false) {
  const statements: string[][] = [];
  const committed: string[] = [];
  const pending: (() => void)[] = [];
  const write = (events: readonly AuditEvent[]) => {
    statements.push(events.map((e) => e.action));
    return new Promise<void>((resolve, reject) => {
      pending.push(() => {
        if (events.some(refuse)) return reject(new Error("refused"));
        committed.push(...events.map((e) => e.action));
        resolve();
      });
    });
  };
  const repo = {
    insertAuditEvent: (event: AuditEvent) => write([event]),
    insertAuditEvents: (events: readonly AuditEvent[]) => write(events),
  } as unknown as AuditRepo;
  /** Completes the oldest write still open, then lets the batcher start its next one. */
  const completeNext = async () => {
    pending.shift()?.();
    for (let i = 0; i < 5; i++) await Promise.resolve();
  };
  return { repo, statements, committed, completeNext };
}

const event = (action: string): AuditEvent => ({ organisationId: "org_1", actor: "agent:a", action });

describe("audit group commit (local vault)", () => {
  it("writes a lone row at once, and each caller hears back only once its row is committed", async () => {
    const held = heldRepo();
    const audit = batchAuditInserts(held.repo);
    let isDone = false;
    const first = audit.insertAuditEvent(event("first")).then(() => {
      isDone = true;
    });
    expect(held.statements).toEqual([["first"]]);
    await Promise.resolve();
    expect(isDone).toBe(false);
    await held.completeNext();
    await first;
    expect(held.committed).toEqual(["first"]);
  });

  it("writes the rows that arrived during a write together, in order, in the next statement", async () => {
    const held = heldRepo();
    const audit = batchAuditInserts(held.repo);
    const all = [audit.insertAuditEvent(event("a"))];
    all.push(audit.insertAuditEvent(event("b")), audit.insertAuditEvent(event("c")));
    expect(held.statements).toEqual([["a"]]);
    await held.completeNext();
    expect(held.statements).toEqual([["a"], ["b", "c"]]);
    await held.completeNext();
    await Promise.all(all);
    expect(held.committed).toEqual(["a", "b", "c"]);
  });

  it("writes each row of a refused statement alone, so one bad row loses only itself", async () => {
    const held = heldRepo((e) => e.action === "bad");
    const audit = batchAuditInserts(held.repo);
    const first = audit.insertAuditEvent(event("a"));
    const good = audit.insertAuditEvent(event("b"));
    const bad = audit.insertAuditEvent(event("bad"));
    const outcomes = Promise.allSettled([first, good, bad]);
    // a; then b and bad together (refused); then b alone, then bad alone (refused).
    for (let i = 0; i < 4; i++) await held.completeNext();
    const [a, b, c] = await outcomes;
    expect([a.status, b.status, c.status]).toEqual(["fulfilled", "fulfilled", "rejected"]);
    expect(held.statements).toEqual([["a"], ["b", "bad"], ["b"], ["bad"]]);
    expect(held.committed).toEqual(["a", "b"]);
  });
});
