// A control plane killed mid-call (SIGKILL) on a one-call approval (DECISIONS "No approval is lost
// to a fault"): another replica on the same database settles the call once the dead one's fence
// would have ended. Never read by a proxy: the approval is given back, the ledger says call_not_sent,
// and the retry goes out once on it. Taken by the proxy (it reached the origin): the approval stays
// spent, the ledger says call_outcome_unknown. Either way the ledger has the row the dead process
// never wrote, and a second round finds nothing. On PostgreSQL (two processes, one database, the
// proxy spending ids in its table); the clock of the surviving replica is the test's.
import { type ChildProcess, spawn } from "node:child_process";
import { connect, createServer, type Server } from "node:net";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAuditRepo } from "../src/audit/audit.repo.ts";
import { createAbandonedCalls } from "../src/calls/abandoned-calls.ts";
import { runInTransaction } from "../src/db/transaction.ts";
import { createSpentTicketsRepo } from "../src/egress/spent-tickets.repo.ts";
import { createGrantsRepo } from "../src/grants/grants.repo.ts";
import { type HostedHarness, operatorWithClient, startHosted } from "./hosted.ts";

const MAIN = new URL("../src/main.ts", import.meta.url).pathname;
const databaseUrl = process.env.DATABASE_URL ?? "";

/**
 * A TCP relay to the proxy that can stop passing what the control plane sends: after `stall()`,
 * a call already on its way never reaches the proxy (a silent link), while everything before went
 * through (the control plane learned which store the proxies spend ids in).
 */
async function stallableRelay(port: number): Promise<{ address: string; server: Server; stall(): void }> {
  let isStalled = false;
  const server = createServer((socket) => {
    const upstream = connect(port, "127.0.0.1");
    socket.on("data", (chunk) => {
      if (!isStalled) upstream.write(chunk);
    });
    upstream.on("data", (chunk) => socket.write(chunk));
    for (const [a, b] of [
      [socket, upstream],
      [upstream, socket],
    ] as const) {
      a.on("error", () => b.destroy());
      a.on("close", () => b.destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    address: `127.0.0.1:${(server.address() as { port: number }).port}`,
    server,
    stall: () => {
      isStalled = true;
    },
  };
}

/** A second control plane process on the same database and keys; resolves with its URL. */
async function startReplica(
  h: HostedHarness,
  egressUrl: string,
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH,
      NODE_ENV: "test",
      BASE_URL: "http://localhost:8787",
      DATABASE_URL: databaseUrl,
      DATA_DIR: h.egress.dataDir,
      EGRESS_URL: egressUrl,
      PORT: "0",
      LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start within 60 s:\n${output}`)), 60_000);
    child.stdout!.on("data", (c: Buffer) => {
      output += c.toString();
      const match = /listening on (http:\/\/[^\s;]+);/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    child.once("exit", (code) => reject(new Error(`exited with ${code}:\n${output}`)));
  });
  return { url, child };
}

function httpRequest(url: string, token: string, path: string): Promise<Response> {
  return fetch(`${url}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "http_request", arguments: { method: "POST", path, item_name: "API_KEY" } },
    }),
  });
}

async function answerOf(response: Response): Promise<Record<string, unknown>> {
  const frame = (await response.json()) as { result: { content: { text: string }[] } };
  return JSON.parse(frame.result.content[0]!.text) as Record<string, unknown>;
}

/** A one-call approval of POST `path` by a new operator's agent, asked for and approved on `h`. */
/** The organisations this file's calls belong to: its sweeps settle theirs only. */
const ours = new Set<string>();

/**
 * A round of calls/abandoned-calls.ts over this file's calls only, as the harness's replica runs
 * it (its clock, its database): other files' calls on the same database are theirs to settle, and
 * a round moved minutes ahead would otherwise settle them too. `isStoreShared`: the proxies spend
 * ids in the database's table.
 */
