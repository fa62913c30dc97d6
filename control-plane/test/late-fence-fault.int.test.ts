// A call the proxy took whose link died while the database did not answer either (a control plane
// cut off from both for a few seconds): its fence waits, and the row of the unanswered call is
// refused. When the fence ends later as taken (or unknown), the call may have reached the API, so
// its ledger row is written then; a one-call approval's ticket is let go only once a row of the call
// is in the ledger, else it stays named for abandoned-calls.ts, which writes it. Never a call that
// may have gone out with no row at all. On PGlite and PostgreSQL, a real proxy and origin.
import { AppError } from "@latch/shared/errors";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuditEvent } from "../src/audit/audit.repo.ts";
import { createAuditRepo } from "../src/audit/audit.repo.ts";
import { createAbandonedCalls } from "../src/calls/abandoned-calls.ts";
import { createCallContextRepo } from "../src/calls/call-context.repo.ts";
import { createCallsService } from "../src/calls/calls.service.ts";
import type { OpenDatabase } from "../src/db/database.ts";
import { runInTransaction } from "../src/db/transaction.ts";
import type { EgressClient } from "../src/egress/egress-client.ts";
import { createSpentTicketsRepo } from "../src/egress/spent-tickets.repo.ts";
import type { LateFence, TicketFence } from "../src/egress/ticket-fence.ts";
import { createGrantsRepo, type GrantsRepo } from "../src/grants/grants.repo.ts";
import { runHttpRequest } from "../src/tools/http-request.tool.ts";
import { LOCAL_SURFACE } from "../src/tools/tool-context.ts";
import { callPathOrganisation, grantCallState, NO_POLICIES } from "./call-path.ts";
import { testDatabase } from "./database.ts";
import { type EgressHarness, startEgressHarness } from "./egress-harness.ts";

const SECRET = "sk_live_latefence_canary_3c9e";
const PATH = "/v1/charges?attempt=1";
let harness: EgressHarness;
let database: OpenDatabase;

beforeAll(async () => {
  harness = await startEgressHarness();
  harness.setHandler((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"charged":true}');
  });
  database = await testDatabase();
}, 60_000);
afterAll(async () => {
  await harness.close();
});

const charges = () => harness.origin.requests.filter((r) => r.url === PATH).length;
const tick = () => new Promise((resolve) => setTimeout(resolve, 20));

/**
 * One organisation's services with a call approved under `policy`. `link.cut`: the proxy runs the
 * call (the origin gets it) but its answer never comes back, and the fence cannot be decided yet
 * ("pending"); `lates` hears each fence's end. `ledger.down`: every audit row is refused.
 */
async function services(policy: "prompt" | "item_standing") {
  const { organisationId, audit, items, grants } = await callPathOrganisation(database, harness, SECRET);
  const link = { cut: false, down: false };
  const ledger = { down: false };
  /** The database refuses to give a one-call approval back. */
  const giveBack = { fails: false };
  const lates: ((outcome: LateFence) => void)[] = [];
  const fence: TicketFence = {
    pending: 0,
    // The harness's proxy keeps spent tickets in its own memory.
    isStoreShared: async () => false,
    fence: async (_ticket, later) => {
      lates.push(later);
      return "pending";
    },
  };
  const egress = {
    execute: async (...args: Parameters<EgressClient["execute"]>) => {
      if (link.down) throw new AppError("egress_unavailable", "the egress proxy is not reachable");
      const answer = await harness.client.execute(...args);
      if (link.cut) throw new AppError("egress_unavailable", "the egress proxy is not reachable");
      return answer;
    },
  } as unknown as EgressClient;
  const calls = createCallsService({
    findItemByName: items.findCallableByName,
    findItemsByHost: items.findCallableByHost,
    recordEvent: async (event: AuditEvent) => {
      if (ledger.down) throw Object.assign(new Error("connection terminated"), { code: "57P01" });
      await audit.insertAuditEvent(event);
    },
    minter: harness.minter,
    egress,
    fence,
    callContext: createCallContextRepo(database.db),
    heldCalls: createGrantsRepo(database.db),
  });
  const refusingGrants: typeof grants = {
    ...grants,
    authoriseCall: async (...args) => {
      const authorisation = await grants.authoriseCall(...args);
      return (
        authorisation && {
          ...authorisation,
          release: async () => {
            if (giveBack.fails) throw Object.assign(new Error("connection terminated"), { code: "57P01" });
            await authorisation.release();
          },
        }
      );
    },
  };
  const deps = { items, grants: refusingGrants, calls, policies: NO_POLICIES, surface: LOCAL_SURFACE };
  const scope = { organisationId, environment: "production", agentId: "billing_agent" };
  const args = { method: "POST" as const, path: PATH, item_name: "API_KEY", body: { amount: 100 } };
  const call = async () => (await runHttpRequest(deps, scope, args)).payload as Record<string, unknown>;
  const first = await call();
  expect(first.status).toBe("pending");
  const grantId = first.grant_id as string;
  await grants.approveGrant(organisationId, "operator", grantId, policy);
  const row = () => grantCallState(database, grantId);
  /** The ledger's rows of this organisation's calls (not the approval's own rows). */
  const callRows = async () =>
    (
      await database.db
        .selectFrom("audit_events")
        .select(["action", "reason", "detail", "item_name"])
        .where("organisation_id", "=", organisationId)
        .where("action", "in", ["http_request", "call_not_sent", "call_outcome_unknown"])
        .orderBy("seq")
        .execute()
    ).map((r) => ({ ...r, detail: typeof r.detail === "string" ? JSON.parse(r.detail) : r.detail }));
  return { organisationId, call, grantId, link, ledger, giveBack, lates, row, callRows };
}

