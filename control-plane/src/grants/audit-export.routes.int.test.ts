// GET /api/audit/export of a view bigger than one export: the file holds the newest
// MAX_EXPORT_EVENTS events and the answer says that older ones were left out (X-Latch-Truncated,
// X-Latch-Oldest-At), so a person keeping the file does not take it for the whole audit.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Browser, type HostedHarness, readyOperator, startHosted } from "../../test/hosted.ts";
import { createAuditRepo } from "../audit/audit.repo.ts";
import { MAX_EXPORT_EVENTS } from "./audit-export.routes.ts";

let h: HostedHarness;
let op: Browser;
let organisationId: string;

beforeAll(async () => {
  h = await startHosted();
  op = await readyOperator(h, "export-cap");
  organisationId = (await op.request("GET", "/api/auth/me")).json().organisation.id;
});

afterAll(async () => {
  await h.close();
});

/** Events `from` to `to` (detail n) of `action`, through the ledger's append, 25 at a time. */
async function appendEvents(action: string, from: number, to: number): Promise<void> {
  const audit = createAuditRepo(h.plane.database.db);
  for (let first = from; first <= to; first += 25) {
    const batch = Array.from({ length: Math.min(25, to - first + 1) }, (_, i) => first + i);
    await Promise.all(
      batch.map((n) => audit.insertAuditEvent({ organisationId, actor: "system", action, detail: { n } })),
    );
  }
}

describe("GET /api/audit/export of more events than one export holds", () => {
  it("exports the newest and says the rest were left out, with the oldest time it holds", {
    timeout: 120_000,
  }, async () => {
    await appendEvents("export_cap_event", 0, 0);
    // The ledger stamps the database's time: the event left out is older than those kept.
    await new Promise((resolve) => setTimeout(resolve, 20));
    await appendEvents("export_cap_event", 1, MAX_EXPORT_EVENTS);
    const cut = await op.request("GET", "/api/audit/export?format=jsonl&action=export_cap_event");
    expect(cut.statusCode).toBe(200);
    const rows = cut.body
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(rows).toHaveLength(MAX_EXPORT_EVENTS);
    expect(cut.headers["x-latch-events"]).toBe(String(MAX_EXPORT_EVENTS));
    expect(cut.headers["x-latch-truncated"]).toBe("true");
    expect(rows.map((row) => row.detail.n)).not.toContain(0);
    expect(cut.headers["x-latch-oldest-at"]).toBe(rows.at(-1).at);

    // Narrowed to the events before the oldest it held: the one left out, and nothing cut.
    const older = await op.request(
      "GET",
      `/api/audit/export?format=jsonl&action=export_cap_event&until=${encodeURIComponent(String(cut.headers["x-latch-oldest-at"]))}`,
    );
    expect(older.headers["x-latch-truncated"]).toBe("false");
    expect(older.headers["x-latch-oldest-at"]).toBeUndefined();
    expect(older.headers["x-latch-events"]).toBe("1");
    expect(JSON.parse(older.body.trim()).detail).toEqual({ n: 0 });
  });
});
