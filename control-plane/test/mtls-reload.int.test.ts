// The inter-tier mTLS as deployments run it (DECISIONS "Faults and isolation in deployments"):
// certificates renewed in place are served and presented on the next handshake with no restart,
// on both sides, and the proxy takes calls only from a client certificate naming the control
// plane (EGRESS_CLIENT_IDENTITY), not from any certificate of the same CA.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, createServer as createTlsServer, type Server as TlsServer } from "node:tls";
import { credentials, Metadata } from "@grpc/grpc-js";
import { HealthClient } from "@latch/proto/health";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadEgressConfig } from "../../egress-proxy/src/config.ts";
import { type RunningEgressProxy, startEgressProxy } from "../../egress-proxy/src/egress-proxy.ts";
import { createEgressClient, type EgressClient } from "../src/egress/egress-client.ts";
import { loadOrCreateTicketKey } from "../src/egress/ticket-key.ts";
import { createTestPki, type TestPki } from "./pki.ts";

let pki: TestPki;
let proxy: RunningEgressProxy;
let client: EgressClient;
const clients: EgressClient[] = [];
const SERVER_SANS = ["DNS:localhost", "IP:127.0.0.1"];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const file = (name: string) => join(pki.dir, name);

function clientOf(name: string, address = `localhost:${proxy.port}`): EgressClient {
  const made = createEgressClient({
    address,
    tls: {
      caPath: pki.caPath,
      certPath: file(`${name}.pem`),
      keyPath: file(`${name}-key.pem`),
      refreshMs: 200,
    },
  });
  clients.push(made);
  return made;
}

/** A fresh TLS handshake with the proxy: the serial of the certificate it serves now. */
function servedSerial(): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(
      {
        host: "127.0.0.1",
        port: proxy.port,
        servername: "localhost",
        ca: readFileSync(pki.caPath),
        cert: readFileSync(file("control-plane.pem")),
        key: readFileSync(file("control-plane-key.pem")),
        ALPNProtocols: ["h2"],
      },
      () => {
        resolve(socket.getPeerCertificate().serialNumber.toUpperCase());
        socket.destroy();
      },
    );
    socket.once("error", reject);
  });
}

beforeAll(async () => {
  pki = createTestPki();
  pki.issue("egress", SERVER_SANS, "serverAuth");
  pki.issue("control-plane", ["DNS:latch-control-plane"], "clientAuth");
  const dataDir = mkdtempSync(join(tmpdir(), "latch-mtls-"));
  loadOrCreateTicketKey(dataDir);
  const config = loadEgressConfig({
    NODE_ENV: "test",
    DATA_DIR: dataDir,
    EGRESS_LISTEN: "127.0.0.1:0",
    EGRESS_TLS_CERT: file("egress.pem"),
    EGRESS_TLS_KEY: file("egress-key.pem"),
    EGRESS_TLS_CLIENT_CA: pki.caPath,
    EGRESS_TLS_REFRESH_MS: "200",
  });
  proxy = await startEgressProxy(config, pino({ level: "silent" }));
  client = clientOf("control-plane");
});

afterAll(async () => {
  for (const c of clients) c.close();
  await proxy?.close();
});

describe("mTLS files renewed in place", () => {
  it("the proxy serves a renewed certificate on the next handshake, without a restart", async () => {
    const before = await servedSerial();
    const { replicaId } = await client.getInfo();
    const renewed = pki.issue("egress", SERVER_SANS, "serverAuth");
    expect(renewed).not.toBe(before);
    let served = before;
    for (let i = 0; i < 50 && served !== renewed; i++) {
      await sleep(100);
      served = await servedSerial();
    }
    expect(served).toBe(renewed);
    // The same process, and the control plane's calls carry on.
    expect((await client.getInfo()).replicaId).toBe(replicaId);
    const fresh = clientOf("control-plane");
    expect((await fresh.getInfo()).replicaId).toBe(replicaId);
  });

  it("the control plane presents a renewed client certificate on its next connection", async () => {
    pki.issue("renewing-plane", ["DNS:latch-control-plane"], "clientAuth");
    const seen: string[] = [];
    // A TLS listener that notes each client certificate and hangs up, so the client dials again.
    const server: TlsServer = createTlsServer(
      {
        cert: readFileSync(file("egress.pem")),
        key: readFileSync(file("egress-key.pem")),
        ca: readFileSync(pki.caPath),
        requestCert: true,
        rejectUnauthorized: true,
        ALPNProtocols: ["h2"],
      },
      (socket) => {
        seen.push(socket.getPeerCertificate().serialNumber.toUpperCase());
        socket.destroy();
      },
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    const watching = clientOf("renewing-plane", `localhost:${port}`);
    try {
      for (let i = 0; i < 50 && seen.length === 0; i++) await sleep(100);
      const first = seen[0];
      expect(first).toBeDefined();
      const renewed = pki.issue("renewing-plane", ["DNS:latch-control-plane"], "clientAuth");
      for (let i = 0; i < 80 && !seen.includes(renewed); i++) await sleep(100);
      expect(seen).toContain(renewed);
      expect(renewed).not.toBe(first);
    } finally {
      watching.close();
      server.close();
    }
  });
});

describe("the client certificate must name the control plane", () => {
  it("refuses a certificate of the same CA issued to another identity, health checks included", async () => {
    pki.issue("intruder", ["DNS:intruder.latch.test", "URI:spiffe://latch.test/intruder"], "clientAuth");
    const intruder = clientOf("intruder");
    await expect(intruder.getInfo()).rejects.toMatchObject({ code: "forbidden" });
    const health = new HealthClient(
      `127.0.0.1:${proxy.port}`,
      credentials.createSsl(
        readFileSync(pki.caPath),
        readFileSync(file("intruder-key.pem")),
        readFileSync(file("intruder.pem")),
      ),
      { "grpc.ssl_target_name_override": "localhost" },
    );
    const code = await new Promise<number | undefined>((resolve) =>
      health.check({ service: "" }, new Metadata(), { deadline: Date.now() + 3_000 }, (error) =>
        resolve(error?.code),
      ),
    );
    health.close();
    expect(code).toBe(7); // PERMISSION_DENIED
    // The control plane's own certificate still works.
    expect((await client.getInfo()).sealingKeyId).toBeTruthy();
  });
});
