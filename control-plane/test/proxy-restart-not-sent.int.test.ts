// A call whose ticket was minted while the one egress proxy, on its memory store, was restarting
// (DECISIONS "No approval is lost to a fault"): the restarted process refuses the ticket, issued
// before it started, unspent (ticket_predates_proxy). The control plane sent that ticket to no other
// process, so nothing ran it: the one-call approval is given back, the ledger says call_not_sent,
// the agent hears not_sent with its approval kept, and the retry goes out once. The hosted plane,
// the MCP SDK client, real proxies (not a control plane's child, so the check applies) and a real
// TLS origin on loopback; between plane and proxies a TCP relay that holds new connections, so that
// the plane's gRPC channel waits, its call queued, until the restarted proxy answers.
import { mkdtempSync, writeFileSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadEgressConfig } from "../../egress-proxy/src/config.ts";
import { type RunningEgressProxy, startEgressProxy } from "../../egress-proxy/src/egress-proxy.ts";
import { type RunningOrigin, readTestCas, startOrigin } from "../../egress-proxy/test/origin.ts";
import { loadConfig } from "../src/config.ts";
import { buildControlPlane, type ControlPlane } from "../src/control-plane.ts";
import { createEgressClient } from "../src/egress/egress-client.ts";
import { loadOrCreateTicketKey } from "../src/egress/ticket-key.ts";
import { createMailer } from "../src/mail/mailer.ts";
import { testDatabase } from "./database.ts";
import { LogCapture } from "./egress-harness.ts";
import { connectAgent, operatorWithClient, type SmtpInbox, startSmtpInbox, toolAnswer } from "./hosted.ts";

const SECRET = "sk_live_predates_canary_3f9b2c";
const PATH = "/v1/charges";
const ARGS = { method: "POST", path: PATH, item_name: "API_KEY", body: { amount: 100 } };

/**
 * A TCP relay to one proxy port. `hold()` drops every connection and holds the new ones, reading
 * and keeping what the plane sends and passing nothing on: the plane's channel then waits for the
 * HTTP/2 settings, with its calls queued. `release(port)` passes the held bytes, and everything
 * after, to the proxy on `port`.
 */
async function startRelay(initialPort: number) {
  let port = initialPort;
  let isHolding = false;
  const open = new Set<Socket>();
  const held: { socket: Socket; chunks: Buffer[] }[] = [];
  const track = (socket: Socket) => {
    open.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => open.delete(socket));
  };
  const pass = (socket: Socket, chunks: Buffer[]) => {
    const upstream = connect(port, "127.0.0.1");
    track(upstream);
    for (const chunk of chunks) upstream.write(chunk);
    socket.pipe(upstream);
    upstream.pipe(socket);
    socket.on("close", () => upstream.destroy());
    upstream.on("close", () => socket.destroy());
  };
  const server: Server = createServer((socket) => {
    track(socket);
    if (!isHolding) return pass(socket, []);
    const entry = { socket, chunks: [] as Buffer[] };
    socket.on("data", (chunk: Buffer) => entry.chunks.push(chunk));
    held.push(entry);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    address: `127.0.0.1:${(server.address() as { port: number }).port}`,
    /** Bytes the held connections have sent, for waiting until a call is on its way. */
    heldText: () => Buffer.concat(held.flatMap((h) => h.chunks)).toString("latin1"),
    hold() {
      isHolding = true;
      for (const socket of open) socket.destroy();
    },
    release(nextPort: number) {
      port = nextPort;
      isHolding = false;
      for (const { socket, chunks } of held.splice(0)) {
        socket.removeAllListeners("data");
        if (!socket.destroyed) pass(socket, chunks);
      }
    },
    close() {
      for (const socket of open) socket.destroy();
      server.close();
    },
  };
}