function sweepOwn(h: HostedHarness, isStoreShared: boolean): Promise<string[]> {
  return createAbandonedCalls({
    inTransaction: (fn) =>
      runInTransaction(h.plane.database.db, (trx) => {
        const repo = createGrantsRepo(trx);
        return fn({
          repo: {
            ...repo,
            findUnsettledCalls: async (before, limit) =>
              (await repo.findUnsettledCalls(before, 1_000))
                .filter((call) => ours.has(call.organisation_id))
                .slice(0, limit),
          },
          recordEvent: createAuditRepo(trx).insertAuditEvent,
          insertFence: createSpentTicketsRepo(trx).insertFence,
        });
      }),
    fence: { isStoreShared: async () => isStoreShared },
    now: () => h.clock.now,
  }).sweep();
}

async function approvedOnce(h: HostedHarness, label: string, path: string) {
  const made = await operatorWithClient(h, {
    secret: `sk_live_abandoned_${label}_0123456789`,
    items: [{ name: "API_KEY" }],
    clientName: `agent ${label}`,
  });
  const asked = await answerOf(
    await h.app
      .inject({
        method: "POST",
        url: "/mcp",
        headers: { authorization: `Bearer ${made.token}`, "content-type": "application/json" },
        payload: {
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: { name: "http_request", arguments: { method: "POST", path, item_name: "API_KEY" } },
        },
      })
      .then((r) => new Response(r.body)),
  );
  expect(asked.status).toBe("pending");
  const grantId = asked.grant_id as string;
  const approved = await made.op.request("POST", `/api/grants/${grantId}/approve`, { policy: "prompt" });
  expect(approved.statusCode, approved.body).toBe(200);
  const { organisation_id } = await h.plane.database.db
    .selectFrom("grants")
    .select("organisation_id")
    .where("id", "=", grantId)
    .executeTakeFirstOrThrow();
  ours.add(organisation_id);
  return { ...made, grantId };
}

