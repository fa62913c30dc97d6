// A proxy on its memory store, restarted: the new process knows none of its predecessor's spends,
// so a ticket issued before it started is refused (DECISIONS "The two tiers": every replica
// refuses a ticket it has seen), unspent and with its own code, ticket_predates_proxy, so that the
// control plane, which sent it to no other process, knows it never left; through the real proxy
// (gRPC on loopback, every RPC's ticket check, a real TLS origin) and the control plane's own
// egress client.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FenceOutcome } from "@latch/proto/egress";
import { sealValue } from "@latch/shared/crypto/seal";
import { SPAWNED_BY_CONTROL_PLANE } from "@latch/shared/process";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createEgressClient } from "../../../control-plane/src/egress/egress-client.ts";
import { loadOrCreateTicketKey } from "../../../control-plane/src/egress/ticket-key.ts";
import { createTicketMinter } from "../../../control-plane/src/egress/tickets.ts";
import { readTestCas, startOrigin } from "../../test/origin.ts";
import { loadEgressConfig } from "../config.ts";
import { startEgressProxy } from "../egress-proxy.ts";

const HOST = "api.latch.test";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(env: NodeJS.ProcessEnv = {}) {
  const origin = await startOrigin((_req, res) => res.end("ok"));
  cleanups.push(() => origin.close());
  const dataDir = mkdtempSync(join(tmpdir(), "latch-restart-replay-"));
  const extraCa = join(dataDir, "test-cas.pem");
  writeFileSync(extraCa, readTestCas());
  const ticketKey = loadOrCreateTicketKey(dataDir);
  const config = loadEgressConfig({
    NODE_ENV: "test",
    DATA_DIR: dataDir,
    EGRESS_LISTEN: "127.0.0.1:0",
    EGRESS_CONNECT_TO: `${HOST}:443:127.0.0.1:${origin.port}`,
    EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
    EGRESS_EXTRA_CA: extraCa,
    ...env,
  });
  const minter = createTicketMinter({ key: ticketKey, issuer: "test", audience: config.EGRESS_AUDIENCE });
  const start = async () => {
    const proxy = await startEgressProxy(config, pino({ level: "silent" }));
    const client = createEgressClient({ address: `127.0.0.1:${proxy.port}` });
    cleanups.push(() => proxy.close());
    cleanups.push(() => client.close());
    return { proxy, client };
  };
  /** A call ticket for a credential sealed to `sealingKey` (the same in every process on dataDir). */
  const ticketFor = async (sealingKey: { keyId: string; publicKey: Uint8Array }) => {
    const sealed = await sealValue(sealingKey, "sk_restart_canary");
    return () =>
      minter.mintCallTicket(
        {
          credential: {
            itemName: "TEST_KEY",
            keyId: sealed.keyId,
            sealedValue: Buffer.from(sealed.sealed),
            username: "",
          },
          inject: "bearer",
          host: HOST,
          allowedHosts: [HOST],
          method: "GET",
          path: "/v1/things",
          body: Buffer.alloc(0),
          contentType: "",
          timeoutMs: 5_000,
          headers: [],
          redact: [],
          exchange: undefined,
        },
        { ttlMs: 30_000 },
      );
  };
  return { origin, minter, start, ticketFor };
}

describe("a proxy restarted on its memory store", () => {
  it("refuses the tickets issued before it started (one its predecessor ran), and serves new ones", async () => {
    const { origin, minter, start, ticketFor } = await setup();
    const first = await start();
    const ticket = await ticketFor(first.proxy.sealingKey);
    const ran = ticket();
    expect((await first.client.execute(ran, 5_000)).error).toBeUndefined();
    expect(origin.requests).toHaveLength(1);
    // A document ticket issued before the restart too, never sent anywhere.
    const document = minter.mintDocumentTicket({ host: HOST, path: "/doc", timeoutMs: 5_000, maxBytes: 0 });
    await first.proxy.close();
    await new Promise((resolve) => setTimeout(resolve, 5));

    const second = await start();
    // The ticket the first process ran is refused, unsent; so is every ticket issued before the
    // restart (this process cannot tell them apart), whichever RPC carries it.
    await expect(second.client.execute(ran, 5_000)).rejects.toMatchObject({ code: "ticket_predates_proxy" });
    await expect(second.client.fetchDocument(document, 5_000)).rejects.toMatchObject({
      code: "ticket_predates_proxy",
    });
    expect(origin.requests).toHaveLength(1);
    // Its fence still answers (it cannot tell), rather than refusing the ticket.
    expect(await second.client.fence(ran)).toBe(FenceOutcome.FENCE_OUTCOME_UNKNOWN);
    // A ticket issued after the start runs, once.
    const fresh = ticket();
    expect((await second.client.execute(fresh, 5_000)).error).toBeUndefined();
    expect(origin.requests).toHaveLength(2);
    await expect(second.client.execute(fresh, 5_000)).rejects.toMatchObject({ code: "ticket_replayed" });
  });

  it("a control plane's child runs the ticket its parent minted before starting it (vault mcp's first call)", async () => {
    const { origin, start, ticketFor } = await setup({ [SPAWNED_BY_CONTROL_PLANE]: "1" });
    // The sealing key is made by the first start; the lazy parent mints its first ticket, then
    // starts the proxy it sends it to.
    const keyOnly = await start();
    const ticket = await ticketFor(keyOnly.proxy.sealingKey);
    await keyOnly.proxy.close();
    const minted = ticket();
    await new Promise((resolve) => setTimeout(resolve, 5));
    const child = await start();
    expect((await child.client.execute(minted, 5_000)).error).toBeUndefined();
    expect(origin.requests).toHaveLength(1);
    await expect(child.client.execute(minted, 5_000)).rejects.toMatchObject({ code: "ticket_replayed" });
  });
});