describe("a ticket minted while its memory-store proxy restarted", () => {
  let origin: RunningOrigin;
  let inbox: SmtpInbox;
  let plane: ControlPlane;
  let relay: Awaited<ReturnType<typeof startRelay>>;
  let agent: Client;
  const proxies: RunningEgressProxy[] = [];
  let startProxy: () => Promise<RunningEgressProxy>;
  const clock = {
    now: new Date(),
    advance(ms: number) {
      clock.now = new Date(clock.now.getTime() + ms);
    },
  };

  beforeAll(async () => {
    origin = await startOrigin((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"charged":true}');
    });
    const dataDir = mkdtempSync(join(tmpdir(), "latch-predates-"));
    const extraCa = join(dataDir, "test-cas.pem");
    writeFileSync(extraCa, readTestCas());
    const ticketKey = loadOrCreateTicketKey(dataDir);
    // A proxy of its own process's memory (no EGRESS_REPLAY_DATABASE_URL), not spawned by the plane.
    const proxyConfig = loadEgressConfig({
      NODE_ENV: "test",
      DATA_DIR: dataDir,
      EGRESS_LISTEN: "127.0.0.1:0",
      EGRESS_CONNECT_TO: `api.latch.test:443:127.0.0.1:${origin.port}`,
      EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
      EGRESS_EXTRA_CA: extraCa,
    });
    startProxy = async () => {
      const proxy = await startEgressProxy(proxyConfig, pino({ level: "silent" }));
      proxies.push(proxy);
      return proxy;
    };
    const first = await startProxy();
    relay = await startRelay(first.port);
    inbox = await startSmtpInbox();
    const logger = pino({ level: "warn" }, new LogCapture());
    plane = await buildControlPlane({
      config: loadConfig({
        NODE_ENV: "test",
        BASE_URL: "http://localhost:8787",
        DATA_DIR: dataDir,
        EGRESS_URL: relay.address,
      }),
      dataDir,
      ticketKey,
      egress: {
        client: createEgressClient({ address: relay.address }),
        // The same DATA_DIR, so the same sealing key in every process.
        sealingKey: async () => first.sealingKey,
      },
      logger,
      database: await testDatabase(),
      mailer: createMailer({ smtpUrl: `smtp://127.0.0.1:${inbox.port}`, dataDir, logger }),
      now: () => clock.now,
    });
  }, 60_000);

  afterAll(async () => {
    await agent?.close();
    await plane?.close();
    relay?.close();
    for (const proxy of proxies) await proxy.close().catch(() => {});
    await inbox?.close();
    await origin?.close();
  });

  it("is refused unspent by the restarted proxy: not_sent, the approval kept and used once by the retry", async () => {
    const h = { app: plane.app, inbox, clock };
    const url = await plane.app.listen({ host: "127.0.0.1", port: 0 });
    const made = await operatorWithClient(h, {
      secret: SECRET,
      items: [{ name: "API_KEY" }],
      clientName: "restart agent",
    });
    agent = await connectAgent(url, made.token, "restart-agent");
    const call = async () => toolAnswer(await agent.callTool({ name: "http_request", arguments: ARGS }));
    const charges = () => origin.requests.filter((r) => r.url === PATH).length;

    const asked = await call();
    expect(asked.status).toBe("pending");
    const grantId = String(asked.grant_id);
    const approved = await made.op.request("POST", `/api/grants/${grantId}/approve`, { policy: "prompt" });
    expect(approved.statusCode, approved.body).toBe(200);
    const grantRow = () =>
      plane.database.db
        .selectFrom("grants")
        .select(["status", "call_ticket_id"])
        .where("id", "=", grantId)
        .executeTakeFirstOrThrow();

    // The proxy goes down; the plane's channel reconnects to a relay that answers nothing yet.
    relay.hold();
    await proxies[0]!.close();
    const pending = call();
    // The approval is spent and its ticket named before the ticket is minted and handed to gRPC,
    // which holds the call until the channel is ready; the bytes of the HTTP/2 preface are held.
    await expect.poll(async () => (await grantRow()).call_ticket_id, { timeout: 15_000 }).not.toBeNull();
    expect((await grantRow()).status).toBe("consumed");
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(relay.heldText()).toContain("PRI * HTTP/2.0");
    // The restarted process: its memory knows no spend from before it started.
    const restarted = await startProxy();
    relay.release(restarted.port);

    const answer = await pending;
    expect(answer).toMatchObject({
      error: { code: "ticket_predates_proxy" },
      grant_id: grantId,
      approval: "kept",
      approval_kept: true,
      request: "not_sent",
      next: { arguments: ARGS },
    });
    expect(charges()).toBe(0);
    expect(await grantRow()).toMatchObject({ status: "active", call_ticket_id: null });
    // The organisation is this operator's own: its ledger holds this call's rows only.
    const events = async (action: string) =>
      (await made.op.request("GET", `/api/audit?action=${action}`)).json().events as {
        reason: string | null;
        detail: Record<string, unknown>;
      }[];
    expect(await events("call_not_sent")).toMatchObject([
      { reason: "ticket_predates_proxy", detail: { method: "POST", path: PATH } },
    ]);
    expect((await events("call_not_sent"))[0]!.detail).not.toHaveProperty("approval");
    expect(await events("call_outcome_unknown")).toEqual([]);

    // The retry (next.arguments) uses the approval given back, once.
    const retried = await call();
    expect(retried).toMatchObject({ origin_status: 200, grant_id: grantId });
    expect(charges()).toBe(1);
    expect((await grantRow()).status).toBe("consumed");
    expect((await call()).status).toBe("pending");
    expect(charges()).toBe(1);
  }, 60_000);
});
