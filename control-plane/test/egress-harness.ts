// Test harness: a real egress proxy (in-process, real gRPC on loopback), a real TLS origin with
// the test PKI, a test DNS server, and the control plane's own ticket minter and gRPC client.
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import type { CallSpec } from "@latch/proto/egress";
import { sealValue } from "@latch/shared/crypto/seal";
import pino from "pino";
import { loadEgressConfig } from "../../egress-proxy/src/config.ts";
import { type RunningEgressProxy, startEgressProxy } from "../../egress-proxy/src/egress-proxy.ts";
import { callContextFields } from "../../egress-proxy/src/grpc/call-context.ts";
import {
  type DnsAnswerPlan,
  type RunningDnsServer,
  startDnsServer,
} from "../../egress-proxy/test/dns-server.ts";
import {
  type OriginHandler,
  type RunningOrigin,
  readTestCas,
  startOrigin,
} from "../../egress-proxy/test/origin.ts";
import { createEgressClient, type EgressClient } from "../src/egress/egress-client.ts";
import { loadOrCreateTicketKey, type TicketSigningKey } from "../src/egress/ticket-key.ts";
import { createTicketMinter, type TicketMinter } from "../src/egress/tickets.ts";

/** Every log line either tier wrote during a test, for leak checks. */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.lines.push(chunk.toString("utf8"));
    done();
  }
  text(): string {
    return this.lines.join("");
  }
}

export interface EgressHarness {
  dataDir: string;
  proxy: RunningEgressProxy;
  origin: RunningOrigin;
  dns: RunningDnsServer;
  client: EgressClient;
  minter: TicketMinter;
  ticketKey: TicketSigningKey;
  logs: LogCapture;
  /** Route handler for the origin; tests swap it per case. */
  setHandler(handler: OriginHandler): void;
  /** A CallSpec for api.latch.test with `secret` sealed to the proxy. */
  callSpec(secret: string, overrides?: Partial<CallSpec> & { username?: string }): Promise<CallSpec>;
  close(): Promise<void>;
}

/** A loopback port that was free a moment ago and that nothing listens on now. */
async function freedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export async function startEgressHarness(
  options: {
    dnsAnswers?: Record<string, DnsAnswerPlan>;
    /** Real host names (a fake provider's, AWS's) routed straight to the origin, which answers
     * them with the providers certificate (egress-proxy/test/pki/README.md). */
    providerHosts?: readonly string[];
    /** More EGRESS_CONNECT_TO entries (`host:443:ip:port`): another TLS origin of the test's own. */
    connectTo?: readonly string[];
    /** Host names routed to a loopback port nothing listens on: the connection is refused. */
    closedHosts?: readonly string[];
    /** OTEL_EXPORTER_OTLP_ENDPOINT: the proxy exports its spans there (otlp-receiver.ts). */
    otlpEndpoint?: string;
    /** The shared spent-ticket table (EGRESS_REPLAY_DATABASE_URL) instead of the proxy's memory. */
    replayDatabaseUrl?: string;
    /** EGRESS_SEALING_KEY_REFRESH_MS: how soon a changed key file is read again. */
    sealingKeyRefreshMs?: number;
  } = {},
): Promise<EgressHarness> {
  const dataDir = mkdtempSync(join(tmpdir(), "latch-egress-"));
  const extraCa = join(dataDir, "test-cas.pem");
  writeFileSync(extraCa, readTestCas());
  const ticketKey = loadOrCreateTicketKey(dataDir);
  let handler: OriginHandler = (_req, res) => res.end("ok");
  const origin = await startOrigin((req, res, recorded) => handler(req, res, recorded));
  const dns = await startDnsServer(options.dnsAnswers ?? {});
  const closedPort = options.closedHosts?.length ? await freedPort() : 0;
  const logs = new LogCapture();
  // The mixin of the proxy's main.ts: a call's lines name the request id it came with.
  const logger = pino({ level: "info", mixin: callContextFields }, logs);
  const config = loadEgressConfig({
    NODE_ENV: "test",
    DATA_DIR: dataDir,
    EGRESS_LISTEN: "127.0.0.1:0",
    EGRESS_DNS_SERVERS: dns.server,
    // api.latch.test (and docs.latch.test, where client metadata documents are served) go straight
    // to the origin; dns-*.latch.test names resolve through the test DNS server and only their port
    // is rewritten, so the DNS policy is exercised for real.
    EGRESS_CONNECT_TO: [
      `api.latch.test:443:127.0.0.1:${origin.port}`,
      `docs.latch.test:443:127.0.0.1:${origin.port}`,
      ...(options.providerHosts ?? []).map((name) => `${name}:443:127.0.0.1:${origin.port}`),
      ...(options.connectTo ?? []),
      ...(options.closedHosts ?? []).map((name) => `${name}:443:127.0.0.1:${closedPort}`),
      ...Object.keys(options.dnsAnswers ?? {}).map((name) => `${name}:443::${origin.port}`),
    ].join(","),
    EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
    EGRESS_EXTRA_CA: extraCa,
    ...(options.otlpEndpoint ? { OTEL_EXPORTER_OTLP_ENDPOINT: options.otlpEndpoint } : {}),
    ...(options.replayDatabaseUrl ? { EGRESS_REPLAY_DATABASE_URL: options.replayDatabaseUrl } : {}),
    ...(options.sealingKeyRefreshMs
      ? { EGRESS_SEALING_KEY_REFRESH_MS: String(options.sealingKeyRefreshMs) }
      : {}),
  });
  const proxy = await startEgressProxy(config, logger);
  const client = createEgressClient({ address: `127.0.0.1:${proxy.port}` });
  const minter = createTicketMinter({ key: ticketKey, issuer: "test", audience: config.EGRESS_AUDIENCE });
  return {
    dataDir,
    proxy,
    origin,
    dns,
    client,
    minter,
    ticketKey,
    logs,
    setHandler: (next) => {
      handler = next;
    },
    async callSpec(secret, overrides = {}) {
      const sealed = await sealValue(proxy.sealingKey, secret);
      const { username, ...rest } = overrides;
      return {
        credential: {
          itemName: "TEST_KEY",
          keyId: sealed.keyId,
          sealedValue: Buffer.from(sealed.sealed),
          username: username ?? "",
        },
        inject: "bearer",
        host: "api.latch.test",
        allowedHosts: ["api.latch.test", ...Object.keys(options.dnsAnswers ?? {})],
        method: "GET",
        path: "/v1/echo",
        body: Buffer.alloc(0),
        contentType: "",
        timeoutMs: 10_000,
        headers: [],
        redact: [],
        ...rest,
      };
    },
    async close() {
      client.close();
      await proxy.close();
      await origin.close();
      await dns.close();
    },
  };
}