describe.runIf(databaseUrl)("a one-call approval whose control plane was killed mid-call", () => {
  let h: HostedHarness;
  let relay: Awaited<ReturnType<typeof stallableRelay>>;
  const arrivals: string[] = [];
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    h = await startHosted({ replayDatabaseUrl: databaseUrl });
    relay = await stallableRelay(h.egress.proxy.port);
    // /v1/hang reaches the origin and is never answered; anything else is answered at once.
    h.egress.setHandler((req, res) => {
      arrivals.push(req.url ?? "");
      if (req.url?.startsWith("/v1/hang")) return;
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"ok":true}');
    });
  }, 90_000);

  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL");
    relay?.server.close();
    await h?.close();
  });

  async function grantRow(grantId: string) {
    return h.plane.database.db
      .selectFrom("grants")
      .select(["status", "call_ticket_id", "call_ticket_expires_at"])
      .where("id", "=", grantId)
      .executeTakeFirstOrThrow();
  }

  async function rowsOf(op: Awaited<ReturnType<typeof approvedOnce>>["op"], action: string, grantId: string) {
    const events = (await op.request("GET", `/api/audit?action=${action}`)).json().events as {
      reason: string | null;
      detail: Record<string, unknown>;
    }[];
    return events.filter((e) => e.detail.grant_id === grantId);
  }

  /** Kills `child` once `isInFlight` holds, then moves the survivor's clock past the dead one's fence. */
  async function killMidCall(child: ChildProcess, grantId: string, isInFlight: () => boolean) {
    await expect
      .poll(async () => isInFlight() && (await grantRow(grantId)).call_ticket_id !== null, {
        timeout: 20_000,
      })
      .toBe(true);
    child.kill("SIGKILL");
    await new Promise((resolve) => child.once("exit", resolve));
    const { call_ticket_expires_at } = await grantRow(grantId);
    h.clock.now = new Date(call_ticket_expires_at!.getTime() + 70_000);
  }

  it("never read by a proxy: given back, call_not_sent, and the retry goes out once", async () => {
    const t = await approvedOnce(h, "unsent", "/v1/unsent");
    const replica = await startReplica(h, relay.address);
    children.push(replica.child);
    // A first call through the replica goes out: it learns that the proxy spends ids in the table.
    expect((await answerOf(await httpRequest(replica.url, t.token, "/v1/unsent"))).origin_status).toBe(200);
    const asked = await answerOf(await httpRequest(await listening(), t.token, "/v1/unsent"));
    expect(asked.status).toBe("pending");
    const approved = await t.op.request("POST", `/api/grants/${String(asked.grant_id)}/approve`, {
      policy: "prompt",
    });
    expect(approved.statusCode, approved.body).toBe(200);
    // Then the link goes silent: the second call's ticket never reaches the proxy.
    relay.stall();
    const second = String(asked.grant_id);
    const pending = httpRequest(replica.url, t.token, "/v1/unsent").catch(() => undefined);
    await killMidCall(replica.child, second, () => true);
    await pending;
    expect((await grantRow(second)).status).toBe("consumed");

    expect(await sweepOwn(h, true)).toEqual(["not_sent"]);
    expect(await grantRow(second)).toMatchObject({ status: "active", call_ticket_id: null });
    const rows = await rowsOf(t.op, "call_not_sent", second);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ reason: "outcome_unwritten", detail: { fence: "recovered" } });
    expect(await sweepOwn(h, true)).toEqual([]);

    // The approval works again, once, on the surviving replica.
    h.clock.now = new Date();
    const again = await answerOf(await httpRequest(await listening(), t.token, "/v1/unsent"));
    expect(again.origin_status).toBe(200);
    // The first call and this one: the abandoned call never went out.
    expect(arrivals.filter((p) => p === "/v1/unsent")).toHaveLength(2);
  }, 120_000);

  it("taken by the proxy (it reached the origin): stays spent, call_outcome_unknown", async () => {
    const t = await approvedOnce(h, "taken", "/v1/hang-taken");
    const replica = await startReplica(h, `127.0.0.1:${h.egress.proxy.port}`);
    children.push(replica.child);
    const pending = httpRequest(replica.url, t.token, "/v1/hang-taken").catch(() => undefined);
    await killMidCall(replica.child, t.grantId, () => arrivals.includes("/v1/hang-taken"));
    await pending;

    expect(await sweepOwn(h, true)).toEqual(["taken"]);
    expect(await grantRow(t.grantId)).toMatchObject({ status: "consumed", call_ticket_id: null });
    const rows = await rowsOf(t.op, "call_outcome_unknown", t.grantId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ reason: "outcome_unwritten", detail: { fence: "lost" } });
    expect(await rowsOf(t.op, "call_not_sent", t.grantId)).toHaveLength(0);
    expect(await sweepOwn(h, true)).toEqual([]);
  }, 120_000);

  /** What a control plane killed after naming its ticket leaves (no proxy ever saw this one). */
  async function abandoned(grantId: string, isStoreShared: boolean) {
    const expiresAt = new Date(Date.now() + 12_000);
    await h.plane.database.db
      .updateTable("grants")
      .set({
        status: "consumed",
        consumed_at: new Date(),
        call_ticket_id: `t${grantId}`.padEnd(22, "x"),
        call_ticket_expires_at: expiresAt,
        call_ticket_shared: isStoreShared,
      })
      .where("id", "=", grantId)
      .execute();
    h.clock.now = new Date(expiresAt.getTime() + 70_000);
  }

  it("noted while the proxies kept spent ids in their own memory: unknown, even with the table shared now", async () => {
    const t = await approvedOnce(h, "was-memory", "/v1/was-memory");
    await abandoned(t.grantId, false);
    expect(await sweepOwn(h, true)).toEqual(["unknown"]);
    expect(await grantRow(t.grantId)).toMatchObject({ status: "consumed", call_ticket_id: null });
    h.clock.now = new Date();
  }, 60_000);

  it("revoked since: never given back, though no proxy ran it; the ledger still gets its row", async () => {
    const t = await approvedOnce(h, "revoked", "/v1/revoked");
    await abandoned(t.grantId, true);
    h.clock.now = new Date();
    expect((await t.op.request("POST", `/api/grants/${t.grantId}/revoke`)).statusCode).toBe(200);
    const { call_ticket_expires_at } = await grantRow(t.grantId);
    h.clock.now = new Date(call_ticket_expires_at!.getTime() + 70_000);
    expect(await sweepOwn(h, true)).toEqual(["not_sent"]);
    expect(await grantRow(t.grantId)).toMatchObject({ status: "revoked", call_ticket_id: null });
    const rows = await rowsOf(t.op, "call_not_sent", t.grantId);
    expect(rows).toEqual([
      expect.objectContaining({ detail: expect.objectContaining({ approval: "revoked" }) }),
    ]);
    h.clock.now = new Date();
  }, 60_000);

  it("the table keeps a spent id five minutes past its expiry, whatever a proxy's sweep asks", async () => {
    const db = h.plane.database.db;
    const young = `keep-young-${Date.now()}`.padEnd(22, "y");
    const old = `keep-old-${Date.now()}`.padEnd(22, "o");
    await sql`insert into egress_spent_tickets (id, expires_at) values
      (${young}, now() - interval '2 minutes'), (${old}, now() - interval '6 minutes')`.execute(db);
    // A proxy of an earlier release swept after one minute.
    await sql`delete from egress_spent_tickets where expires_at < now() - interval '1 minute'`.execute(db);
    const left = await sql<{
      id: string;
    }>`select id from egress_spent_tickets where id in (${young}, ${old})`.execute(db);
    expect(left.rows.map((r) => r.id)).toEqual([young]);
  });

  let listeningUrl: string | undefined;
  async function listening(): Promise<string> {
    listeningUrl ??= await h.app.listen({ host: "127.0.0.1", port: 0 });
    return listeningUrl;
  }
});

