// Test fixture: a fleet of real egress proxy processes on loopback addresses (127.0.0.1, .2, .3, ...)
// sharing one port, one sealing keyring and one ticket key, reached over mTLS under one service
// name that a test DNS server resolves to every replica's address: a headless Service in miniature.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { CallSpec } from "@latch/proto/egress";
import { type SealingPublicKey, sealValue } from "@latch/shared/crypto/seal";
import { type RunningDnsServer, startDnsServer } from "../../egress-proxy/test/dns-server.ts";
import { type OriginHandler, type RunningOrigin, startOrigin } from "../../egress-proxy/test/origin.ts";
import { createEgressClient, type EgressClient } from "../src/egress/egress-client.ts";
import { loadOrCreateTicketKey } from "../src/egress/ticket-key.ts";
import { createTicketMinter, type TicketMinter } from "../src/egress/tickets.ts";

const PROXY_MAIN = new URL("../../egress-proxy/src/main.ts", import.meta.url).pathname;
const MAKE_CERTS = new URL("../../deploy/scripts/make-certs.sh", import.meta.url).pathname;
const PKI_CA = new URL("../../egress-proxy/test/pki/trusted-ca.pem", import.meta.url).pathname;
export const SERVICE_NAME = "egress.latch.test";

export interface ProxyProcess {
  ip: string;
  child: ChildProcess;
  /** Every line the process wrote (pino JSON), for request-id and leak checks. */
  lines: string[];
  /** The replica's admin listener (/metrics, /health, /ready). */
  adminUrl: string;
  /** Execute calls this replica answered, from its own /metrics. */
  answeredCalls(): Promise<number>;
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>;
}

export interface ProxyFleet {
  port: number;
  origin: RunningOrigin;
  dns: RunningDnsServer;
  certDir: string;
  minter: TicketMinter;
  /** A client of the whole fleet, as the control plane builds it. */
  client: EgressClient;
  start(ip: string): Promise<ProxyProcess>;
  /** Points the service name at these addresses. */
  publish(ips: string[]): void;
  /** Waits until the client sees `count` replicas serving (it connects as soon as it is made). */
  waitForServing(count: number, timeoutMs?: number): Promise<void>;
  setHandler(handler: OriginHandler): void;
  callSpec(path: string, overrides?: Partial<CallSpec>): Promise<CallSpec>;
  close(): Promise<void>;
}

function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export async function startProxyFleet(): Promise<ProxyFleet> {
  const root = mkdtempSync(join(tmpdir(), "latch-fleet-"));
  const dataDir = join(root, "data");
  const certDir = join(root, "certs");
  execFileSync("sh", [MAKE_CERTS, certDir, SERVICE_NAME], { stdio: "ignore" });
  const ticketKey = loadOrCreateTicketKey(dataDir);
  const minter = createTicketMinter({ key: ticketKey, issuer: "test", audience: "latch-egress" });
  let handler: OriginHandler = (_req, res) => res.end("ok");
  const origin = await startOrigin((req, res, recorded) => handler(req, res, recorded));
  const dns = await startDnsServer({});
  const port = await freePort("127.0.0.1");
  const metricsPort = await freePort("127.0.0.1");
  const processes: ProxyProcess[] = [];
  let sealingKey: SealingPublicKey | undefined;

  async function start(ip: string): Promise<ProxyProcess> {
    const child = spawn(process.execPath, [PROXY_MAIN], {
      env: {
        PATH: process.env.PATH,
        NODE_ENV: "test",
        LOG_LEVEL: "info",
        DATA_DIR: dataDir,
        EGRESS_LISTEN: `${ip}:${port}`,
        EGRESS_METRICS_LISTEN: `${ip}:${metricsPort}`,
        EGRESS_TLS_CERT: join(certDir, "egress.pem"),
        EGRESS_TLS_KEY: join(certDir, "egress-key.pem"),
        EGRESS_TLS_CLIENT_CA: join(certDir, "ca.pem"),
        EGRESS_DRAIN_TIMEOUT_MS: "10000",
        EGRESS_CONNECT_TO: `api.latch.test:443:127.0.0.1:${origin.port}`,
        EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
        EGRESS_EXTRA_CA: PKI_CA,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const lines: string[] = [];
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    createInterface({ input: child.stderr! }).on("line", (line) => lines.push(line));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`proxy ${ip} did not start:\n${lines.join("\n")}`)),
        30_000,
      );
      createInterface({ input: child.stdout! }).on("line", (line) => {
        lines.push(line);
        if (line.startsWith("LATCH_EGRESS_READY")) {
          clearTimeout(timer);
          resolve();
        }
      });
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`proxy ${ip} exited with ${code}:\n${lines.join("\n")}`));
      });
    });
    const proxy: ProxyProcess = {
      ip,
      child,
      lines,
      exited,
      adminUrl: `http://${ip}:${metricsPort}`,
      async answeredCalls() {
        const text = await (await fetch(`http://${ip}:${metricsPort}/metrics`)).text();
        const match = /latch_egress_calls_total\{outcome="answered"\} (\d+)/.exec(text);
        return match ? Number(match[1]) : 0;
      },
    };
    processes.push(proxy);
    return proxy;
  }

  // The first replica creates the shared sealing keyring; the client learns its public half.
  const client = createEgressClient({
    address: `dns://${dns.server}/${SERVICE_NAME}:${port}`,
    tls: {
      caPath: join(certDir, "ca.pem"),
      certPath: join(certDir, "control-plane.pem"),
      keyPath: join(certDir, "control-plane-key.pem"),
    },
  });

  return {
    port,
    origin,
    dns,
    certDir,
    minter,
    client,
    start,
    publish: (ips) => dns.setPlan(SERVICE_NAME, { A: ips }),
    async waitForServing(count, timeoutMs = 15_000) {
      const started = Date.now();
      while (client.replicaStates().filter((s) => s === "serving").length < count) {
        if (Date.now() - started > timeoutMs) {
          throw new Error(
            `${count} replicas were not serving within ${timeoutMs} ms: ${client.replicaStates()}`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    setHandler: (next) => {
      handler = next;
    },
    async callSpec(path, overrides = {}) {
      // Asked once, as the control plane does: every replica shares the keyring.
      let key: SealingPublicKey | undefined = sealingKey;
      if (!key) {
        const info = await client.getInfo();
        key = { keyId: info.sealingKeyId, publicKey: new Uint8Array(info.sealingPublicKey) };
        sealingKey = key;
      }
      const sealed = await sealValue(key, "sk_fleet_canary_value_0001");
      return {
        credential: {
          itemName: "FLEET_KEY",
          keyId: sealed.keyId,
          sealedValue: Buffer.from(sealed.sealed),
          username: "",
        },
        inject: "bearer",
        host: "api.latch.test",
        allowedHosts: ["api.latch.test"],
        method: "GET",
        path,
        body: Buffer.alloc(0),
        contentType: "",
        timeoutMs: 10_000,
        headers: [],
        redact: [],
        ...overrides,
      };
    },
    async close() {
      client.close();
      for (const proxy of processes) {
        if (proxy.child.exitCode === null && proxy.child.signalCode === null) proxy.child.kill("SIGKILL");
        await proxy.exited;
      }
      await origin.close();
      await dns.close();
    },
  };
}
