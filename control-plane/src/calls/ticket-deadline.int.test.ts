// A one-call approval's call never outlives the ticket expiry named on its grant (DECISIONS "No
// approval is lost to a fault"): abandoned-calls.ts fences a ticket past that expiry and gives the
// approval back, which is sound only if no ticket under that id can leave after it. A call waiting
// for its item's token lock gives up before then and gives its approval back itself; a ticket
// whose named expiry is too near is never minted. The lock tests run on PostgreSQL (a second
// connection holds the lock, as another replica's exchange does).
import { generateKeyPairSync } from "node:crypto";
import { type SignedTicket, Ticket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { newId } from "@latch/shared/ids";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { isPostgresRun, newTestItem, newTestOrganisation, testDatabase } from "../../test/database.ts";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { runInTransaction } from "../db/transaction.ts";
import { type EgressClient, LINK_OVERHEAD_MS } from "../egress/egress-client.ts";
import { createSpentTicketsRepo } from "../egress/spent-tickets.repo.ts";
import type { TicketFence } from "../egress/ticket-fence.ts";
import { createTicketMinter, newTicketId } from "../egress/tickets.ts";
import { createCallAuthorisation } from "../grants/call-authorisation.ts";
import { createGrantsRepo } from "../grants/grants.repo.ts";
import type { CallableItem } from "../items/callable-item.ts";
import { createItemTokensRepo } from "../items/item-tokens.repo.ts";
import { createAbandonedCalls } from "./abandoned-calls.ts";
import { createCallsService } from "./calls.service.ts";

const SPOTIFY_HOSTS = ["api.spotify.com", "accounts.spotify.com"];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function storedItem(
  organisationId: string,
  name: string,
  fields: { inject: string; hosts: string[]; username?: string },
): Promise<CallableItem> {
  const database = await testDatabase();
  const id = await newTestItem(database, organisationId, { name, hosts: fields.hosts });
  await database.db
    .updateTable("items")
    .set({ inject: fields.inject, username: fields.username ?? null })
    .where("id", "=", id)
    .execute();
  return {
    id,
    name,
    allowedHosts: fields.hosts,
    inject: fields.inject,
    username: fields.username ?? null,
    sealingKeyId: "sk_test",
    sealedValue: Buffer.from(`sealed ${name}`),
  };
}

/**
 * A one-call approval of exactly GET host/path, approved and then spent by authoriseCall, naming
 * the ticket of a call with a 1 s timeout (as calls.service nameCallTicket does), `delayMs` after
 * it was drawn (a stalled process between drawing the ticket and spending the approval).
 */
async function spentApproval(
  organisationId: string,
  item: CallableItem,
  host: string,
  path: string,
  delayMs = 0,
) {
  const database = await testDatabase();
  const repo = createGrantsRepo(database.db);
  const id = newId("grt");
  await repo.insertGrant({
    id,
    organisation_id: organisationId,
    environment: "staging",
    item_id: item.id,
    agent_id: "agent_deadline",
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
    call_host: host,
    call_path: path,
    call_body_sha256: null,
  });
  const authorisation = await createCallAuthorisation({ repo, now: () => new Date() }).authoriseCall(
    { organisationId, itemId: item.id, agentId: "agent_deadline", toolId: "http_request" },
    { method: "GET", host, path, bodySha256: null },
    undefined,
    async () => {
      const ticket = {
        id: newTicketId(),
        expiresAt: new Date(Date.now() + 1000 + LINK_OVERHEAD_MS),
        isStoreShared: true,
      };
      await sleep(delayMs);
      return ticket;
    },
  );
  if (!authorisation?.isOneCall || !authorisation.ticket) throw new Error("the approval was not spent");
  return { id, authorisation };
}

/** The calls service with a real minter (its tickets kept) and a proxy link that must never be used. */
async function callsService(items: CallableItem[]) {
  const database = await testDatabase();
  const minter = createTicketMinter({
    key: {
      keyId: "k_deadline",
      privateKey: generateKeyPairSync("ed25519").privateKey,
      publicKeyRaw: Buffer.alloc(32),
    },
    issuer: "latch-control-plane",
    audience: "latch-egress",
  });
  const minted: Ticket[] = [];
  const sent: SignedTicket[] = [];
  const fence: TicketFence = { pending: 0, isStoreShared: async () => true, fence: async () => "pending" };
  const calls = createCallsService({
    findItemByName: async (_o, _e, name) => items.find((item) => item.name === name),
    findItemsByHost: async () => [],
    recordEvent: async () => {},
    minter: {
      ...minter,
      mintCallTicket: (call, options) => {
        const ticket = minter.mintCallTicket(call, options);
        minted.push(Ticket.decode(ticket.payload));
        return ticket;
      },
    },
    egress: {
      execute: async (ticket: SignedTicket) => {
        sent.push(ticket);
        throw new AppError("egress_unavailable", "no proxy in this test");
      },
    } as unknown as EgressClient,
    fence,
    inItemTokenLock: createItemTokensRepo(database.db).inItemTokenLock,
  });
  return { calls, minted, sent };
}

async function grantRow(id: string) {
  const database = await testDatabase();
  return database.db
    .selectFrom("grants")
    .select(["status", "call_ticket_id", "call_ticket_expires_at"])
    .where("id", "=", id)
    .executeTakeFirstOrThrow();
}

describe("a one-call approval's ticket and the expiry its grant names", () => {
  it.runIf(isPostgresRun())(
    "a call that waits out its item's token lock past that expiry ends not sent, its approval back, and mints nothing later; the sweep gives nothing back under it",
    async () => {
      const database = await testDatabase();
      const organisationId = await newTestOrganisation(database);
      const app = await storedItem(organisationId, "SPOTIFY", {
        inject: "client_credentials",
        hosts: SPOTIFY_HOSTS,
        username: "cid",
      });
      const refresh = await storedItem(organisationId, "SPOTIFY_REFRESH", {
        inject: "refresh",
        hosts: SPOTIFY_HOSTS,
      });
      const { id, authorisation } = await spentApproval(organisationId, app, "api.spotify.com", "/v1/me");
      const { calls, minted, sent } = await callsService([app, refresh]);
      // Another replica's exchange holds the lock of both items for as long as it takes.
      const holder = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await holder.connect();
      try {
        await holder.query("begin");
        for (const item of [app, refresh]) {
          await holder.query("select pg_advisory_xact_lock(hashtextextended($1, 0))", [
            `item-token:${item.id}`,
          ]);
        }
        const startedAt = Date.now();
        const call = calls
          .executeCall(
            { organisationId, environment: "staging", actor: "agent:agent_deadline" },
            {
              method: "GET",
              host: "api.spotify.com",
              path: "/v1/me",
              item_name: "SPOTIFY",
              timeout_ms: 1000,
            },
            { item: app, host: "api.spotify.com", path: "/v1/me" },
            authorisation,
          )
          .then(
            () => ({ error: undefined, at: Date.now() }),
            (error: unknown) => ({ error: error as AppError, at: Date.now() }),
          );
        // The expiry the call named on its grant before it began to wait.
        await sleep(200);
        const named = (await grantRow(id)).call_ticket_expires_at;
        expect(named?.getTime()).toBeGreaterThan(startedAt);
        const ended = await Promise.race([call, sleep(6_000).then(() => undefined)]);
        expect(ended, "the call still waits for the lock past its ticket's expiry").toBeDefined();
        expect(ended!.at).toBeLessThan(named!.getTime());
        expect(ended!.error).toBeInstanceOf(AppError);
        expect(ended!.error!.extra).toMatchObject({ approval: "kept", request: "not_sent" });
        expect(await grantRow(id)).toMatchObject({ status: "active", call_ticket_id: null });

        // Long past the named expiry, the sweep finds nothing of this call to give back.
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
        await sweep.sweep();
        expect(events.filter((e) => e.detail?.grant_id === id)).toEqual([]);

        // The lock comes free: the call that gave up mints and sends nothing.
        await holder.query("commit");
        await sleep(1_000);
        expect(minted).toEqual([]);
        expect(sent).toEqual([]);
      } finally {
        await holder.end();
      }
    },
    30_000,
  );

  it("a ticket whose named expiry is too near when it would be minted is not minted, and the approval comes back", async () => {
    const database = await testDatabase();
    const organisationId = await newTestOrganisation(database);
    const item = await storedItem(organisationId, "API_KEY", { inject: "bearer", hosts: ["api.latch.test"] });
    // Naming the ticket took longer than the ticket may live (a stalled process, a slow write).
    const { id, authorisation } = await spentApproval(organisationId, item, "api.latch.test", "/v1/x", 2_700);
    const { calls, minted, sent } = await callsService([item]);
    const error = await calls
      .executeCall(
        { organisationId, environment: "staging", actor: "agent:agent_deadline" },
        { method: "GET", host: "api.latch.test", path: "/v1/x", item_name: "API_KEY", timeout_ms: 1000 },
        { item, host: "api.latch.test", path: "/v1/x" },
        authorisation,
      )
      .then(
        () => undefined,
        (thrown: unknown) => thrown as AppError,
      );
    expect(error).toBeInstanceOf(AppError);
    expect(error!.extra).toMatchObject({ approval: "kept", request: "not_sent" });
    expect(minted).toEqual([]);
    expect(sent).toEqual([]);
    expect(await grantRow(id)).toMatchObject({ status: "active", call_ticket_id: null });
  }, 15_000);

  it("a ticket minted under a named id never lives past the expiry its grant names", async () => {
    const database = await testDatabase();
    const organisationId = await newTestOrganisation(database);
    const item = await storedItem(organisationId, "API_KEY", { inject: "bearer", hosts: ["api.latch.test"] });
    const { id, authorisation } = await spentApproval(organisationId, item, "api.latch.test", "/v1/x");
    const { calls, minted } = await callsService([item]);
    const named = authorisation.ticket!;
    expect(await grantRow(id)).toMatchObject({
      call_ticket_id: named.id,
      call_ticket_expires_at: named.expiresAt,
    });
    // Time passes between the spend and the mint (the plan, the token lock).
    await sleep(500);
    await calls
      .executeCall(
        { organisationId, environment: "staging", actor: "agent:agent_deadline" },
        { method: "GET", host: "api.latch.test", path: "/v1/x", item_name: "API_KEY", timeout_ms: 1000 },
        { item, host: "api.latch.test", path: "/v1/x" },
        authorisation,
      )
      .catch(() => undefined);
    expect(minted).toHaveLength(1);
    expect(minted[0]!.id).toBe(named.id);
    expect(Number(minted[0]!.expiresAtMs)).toBeLessThanOrEqual(named.expiresAt.getTime() + 5);
    expect((await grantRow(id)).status).toBeDefined();
  }, 15_000);
});
