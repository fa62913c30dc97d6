// Execute's answer when the origin's listener never finishes TLS: through the real upstream and
// destination path, the call ends within its timeout_ms and says the request did not leave, so the
// control plane gives the one-time approval back (spec 3.1) instead of fencing a spent ticket.
import { createServer, type Server, type Socket } from "node:net";
import type { CallSpec, Ticket } from "@latch/proto/egress";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { readTestCa } from "../../test/origin.ts";
import { parseCidrList } from "../destination/classify.ts";
import { parseConnectTo } from "../destination/connect-to.ts";
import { createDestinationResolver } from "../destination/resolve.ts";
import { createMetrics } from "../metrics/metrics.ts";
import { createUpstream, type Upstream } from "../upstream/call.ts";
import { createExecute, type ExecuteDeps } from "./execute.ts";

const HOST = "api.latch.test";
const TIMEOUT_MS = 1_000;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** Accepts TCP connections and never answers the TLS ClientHello. */
async function startSilentListener(): Promise<number> {
  const sockets: Socket[] = [];
  const server: Server = createServer((socket) => {
    sockets.push(socket);
    socket.resume();
    socket.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return (server.address() as { port: number }).port;
}

function executeTo(port: number, upstream: Upstream) {
  const call = {
    credential: { itemName: "API_KEY", keyId: "k1", sealedValue: new Uint8Array([1]), username: "" },
    inject: "bearer",
    host: HOST,
    allowedHosts: [HOST],
    method: "POST",
    path: "/v1/payments",
    body: new TextEncoder().encode('{"amount":1}'),
    contentType: "application/json",
    timeoutMs: TIMEOUT_MS,
    headers: [],
    redact: [],
  } as unknown as CallSpec;
  const deps = {
    checkTicket: async () =>
      ({ id: "t".repeat(22), issuer: "i", audience: "a", issuedAtMs: 0, expiresAtMs: 0, call }) as Ticket,
    spendTicket: async () => {},
    keyring: {
      current: { keyId: "k1", publicKey: new Uint8Array() },
      open: () => "sk_execute_deadline_canary",
    },
    resolver: createDestinationResolver({
      connectTo: parseConnectTo(`${HOST}:443:127.0.0.1:${port}`),
      allowCidrs: parseCidrList("127.0.0.1/32"),
    }),
    upstream,
    metrics: createMetrics(),
    logger: pino({ level: "silent" }),
  } as unknown as ExecuteDeps;
  return createExecute(deps);
}

describe("Execute against a listener that never finishes TLS", () => {
  it("answers timeout within timeout_ms, reporting the request as not sent", async () => {
    const upstream = createUpstream({ extraCa: readTestCa() });
    cleanups.push(() => upstream.close());
    const execute = executeTo(await startSilentListener(), upstream);
    const started = performance.now();
    const response = await execute(undefined);
    const elapsed = performance.now() - started;
    expect(response.error?.code).toBe("timeout");
    expect(response.reachedOrigin).toBe(false);
    // Within the control plane's wait (timeout_ms + 1.5 s), so it reads the answer, not a fence.
    expect(elapsed).toBeLessThan(TIMEOUT_MS + 1_000);
  });
});
