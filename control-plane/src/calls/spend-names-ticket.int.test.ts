// A one-call approval is spent by the statement that names its call's ticket (DECISIONS "No
// approval is lost to a fault"): a control plane killed the moment after the spend, before
// anything else of the call ran, leaves the grant with its ticket named, and the sweep of
// abandoned calls gives the approval back (call_not_sent) once that ticket's fence would end.
import { newId } from "@latch/shared/ids";
import { describe, expect, it } from "vitest";
import { newTestItem, newTestOrganisation, testDatabase } from "../../test/database.ts";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { runInTransaction } from "../db/transaction.ts";
import type { EgressClient } from "../egress/egress-client.ts";
import { createSpentTicketsRepo } from "../egress/spent-tickets.repo.ts";
import type { TicketFence } from "../egress/ticket-fence.ts";
import type { TicketMinter } from "../egress/tickets.ts";
import { createCallAuthorisation } from "../grants/call-authorisation.ts";
import { createGrantsRepo } from "../grants/grants.repo.ts";
import { createAbandonedCalls } from "./abandoned-calls.ts";
import { createCallsService } from "./calls.service.ts";

describe("a one-call approval names its ticket in the statement that spends it", () => {
  it("a control plane killed right after the spend leaves the ticket named, and the sweep gives the approval back", async () => {
    const database = await testDatabase();
    const organisationId = await newTestOrganisation(database);
    const itemId = await newTestItem(database, organisationId, {
      name: "API_KEY",
      hosts: ["api.latch.test"],
    });
    const repo = createGrantsRepo(database.db);
    const grantId = newId("grt");
    await repo.insertGrant({
      id: grantId,
      organisation_id: organisationId,
      environment: "staging",
      item_id: itemId,
      agent_id: "agent_killed",
      tool_id: "http_request",
      policy: "prompt",
      status: "active",
      task_id: null,
      task_description: null,
      created_at: new Date(),
      approved_at: new Date(),
      expires_at: null,
      consumed_at: null,
      revoked_at: null,
      call_method: "GET",
      call_host: "api.latch.test",
      call_path: "/v1/x",
      call_body_sha256: null,
    });
    // The proxies spend ids in the shared table (the fence keeps its answer).
    const fence: TicketFence = { pending: 0, isStoreShared: async () => true, fence: async () => "taken" };
    const calls = createCallsService({
      findItemByName: async () => undefined,
      findItemsByHost: async () => [],
      recordEvent: async () => {},
      minter: {} as TicketMinter,
      egress: {} as EgressClient,
      fence,
    });

    // The spend, as http_request makes it; then the process dies: no call, no give-back, no settle.
    const authorisation = await createCallAuthorisation({ repo, now: () => new Date() }).authoriseCall(
      { organisationId, itemId, agentId: "agent_killed", toolId: "http_request" },
      { method: "GET", host: "api.latch.test", path: "/v1/x", bodySha256: null },
      undefined,
      () => calls.nameCallTicket({ timeout_ms: 1000 }),
    );
    expect(authorisation?.isOneCall).toBe(true);
    const spent = await database.db
      .selectFrom("grants")
      .select(["status", "call_ticket_id", "call_ticket_expires_at", "call_ticket_shared"])
      .where("id", "=", grantId)
      .executeTakeFirstOrThrow();
    expect(spent.status).toBe("consumed");
    expect(spent.call_ticket_id).toBe(authorisation?.ticket?.id);
    expect(spent.call_ticket_expires_at?.getTime()).toBe(authorisation?.ticket?.expiresAt.getTime());
    expect(spent.call_ticket_shared).toBe(true);

    // Another replica's sweep, once the named ticket's fence would have ended.
    const events: AuditEvent[] = [];
    const sweep = createAbandonedCalls({
      inTransaction: (fn) =>
        runInTransaction(database.db, (trx) =>
          fn({
            repo: createGrantsRepo(trx),
            recordEvent: async (event) => {
              events.push(event);
            },
            insertFence: createSpentTicketsRepo(trx).insertFence,
          }),
        ),
      fence: { isStoreShared: async () => true },
      now: () => new Date(Date.now() + 10 * 60_000),
    });
    // Other files' calls on a shared database may be swept too: only this grant's row is read.
    expect(await sweep.sweep()).toContain("not_sent");
    expect(events.filter((e) => e.detail?.grant_id === grantId).map((e) => e.action)).toEqual([
      "call_not_sent",
    ]);
    expect(
      await database.db
        .selectFrom("grants")
        .select(["status", "call_ticket_id"])
        .where("id", "=", grantId)
        .executeTakeFirstOrThrow(),
    ).toEqual({ status: "active", call_ticket_id: null });
  }, 15_000);
});
