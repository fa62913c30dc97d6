// A retry while a one-call approval is held (DECISIONS "No approval is lost to a fault"): the
// first try's proxy did not answer and its fence waits, so the agent was answered approval "held".
// A retry of the same call is answered held again with that grant and opens no second request (an
// operator approving one would let the call go twice once the first approval came back). Once the
// fence or the sweep gives the approval back, the retry uses it, once. A call the proxy answered
// whose audit row failed is never marked held: its retry asks anew (spent-once). On PGlite and
// PostgreSQL, through runHttpRequest with the calls service's statements wired as hosted does.
import { createHash } from "node:crypto";
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
import { connectAgent, listenHosted, operatorWithClient, toolAnswer } from "./hosted.ts";

const SECRET = "sk_live_heldretry_canary_7a1d";
const PATH = "/v1/payments?idempotent=no";
let harness: EgressHarness;
let database: OpenDatabase;

beforeAll(async () => {
  harness = await startEgressHarness();
  harness.setHandler((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"paid":true}');
  });
  database = await testDatabase();
}, 60_000);
afterAll(async () => {
  await harness.close();
});

const payments = () => harness.origin.requests.filter((r) => r.url === PATH).length;
const tick = () => new Promise((resolve) => setTimeout(resolve, 20));

/**
 * One organisation's services. `proxy.down`: Execute ends without the proxy's answer and the fence
 * cannot be decided yet ("pending"); `lates` hears each such fence's end. `auditFails`: every
 * http_request audit row is refused.
 */
async function services(options: { auditFails?: boolean; isStoreShared?: boolean } = {}) {
  const mails: string[] = [];
  const { organisationId, audit, items, grants } = await callPathOrganisation(database, harness, SECRET, {
    // Hosted: requests carry a code and are mailed.
    approvalCodes: { hashCode: (code) => createHash("sha256").update(code).digest("hex") },
    notifyApproval: async (notice) => {
      mails.push(notice.grant.grant_id);
    },
  });
  const proxy = { down: false };
  const lates: ((outcome: LateFence) => void)[] = [];
  const fence: TicketFence = {
    pending: 0,
    isStoreShared: async () => options.isStoreShared ?? false,
    fence: async (_ticket, later) => {
      lates.push(later);
      return "pending";
    },
  };
  const egress = {
    execute: (...args: Parameters<EgressClient["execute"]>) => {
      if (proxy.down) throw new AppError("egress_unavailable", "the egress proxy is not reachable");
      return harness.client.execute(...args);
    },
  } as unknown as EgressClient;
  const calls = createCallsService({
    findItemByName: items.findCallableByName,
    findItemsByHost: items.findCallableByHost,
    recordEvent: async (event: AuditEvent) => {
      if (options.auditFails && event.action.startsWith("http_request")) {
        throw Object.assign(new Error("the ledger refused the row"), { code: "22P05" });
      }
      await audit.insertAuditEvent(event);
    },
    minter: harness.minter,
    egress,
    fence,
    // As services.ts wires a hosted control plane: the held marks go through the call's repo.
    callContext: createCallContextRepo(database.db),
    heldCalls: createGrantsRepo(database.db),
  });
  const deps = { items, grants, calls, policies: NO_POLICIES, surface: LOCAL_SURFACE };
  const scope = { organisationId, environment: "production", agentId: "payments_agent" };
  const args = { method: "POST" as const, path: PATH, item_name: "API_KEY", body: { amount: 100 } };
  const call = async (callArgs: typeof args = args) =>
    (await runHttpRequest(deps, scope, callArgs)).payload as Record<string, unknown>;
  const first = await call();
  expect(first.status).toBe("pending");
  const grantId = first.grant_id as string;
  await grants.approveGrant(organisationId, "operator", grantId, "prompt");
  const row = () => grantCallState(database, grantId);
  const grantIds = async () => (await grants.listGrants(organisationId)).map((g) => g.grant_id);
  return { organisationId, args, call, grantId, proxy, lates, mails, row, grantIds };
}

