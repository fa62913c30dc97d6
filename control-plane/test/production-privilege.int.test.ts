// The control plane holds no key that opens a stored secret (DECISIONS "The two tiers"), enforced
// at start: in production it refuses to start a proxy of its own (that proxy would keep its
// keyring in the control plane's DATA_DIR, readable by its user) and refuses a DATA_DIR where a
// sealing keyring is readable; with a proxy of its own at EGRESS_URL it starts. The two tiers talk
// gRPC over mTLS only (DECISIONS: plaintext only on loopback in development and tests): each
// refuses to start in production without its certificate files, even on loopback.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { EXIT_START_REFUSED } from "@latch/shared/process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sealingKeyPath } from "../../egress-proxy/src/keys/sealing-keys.ts";
import { createEgressClient } from "../src/egress/egress-client.ts";
import { loadOrCreateTicketKey, ticketKeyPaths } from "../src/egress/ticket-key.ts";
import {
  controlPlaneMtlsEnv,
  type ProductionProxy,
  proxyMtlsEnv,
  runUntilReady,
  startControlPlaneInProduction,
  startProductionProxy,
} from "./production-start.ts";

const PROXY_MAIN = new URL("../../egress-proxy/src/main.ts", import.meta.url).pathname;

// PGlite: the database is not what these checks are about (database-role.int.test.ts is).
describe("the control plane in production", () => {
  let proxy: ProductionProxy;

  beforeAll(async () => {
    proxy = await startProductionProxy();
  }, 60_000);

  afterAll(async () => {
    await proxy?.stop();
  });

  it("refuses to start a proxy alongside, in one sentence", async () => {
    const refused = await startControlPlaneInProduction({});
    expect(refused.outcome).toBe(1);
    expect(refused.stderr.trim()).toBe(
      "Latch cannot start: the egress proxy runs as its own process in production; set EGRESS_URL.",
    );
  }, 60_000);

  it("refuses a DATA_DIR where it can read a sealing keyring, and starts once it is gone", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "latch-prod-shared-"));
    // Where a proxy sharing this DATA_DIR (npm start's) writes its keyring.
    const keyring = sealingKeyPath(dataDir);
    mkdirSync(dirname(keyring), { recursive: true });
    writeFileSync(keyring, '{"keys":["not-a-real-key"]}', { mode: 0o600 });
    const env = {
      DATA_DIR: dataDir,
      EGRESS_URL: proxy.address,
      TICKET_SIGNING_KEY_FILE: proxy.ticketKeyFile,
    };
    const refused = await startControlPlaneInProduction(env);
    expect(refused.outcome).toBe(1);
    expect(refused.stderr.trim()).toBe(
      "Latch cannot start: DATA_DIR holds the egress proxy's sealing keyring (egress/sealing-keys.json) and this process can read it, but the control plane never holds a key that opens a stored secret; keep the keyring on the proxies' own volume only.",
    );
    expect(refused.stderr).not.toContain("not-a-real-key");

    rmSync(keyring);
    const started = await startControlPlaneInProduction(env);
    expect(started.outcome, started.stderr).toBe("ready");
  }, 120_000);

  it("reaches the production proxy with the control plane's certificate, and not in plaintext", async () => {
    const tls = controlPlaneMtlsEnv();
    const overMtls = createEgressClient({
      address: proxy.address,
      tls: {
        caPath: tls.EGRESS_CLIENT_TLS_CA!,
        certPath: tls.EGRESS_CLIENT_TLS_CERT!,
        keyPath: tls.EGRESS_CLIENT_TLS_KEY!,
      },
    });
    const plaintext = createEgressClient({ address: proxy.address });
    try {
      expect((await overMtls.getInfo()).sealingKeyId).not.toBe("");
      await expect(plaintext.getInfo()).rejects.toMatchObject({ code: "egress_unavailable" });
    } finally {
      overMtls.close();
      plaintext.close();
    }
  }, 60_000);

  it("refuses to reach a proxy on loopback without mTLS, naming the three variables", async () => {
    const refused = await startControlPlaneInProduction({
      EGRESS_URL: proxy.address,
      TICKET_SIGNING_KEY_FILE: proxy.ticketKeyFile,
      EGRESS_CLIENT_TLS_CA: "",
      EGRESS_CLIENT_TLS_CERT: "",
      EGRESS_CLIENT_TLS_KEY: "",
    });
    expect(refused.outcome).toBe(1);
    expect(refused.stderr.trim()).toBe(
      "Latch cannot start: EGRESS_CLIENT_TLS_CA, EGRESS_CLIENT_TLS_CERT and EGRESS_CLIENT_TLS_KEY must be set when NODE_ENV=production: the control plane reaches the egress proxy over mTLS only, on loopback too.",
    );
  }, 60_000);

  it("has no proxy listen in plaintext on loopback, and one with its mTLS files starts", async () => {
    const keys = mkdtempSync(join(tmpdir(), "latch-prod-keys-"));
    loadOrCreateTicketKey(keys);
    const env = {
      PATH: process.env.PATH,
      NODE_ENV: "production",
      DATA_DIR: mkdtempSync(join(tmpdir(), "latch-prod-egress-")),
      EGRESS_LISTEN: "127.0.0.1:0",
      EGRESS_TICKET_PUBLIC_KEYS: readFileSync(ticketKeyPaths(keys).publicPath, "utf8").trim(),
    };
    const refused = await runUntilReady(PROXY_MAIN, env, "LATCH_EGRESS_READY", 30_000);
    expect(refused.outcome).toBe(EXIT_START_REFUSED);
    expect(refused.stderr.trim()).toBe(
      "Latch's egress proxy cannot start: EGRESS_TLS_CERT, EGRESS_TLS_KEY and EGRESS_TLS_CLIENT_CA must be set when NODE_ENV=production: the gRPC listener takes calls over mTLS only, on loopback too.",
    );
    const started = await runUntilReady(
      PROXY_MAIN,
      { ...env, ...proxyMtlsEnv() },
      "LATCH_EGRESS_READY",
      30_000,
    );
    expect(started.outcome, started.stderr).toBe("ready");
  }, 60_000);
});
