// Test harness: the two tiers started as production starts them, each its own process with its own
// DATA_DIR: an egress proxy that trusts the control plane's ticket key, and main.ts at EGRESS_URL,
// talking gRPC over mTLS as every production start must (certificates from the test PKI, pki.ts).
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadOrCreateTicketKey, ticketKeyPaths } from "../src/egress/ticket-key.ts";
import { createTestPki, type TestPki } from "./pki.ts";

const CONTROL_PLANE_MAIN = new URL("../src/main.ts", import.meta.url).pathname;
const PROXY_MAIN = new URL("../../egress-proxy/src/main.ts", import.meta.url).pathname;

export interface ProductionProxy {
  /** EGRESS_URL for the control plane (localhost, a name its certificate carries). */
  address: string;
  /** TICKET_SIGNING_KEY_FILE: the key the proxy trusts, mounted as the chart mounts it. */
  ticketKeyFile: string;
  stop(): Promise<void>;
}

let pki: TestPki | undefined;

/** One inter-tier CA for this test file: the proxy's server certificate and the control plane's. */
function interTierPki(): TestPki {
  if (!pki) {
    pki = createTestPki();
    pki.issue("egress", ["DNS:localhost", "IP:127.0.0.1", "IP:::1"], "serverAuth");
    // The identity the proxy takes calls from by default (EGRESS_CLIENT_IDENTITY).
    pki.issue("control-plane", ["DNS:latch-control-plane"], "clientAuth");
  }
  return pki;
}

/** The proxy's mTLS listener files, as the chart mounts them. */
export function proxyMtlsEnv(): Record<string, string> {
  const { dir, caPath } = interTierPki();
  return {
    EGRESS_TLS_CERT: join(dir, "egress.pem"),
    EGRESS_TLS_KEY: join(dir, "egress-key.pem"),
    EGRESS_TLS_CLIENT_CA: caPath,
  };
}

/** The control plane's mTLS client files, of the same CA as the proxy's. */
export function controlPlaneMtlsEnv(): Record<string, string> {
  const { dir, caPath } = interTierPki();
  return {
    EGRESS_CLIENT_TLS_CA: caPath,
    EGRESS_CLIENT_TLS_CERT: join(dir, "control-plane.pem"),
    EGRESS_CLIENT_TLS_KEY: join(dir, "control-plane-key.pem"),
  };
}

/** An egress proxy in production on loopback over mTLS, its keyring in its own DATA_DIR. */
export async function startProductionProxy(): Promise<ProductionProxy> {
  const keys = mkdtempSync(join(tmpdir(), "latch-prod-keys-"));
  loadOrCreateTicketKey(keys);
  const child = spawn(process.execPath, [PROXY_MAIN], {
    env: {
      PATH: process.env.PATH,
      NODE_ENV: "production",
      DATA_DIR: mkdtempSync(join(tmpdir(), "latch-prod-egress-")),
      EGRESS_LISTEN: "127.0.0.1:0",
      ...proxyMtlsEnv(),
      EGRESS_TICKET_PUBLIC_KEYS: readFileSync(ticketKeyPaths(keys).publicPath, "utf8").trim(),
      LOG_LEVEL: "warn",
    },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const port = await new Promise<string>((resolve, reject) => {
    let stdout = "";
    child.stdout!.on("data", (c: Buffer) => {
      stdout += c.toString();
      const ready = /LATCH_EGRESS_READY port=(\d+)/.exec(stdout);
      if (ready) resolve(ready[1]!);
    });
    child.once("exit", (code) => reject(new Error(`the proxy exited with ${code}: ${stderr}`)));
  });
  return {
    // By name, as the certificate is checked against it: an IP literal makes Node warn (DEP0123)
    // on the control plane's stderr, which the refusal tests read whole.
    address: `localhost:${port}`,
    ticketKeyFile: ticketKeyPaths(keys).privatePath,
    stop: () => stopChild(child),
  };
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((done) => {
    if (child.exitCode !== null || child.signalCode !== null) return done();
    child.once("exit", () => done());
    child.kill("SIGTERM");
  });
}

/**
 * Starts `main` with `env`; resolves once it has exited (so no process outlives the test) with how
 * it ended, or "ready" when it printed `readyText` first (then it was stopped), and what it said.
 */
export function runUntilReady(main: string, env: NodeJS.ProcessEnv, readyText: string, timeoutMs: number) {
  const child = spawn(process.execPath, [main], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  return new Promise<{ outcome: "ready" | number | null; stdout: string; stderr: string }>((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    let isReady = false;
    child.stdout.on("data", () => {
      if (isReady || !stdout.includes(readyText)) return;
      isReady = true;
      child.kill("SIGTERM");
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ outcome: isReady ? "ready" : code, stdout, stderr });
    });
  });
}

/**
 * Starts main.ts in production with `env` over a minimal production environment (mTLS client files
 * of the proxy's CA, no EGRESS_URL unless given); resolves with how it ended (or that it came up,
 * then stops it) and what it said. A variable given as "" counts as unset.
 */
export function startControlPlaneInProduction(env: Record<string, string>) {
  return runUntilReady(
    CONTROL_PLANE_MAIN,
    {
      PATH: process.env.PATH,
      NODE_ENV: "production",
      BASE_URL: "http://localhost:8787",
      SMTP_URL: "smtp://127.0.0.1:2525",
      DATA_DIR: mkdtempSync(join(tmpdir(), "latch-prod-cp-")),
      PORT: "0",
      LOG_LEVEL: "warn",
      ...controlPlaneMtlsEnv(),
      ...env,
    },
    "Latch is running",
    90_000,
  );
}
