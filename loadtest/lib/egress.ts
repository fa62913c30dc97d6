// A real egress proxy for the benchmarks, in this process, wired like control-plane/test/egress-harness.ts:
// test-only knobs route api.latch.test to the benchmark origin and trust the test CA. Plus the
// control plane's own ticket minter, to pre-mint the single-use tickets k6 spends.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallSpec } from "@latch/proto/egress";
import { sealValue } from "@latch/shared/crypto/seal";
import { MAX_TICKET_LIFETIME_MS } from "@latch/shared/tickets/ticket-signature";
import { loadOrCreateTicketKey } from "../../control-plane/src/egress/ticket-key.ts";
import { createTicketMinter, type TicketMinter } from "../../control-plane/src/egress/tickets.ts";
import { loadEgressConfig } from "../../egress-proxy/src/config.ts";
import { type RunningEgressProxy, startEgressProxy } from "../../egress-proxy/src/egress-proxy.ts";
import { createProxyLogger } from "../../egress-proxy/src/logger.ts";
import { ORIGIN_HOST, TEST_CA_PATH } from "./origin-process.ts";

export interface BenchProxy {
  proxy: RunningEgressProxy;
  address: string;
  minter: TicketMinter;
  close(): Promise<void>;
}

/**
 * Starts the proxy on 127.0.0.1:0 (plaintext gRPC, loopback only) with its data in a temporary
 * directory. Its log (the proxy's logger, level info: one line per call, batched as in
 * production) goes to `logPath`.
 */
export async function startBenchProxy(options: { originPort: number; logPath: string }): Promise<BenchProxy> {
  const dataDir = mkdtempSync(join(tmpdir(), "latch-bench-egress-"));
  const ticketKey = loadOrCreateTicketKey(dataDir);
  // The proxy's own logger, batching as in production, to a file: one info line per call.
  const { logger, flush } = createProxyLogger({ level: "info", file: options.logPath });
  const config = loadEgressConfig({
    NODE_ENV: "test",
    DATA_DIR: dataDir,
    EGRESS_LISTEN: "127.0.0.1:0",
    EGRESS_CONNECT_TO: `${ORIGIN_HOST}:443:127.0.0.1:${options.originPort}`,
    EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
    EGRESS_EXTRA_CA: TEST_CA_PATH,
  });
  const proxy = await startEgressProxy(config, logger);
  const minter = createTicketMinter({ key: ticketKey, issuer: "loadtest", audience: config.EGRESS_AUDIENCE });
  return {
    proxy,
    address: `127.0.0.1:${proxy.port}`,
    minter,
    async close() {
      await proxy.close();
      flush();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * What an approved `GET https://api.latch.test/v1/echo` with a bearer credential looks like on the
 * wire: the secret sealed to the proxy's key, plus one more sealed value in the redaction list
 * (so the redactor builds and scans for two values, as with a minted token).
 */
export async function echoCallSpec(proxy: RunningEgressProxy, secret: string): Promise<CallSpec> {
  const sealed = await sealValue(proxy.sealingKey, secret);
  const extra = await sealValue(proxy.sealingKey, `${secret}_refresh`);
  return {
    credential: {
      itemName: "BENCH_API_KEY",
      keyId: sealed.keyId,
      sealedValue: Buffer.from(sealed.sealed),
      username: "",
    },
    inject: "bearer",
    host: ORIGIN_HOST,
    allowedHosts: [ORIGIN_HOST],
    method: "GET",
    path: "/v1/echo",
    body: Buffer.alloc(0),
    contentType: "",
    timeoutMs: 10_000,
    headers: [],
    redact: [
      { itemName: "BENCH_REFRESH", keyId: extra.keyId, sealedValue: Buffer.from(extra.sealed), username: "" },
    ],
  };
}

/**
 * Mints `count` call tickets for `call` and writes them as JSON for k6's SharedArray:
 * `{ tickets: [{ payload, signature, key_id }] }`, bytes in base64 (protojson's mapping).
 * They live the longest a proxy accepts (10 minutes), so mint right before the run.
 */
export function writeTicketFile(minter: TicketMinter, call: CallSpec, count: number, path: string): void {
  const tickets = new Array<{ payload: string; signature: string; key_id: string }>(count);
  for (let i = 0; i < count; i++) {
    const signed = minter.mintCallTicket(call, { ttlMs: MAX_TICKET_LIFETIME_MS });
    tickets[i] = {
      payload: Buffer.from(signed.payload).toString("base64"),
      signature: Buffer.from(signed.signature).toString("base64"),
      key_id: signed.keyId,
    };
  }
  writeFileSync(path, JSON.stringify({ tickets }));
}