/** The repo a sweep runs with, finding only `organisationId`'s unsettled calls. */
function ownCalls(repo: GrantsRepo, organisationId: string): GrantsRepo {
  return {
    ...repo,
    findUnsettledCalls: async (before, limit) =>
      (await repo.findUnsettledCalls(before, 1_000))
        .filter((call) => call.organisation_id === organisationId)
        .slice(0, limit),
  };
}

/** The answer of a held call, as calls.service.ts gives it and a retry must repeat it. */
function heldShape(answer: Record<string, unknown>) {
  const { error, ...rest } = answer as { error: { code: string } };
  return { ...rest, code: error.code };
}

describe("a retry while a one-call approval is held", () => {
  it("is answered held again, opens no second request and mails nobody; once the fence wins it uses the approval given back, once", async () => {
    const s = await services();
    const before = payments();
    s.proxy.down = true;
    const first = await s.call();
    expect(first).toMatchObject({ grant_id: s.grantId, approval: "held", request: "not_known_yet" });
    const held = await s.row();
    expect(held.status).toBe("consumed");
    expect(held.held_until).toBeInstanceOf(Date);
    expect(held.held_until!.getTime()).toBeGreaterThan(Date.now() + 60_000);
    expect(s.mails).toEqual([s.grantId]);

    // The proxy answers again, but the first try's fence has not ended: still held.
    s.proxy.down = false;
    for (let i = 0; i < 3; i++) {
      const retry = await s.call();
      expect(heldShape(retry)).toEqual(heldShape(first));
      expect(retry.next).toEqual({ for_model: first.hint, tool: "http_request", arguments: s.args });
    }
    expect(await s.grantIds()).toEqual([s.grantId]);
    expect(s.mails).toEqual([s.grantId]);
    expect(payments()).toBe(before);

    // Another call (another body) is another request, held or not.
    const other = await s.call({ ...s.args, body: { amount: 200 } });
    expect(other.status).toBe("pending");
    expect(other.grant_id).not.toBe(s.grantId);

    // The fence wins: the approval is given back and its mark is gone; the retry uses it once.
    s.lates[0]!("fenced");
    for (let i = 0; i < 100 && (await s.row()).status !== "active"; i++) await tick();
    for (let i = 0; i < 100 && (await s.row()).held_until !== null; i++) await tick();
    expect(await s.row()).toMatchObject({ status: "active", held_until: null, call_ticket_id: null });
    const sent = await s.call();
    expect(sent).toMatchObject({ origin_status: 200, grant_id: s.grantId });
    expect(payments()).toBe(before + 1);
    const again = await s.call();
    expect(again.status).toBe("pending");
    expect(payments()).toBe(before + 1);
  });

  it("asks anew once the late fence settles the approval as spent (a proxy took the ticket)", async () => {
    const s = await services();
    s.proxy.down = true;
    expect(await s.call()).toMatchObject({ approval: "held" });
    expect((await s.call()).approval).toBe("held");
    s.lates[0]!("taken");
    for (let i = 0; i < 100 && (await s.row()).call_ticket_id !== null; i++) await tick();
    expect(await s.row()).toMatchObject({ status: "consumed", held_until: null, call_ticket_id: null });
    const retry = await s.call();
    expect(retry.status).toBe("pending");
    expect(retry.grant_id).not.toBe(s.grantId);
  });

  it("uses the approval the sweep gives back, and the sweep ends its mark", async () => {
    const s = await services({ isStoreShared: true });
    const before = payments();
    s.proxy.down = true;
    expect(await s.call()).toMatchObject({ approval: "held" });
    s.proxy.down = false;
    expect((await s.call()).approval).toBe("held");
    // This control plane stops before its fence ends: the sweep, past the live fence's horizon,
    // fences the ticket in the shared table (no proxy ran it) and gives the approval back.
    // Only this organisation's calls: other files' calls on the same database are theirs to settle.
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
      now: () => new Date(Date.now() + 5 * 60_000),
    });
    await sweep.sweep();
    expect(await s.row()).toMatchObject({ status: "active", held_until: null, call_ticket_id: null });
    expect(await s.call()).toMatchObject({ origin_status: 200, grant_id: s.grantId });
    expect(payments()).toBe(before + 1);
  });

  it("never holds a call the proxy answered whose audit row failed (spent-once): its retry asks anew", async () => {
    const s = await services({ auditFails: true });
    const before = payments();
    const answered = await s.call();
    expect(answered).toMatchObject({ origin_status: 200, grant_id: s.grantId });
    const row = await s.row();
    // Its outcome is unwritten (the ticket stays for abandoned-calls.ts), but it is not held.
    expect(row).toMatchObject({ status: "consumed", held_until: null });
    expect(row.call_ticket_id).not.toBeNull();
    const retry = await s.call();
    expect(retry.status).toBe("pending");
    expect(retry.grant_id).not.toBe(s.grantId);
    expect(payments()).toBe(before + 1);
    // abandoned-calls.ts would write its row later; settled here, so no other file's sweep finds it.
    await createGrantsRepo(database.db).updateGrantCallSettled(s.grantId, row.call_ticket_id!);
  });
});