/** A sweep of `organisationId`'s unsettled calls only (other files' calls are theirs). */
function ownCalls(repo: GrantsRepo, organisationId: string): GrantsRepo {
  return {
    ...repo,
    findUnsettledCalls: async (before, limit) =>
      (await repo.findUnsettledCalls(before, 1_000))
        .filter((call) => call.organisation_id === organisationId)
        .slice(0, limit),
  };
}

describe("a call the proxy took, unanswered while the ledger was refused too", () => {
  it("one-call approval: the late fence writes the row before it lets the ticket go", async () => {
    const s = await services("prompt");
    const before = charges();
    s.link.cut = true;
    s.ledger.down = true;
    expect(await s.call()).toMatchObject({ approval: "held", request: "not_known_yet" });
    // The proxy ran it: the request reached the API.
    expect(charges()).toBe(before + 1);
    expect(await s.callRows()).toEqual([]);

    // The database answers again, and the fence ends: a proxy took the ticket.
    s.ledger.down = false;
    s.lates[0]!("taken");
    for (let i = 0; i < 100 && (await s.row()).call_ticket_id !== null; i++) await tick();
    expect(await s.row()).toMatchObject({ status: "consumed", held_until: null, call_ticket_id: null });
    expect(await s.callRows()).toMatchObject([
      {
        action: "call_outcome_unknown",
        reason: "egress_unavailable",
        item_name: "API_KEY",
        detail: { method: "POST", path: "/v1/charges", fence: "lost" },
      },
    ]);
  });

  it("one-call approval: a late row refused too leaves the ticket named, and the sweep writes it", async () => {
    const s = await services("prompt");
    s.link.cut = true;
    s.ledger.down = true;
    expect(await s.call()).toMatchObject({ approval: "held" });
    s.lates[0]!("unknown");
    for (let i = 0; i < 100 && (await s.row()).held_until !== null; i++) await tick();
    await tick();
    const row = await s.row();
    expect(row).toMatchObject({ status: "consumed", held_until: null });
    expect(row.call_ticket_id).not.toBeNull();
    expect(await s.callRows()).toEqual([]);

    s.ledger.down = false;
    const sweep = createAbandonedCalls({
      inTransaction: (fn) =>
        runInTransaction(database.db, (trx) =>
          fn({
            repo: ownCalls(createGrantsRepo(trx), s.organisationId),
            recordEvent: createAuditRepo(trx).insertAuditEvent,
            insertFence: createSpentTicketsRepo(trx).insertFence,
          }),
        ),
      fence: { isStoreShared: async () => false },
      now: () => new Date(Date.now() + 2 * 60_000),
    });
    // No table can tell (the proxy's memory): the approval stays spent, and the ledger says so.
    expect(await sweep.sweep()).toEqual(["unknown"]);
    expect(await s.row()).toMatchObject({ status: "consumed", call_ticket_id: null });
    expect(await s.callRows()).toMatchObject([
      { action: "call_outcome_unknown", reason: "outcome_unwritten", detail: { fence: "unknown" } },
    ]);
  });

  it("one-call approval: a late fence won whose give-back the database refused lets the ticket go, so no sweep calls it taken", async () => {
    const s = await services("prompt");
    const before = charges();
    s.link.down = true;
    expect(await s.call()).toMatchObject({ approval: "held" });
    expect(charges()).toBe(before);
    const ticketId = (await s.row()).call_ticket_id!;
    // The fence wins in the shared table (its row is the control plane's own), but the give-back is refused.
    await createSpentTicketsRepo(database.db).insertFence(ticketId, new Date(Date.now() + 60_000));
    s.giveBack.fails = true;
    s.lates[0]!("fenced");
    for (let i = 0; i < 100 && (await s.row()).call_ticket_id !== null; i++) await tick();
    expect(await s.row()).toMatchObject({ status: "consumed", held_until: null, call_ticket_id: null });
    const sweep = createAbandonedCalls({
      inTransaction: (fn) =>
        runInTransaction(database.db, (trx) =>
          fn({
            repo: ownCalls(createGrantsRepo(trx), s.organisationId),
            recordEvent: createAuditRepo(trx).insertAuditEvent,
            insertFence: createSpentTicketsRepo(trx).insertFence,
          }),
        ),
      fence: { isStoreShared: async () => true },
      now: () => new Date(Date.now() + 2 * 60_000),
    });
    expect(await sweep.sweep()).toEqual([]);
    // The ledger says what happened: not sent, the approval not given back; never "a proxy took it".
    expect(await s.callRows()).toMatchObject([
      { action: "call_outcome_unknown", detail: { fence: "pending" } },
      { action: "call_not_sent", detail: { fence: "late", approval: "not_given_back" } },
    ]);
  });

  it("standing approval: the late fence writes the row the call never got", async () => {
    const s = await services("item_standing");
    const before = charges();
    s.link.cut = true;
    s.ledger.down = true;
    expect(await s.call()).toMatchObject({ approval: "kept", request: "not_known_yet" });
    expect(charges()).toBe(before + 1);
    s.ledger.down = false;
    s.lates[0]!("taken");
    for (let i = 0; i < 100 && (await s.callRows()).length === 0; i++) await tick();
    expect(await s.callRows()).toMatchObject([
      { action: "call_outcome_unknown", reason: "egress_unavailable", detail: { fence: "lost" } },
    ]);
  });
});