describe("a one-call approval whose control plane died mid-call, with the proxy on its own memory", () => {
  let h: HostedHarness;
  beforeAll(async () => {
    h = await startHosted();
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  it("cannot be told apart from one the proxy ran: stays spent, and the ledger gets its row once", async () => {
    const made = await approvedOnce(h, "memory", "/v1/memory");
    const grantId = made.grantId;
    // What a control plane killed after handing the ticket over leaves: the approval spent, its
    // ticket named, no outcome.
    const db = h.plane.database.db;
    const expiresAt = new Date(h.clock.now.getTime() + 12_000);
    await db
      .updateTable("grants")
      .set({
        status: "consumed",
        consumed_at: h.clock.now,
        call_ticket_id: "t".repeat(22),
        call_ticket_expires_at: expiresAt,
      })
      .where("id", "=", grantId)
      .execute();
    // Not before the dead process's own fence would have ended.
    h.clock.advance(12_000 + 30_000);
    expect(await sweepOwn(h, false)).toEqual([]);
    h.clock.advance(40_000);
    expect(await sweepOwn(h, false)).toEqual(["unknown"]);
    const row = await db
      .selectFrom("grants")
      .select(["status", "call_ticket_id"])
      .where("id", "=", grantId)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ status: "consumed", call_ticket_id: null });
    const events = (await made.op.request("GET", "/api/audit?action=call_outcome_unknown")).json().events as {
      reason: string;
      detail: Record<string, unknown>;
    }[];
    expect(events.filter((e) => e.detail.grant_id === grantId)).toEqual([
      expect.objectContaining({
        reason: "outcome_unwritten",
        detail: expect.objectContaining({ fence: "unknown" }),
      }),
    ]);
    expect(await sweepOwn(h, false)).toEqual([]);
  }, 60_000);

  it("a late give-back or settle of one call never touches the ticket another call named since", async () => {
    const made = await approvedOnce(h, "late", "/v1/late");
    const grantId = made.grantId;
    const repo = createGrantsRepo(h.plane.database.db);
    const ticket = { id: "second-call-ticket-0001", expiresAt: new Date(), isStoreShared: true };
    expect(await repo.updateGrantConsumed(grantId, new Date(), ticket)).toBe(true);
    // The first call's late writes name its own ticket: neither gives back nor clears the second's.
    await repo.updateGrantRestored(grantId, "first-call-ticket-00001");
    await repo.updateGrantCallSettled(grantId, "first-call-ticket-00001");
    await repo.updateGrantRestored(grantId, null);
    const row = await h.plane.database.db
      .selectFrom("grants")
      .select(["status", "call_ticket_id"])
      .where("id", "=", grantId)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ status: "consumed", call_ticket_id: "second-call-ticket-0001" });
  }, 60_000);
});