/** An MCP tool result's text is the tool's payload. */
const answerOf = (result: Parameters<typeof toolAnswer>[0]) =>
  toolAnswer(result) as unknown as Record<string, unknown>;

describe("a hosted control plane, as services.ts wires it", () => {
  it("answers an MCP retry of a held call held, with no second request and no mail, until the hold ends", async () => {
    let originCalls = 0;
    const { h, url } = await listenHosted((_req, res) => {
      originCalls += 1;
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
    try {
      const { op, token } = await operatorWithClient(h, {
        secret: SECRET,
        items: [{ name: "API_KEY" }],
        clientName: "payments agent",
      });
      const agent = await connectAgent(url, token);
      try {
        const args = {
          item_name: "API_KEY",
          host: "api.latch.test",
          method: "POST",
          path: PATH,
          body: { n: 1 },
        };
        const asked = answerOf(await agent.callTool({ name: "http_request", arguments: args }));
        const grantId = asked.grant_id as string;
        const approved = await op.request("POST", `/api/grants/${grantId}/approve`, { policy: "prompt" });
        expect(approved.statusCode, approved.body).toBe(200);
        // The first try as calls.service.ts leaves a held one: spent, its ticket named, marked held.
        const repo = createGrantsRepo(h.plane.database.db);
        const ticket = {
          id: "tkt_held_first_try",
          expiresAt: new Date(Date.now() + 11_500),
          isStoreShared: true,
        };
        expect(await repo.updateGrantConsumed(grantId, new Date(), ticket)).toBe(true);
        await repo.updateGrantHeld(grantId, "tkt_held_first_try", new Date(Date.now() + 90_000));
        const mailsBefore = h.inbox.mails.length;

        const retried = await agent.callTool({ name: "http_request", arguments: args });
        expect(retried.isError).toBe(true);
        expect(answerOf(retried)).toMatchObject({
          grant_id: grantId,
          approval: "held",
          approval_kept: false,
          request: "not_known_yet",
          error: { code: "egress_unavailable" },
          next: { tool: "http_request", arguments: args },
        });
        const listed = (await op.request("GET", "/api/grants")).json().grants as { grant_id: string }[];
        expect(listed.map((g) => g.grant_id)).toEqual([grantId]);
        expect(h.inbox.mails.length).toBe(mailsBefore);
        expect(originCalls).toBe(0);

        // Decided as spent (its outcome written): the same call asks the operator again.
        await repo.updateGrantCallSettled(grantId, "tkt_held_first_try");
        await repo.updateGrantHoldEnded(grantId);
        const again = answerOf(await agent.callTool({ name: "http_request", arguments: args }));
        expect(again.status).toBe("pending");
        expect(again.grant_id).not.toBe(grantId);
      } finally {
        await agent.close();
      }
    } finally {
      await h.close();
    }
  }, 60_000);
});
