// bench:egress's two subjects, each in a process of its own (egress-target.ts): the real egress
// proxy, wired like control-plane/test/egress-harness.ts (test-only knobs route api.latch.test to
// the benchmark origin and trust the test CA), and the floor forwarder. Plus, in the bench's own
// process, the control plane's ticket minter, to pre-mint the single-use tickets k6 spends.
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallSpec } from "@latch/proto/egress";
import { type SealingPublicKey, sealValue } from "@latch/shared/crypto/seal";
import { MAX_TICKET_LIFETIME_MS } from "@latch/shared/tickets/ticket-signature";
import { loadOrCreateTicketKey } from "../../control-plane/src/egress/ticket-key.ts";
import { createTicketMinter, type TicketMinter } from "../../control-plane/src/egress/tickets.ts";
import { nextMessage } from "./child-ipc.ts";
import type { EgressTargetCommand, EgressTargetKind, EgressTargetMessage } from "./egress-target.ts";
import { ORIGIN_HOST } from "./origin-process.ts";

export interface EgressTarget {
  kind: EgressTargetKind;
  /** host:port of its plaintext gRPC listener on 127.0.0.1. */
  address: string;
  pid: number;
  /** Its process's CPU time so far (user + system, every thread), in ms. */
  cpuMs(): Promise<number>;
  /** Starts or stops sampling its CPU profile; finishProfile writes it and returns a summary. */
  profile(action: "resume" | "pause"): Promise<void>;
  finishProfile(path: string): Promise<string | undefined>;
  /** The proxy's Prometheus text (empty for the floor). */
  metrics(): Promise<string>;
  close(): Promise<void>;
}

export interface BenchProxy extends EgressTarget {
  sealingKey: SealingPublicKey;
  /** Mints tickets the proxy accepts, with the control plane's own code, in the bench's process. */
  minter: TicketMinter;
}

/**
 * Forks the proxy: plaintext gRPC on 127.0.0.1:0, its data (and the ticket signing key, whose
 * public half it trusts) in a temporary directory, its log (level info: one line per call,
 * batched as in production) in `logPath`.
 */
export async function startBenchProxy(options: {
  originPort: number;
  logPath: string;
  /** `127.0.0.1:<port>`: resolve the origin's name through this DNS server on every call. */
  dnsServer?: string;
}): Promise<BenchProxy> {
  const dataDir = mkdtempSync(join(tmpdir(), "latch-bench-egress-"));
  const ticketKey = loadOrCreateTicketKey(dataDir);
  const { target, ready } = await forkTarget("proxy", {
    BENCH_ORIGIN_PORT: String(options.originPort),
    BENCH_DATA_DIR: dataDir,
    BENCH_LOG_PATH: options.logPath,
    ...(options.dnsServer ? { BENCH_DNS_SERVER: options.dnsServer } : {}),
  });
  if (!ready.sealingKey || !ready.audience)
    throw new Error("the bench proxy sent no sealing key or audience");
  return {
    ...target,
    sealingKey: {
      keyId: ready.sealingKey.keyId,
      publicKey: Buffer.from(ready.sealingKey.publicKey, "base64"),
    },
    minter: createTicketMinter({ key: ticketKey, issuer: "loadtest", audience: ready.audience }),
    async close() {
      await target.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Forks the floor (floor-forwarder.ts), answering with `Authorization: Bearer <secret>`. */
export async function startBenchFloor(options: {
  originPort: number;
  secret: string;
}): Promise<EgressTarget> {
  const { target } = await forkTarget("floor", {
    BENCH_ORIGIN_PORT: String(options.originPort),
    BENCH_SECRET: options.secret,
  });
  return target;
}

async function forkTarget(
  kind: EgressTargetKind,
  env: Record<string, string>,
): Promise<{ target: EgressTarget; ready: Extract<EgressTargetMessage, { type: "ready" }> }> {
  const child = fork(new URL("./egress-target.ts", import.meta.url).pathname, [kind], {
    execPath: process.execPath,
    env: { ...process.env, ...env },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const who = `the bench ${kind}`;
  const ask = <T extends EgressTargetMessage["type"]>(command: EgressTargetCommand, reply: T) => {
    const answer = nextMessage<EgressTargetMessage, T>(child, reply, who);
    child.send(command);
    return answer;
  };
  const ready = await nextMessage<EgressTargetMessage, "ready">(child, "ready", who);
  const target: EgressTarget = {
    kind,
    address: `127.0.0.1:${ready.port}`,
    pid: child.pid ?? -1,
    cpuMs: async () => (await ask({ type: "cpu" }, "cpu")).cpuMs,
    profile: async (action) => void (await ask({ type: "profile", action }, "profiled")),
    finishProfile: async (path) => (await ask({ type: "finish-profile", path }, "finished-profile")).summary,
    metrics: async () => (await ask({ type: "metrics" }, "metrics")).text,
    close: () => closeChild(child, who),
  };
  return { target, ready };
}

async function closeChild(child: ChildProcess, who: string): Promise<void> {
  if (child.exitCode !== null || !child.connected) return;
  const exited = once(child, "exit");
  const closed = nextMessage<EgressTargetMessage, "closed">(child, "closed", who).catch(() => undefined);
  child.send({ type: "close" } satisfies EgressTargetCommand);
  await closed;
  await exited;
}

/**
 * What an approved `GET https://api.latch.test/v1/echo` with a bearer credential looks like on the
 * wire: the secret sealed to the proxy's key, plus one more sealed value in the redaction list
 * (so the redactor builds and scans for two values, as with a minted token).
 */
export async function echoCallSpec(sealingKey: SealingPublicKey, secret: string): Promise<CallSpec> {
  const sealed = await sealValue(sealingKey, secret);
  const extra = await sealValue(sealingKey, `${secret}_refresh`);
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

/** The organisation the bench's tickets act for, shaped as the control plane's ids (newId("org")). */
const BENCH_ORGANISATION_ID = "org_b3nch0rgan1sat10";

/**
 * Mints `count` call tickets for `call` and writes them as JSON for k6's SharedArray:
 * `{ tickets: [{ payload, signature, key_id }] }`, bytes in base64 (protojson's mapping).
 * They live the longest a proxy accepts (10 minutes), so mint right before the run.
 */
export function writeTicketFile(minter: TicketMinter, call: CallSpec, count: number, path: string): void {
  const tickets = new Array<{ payload: string; signature: string; key_id: string }>(count);
  for (let i = 0; i < count; i++) {
    // One organisation, as the hosted control plane names on every call ticket: the proxy's
    // per-organisation pool choice is part of the CPU measured.
    const signed = minter.mintCallTicket(call, {
      organisationId: BENCH_ORGANISATION_ID,
      ttlMs: MAX_TICKET_LIFETIME_MS,
    });
    tickets[i] = {
      payload: Buffer.from(signed.payload).toString("base64"),
      signature: Buffer.from(signed.signature).toString("base64"),
      key_id: signed.keyId,
    };
  }
  writeFileSync(path, JSON.stringify({ tickets }));
}
