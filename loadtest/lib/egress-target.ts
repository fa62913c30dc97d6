// One side of bench:egress in a process of its own (forked by egress.ts startEgressTarget): the
// egress proxy, started exactly as production starts it, or the floor forwarder. Each side has its
// own process, as a deployed proxy has, so that neither runs on code V8 compiled for the other's
// objects, nor pays to collect the bench's ticket minting: in one shared process the proxy's first
// run after a switch cost 13-25 % more CPU per call than a second run in a row (loadtest/README.md).
//
//   node egress-target.ts proxy|floor   (environment: BENCH_ORIGIN_PORT, BENCH_SECRET for the
//                                        floor, BENCH_DATA_DIR and BENCH_LOG_PATH for the proxy, and
//                                        BENCH_DNS_SERVER for a proxy that resolves the origin's
//                                        name through DNS instead of a fixed address)
import { type CpuProfile, createProfiler, type Profiler, summarizeProfile } from "./cpu-profile.ts";
import { startFloorForwarder } from "./floor-forwarder.ts";
import { ORIGIN_HOST, TEST_CA_PATH } from "./origin-process.ts";

export type EgressTargetKind = "proxy" | "floor";

/** Parent to child. */
export type EgressTargetCommand =
  | { type: "cpu" }
  | { type: "profile"; action: "resume" | "pause" }
  | { type: "finish-profile"; path: string }
  | { type: "metrics" }
  | { type: "close" };

/** Child to parent. */
export type EgressTargetMessage =
  | {
      type: "ready";
      port: number;
      /** The proxy's only: its sealing key (public) and the audience its tickets must name. */
      sealingKey?: { keyId: string; publicKey: string };
      audience?: string;
    }
  | { type: "cpu"; cpuMs: number }
  | { type: "profiled" }
  | { type: "finished-profile"; summary: string | undefined }
  | { type: "metrics"; text: string }
  | { type: "closed" };

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`egress-target.ts needs ${name}`);
  return value;
}

async function startTarget(kind: EgressTargetKind): Promise<{
  ready: Extract<EgressTargetMessage, { type: "ready" }>;
  metrics(): string;
  close(): Promise<void>;
}> {
  const originPort = Number(required("BENCH_ORIGIN_PORT"));
  if (kind === "floor") {
    const floor = await startFloorForwarder({ originPort, secret: required("BENCH_SECRET") });
    return { ready: { type: "ready", port: floor.port }, metrics: () => "", close: () => floor.close() };
  }
  // Imported here so that the floor's process never loads the proxy's code.
  const { loadEgressConfig } = await import("../../egress-proxy/src/config.ts");
  const { startEgressProxy } = await import("../../egress-proxy/src/egress-proxy.ts");
  const { createProxyLogger } = await import("../../egress-proxy/src/logger.ts");
  // The proxy's own logger, batching as in production, to a file: one info line per call.
  const { logger, flush } = createProxyLogger({ level: "info", file: required("BENCH_LOG_PATH") });
  const dnsServer = process.env.BENCH_DNS_SERVER;
  const config = loadEgressConfig({
    NODE_ENV: "test",
    DATA_DIR: required("BENCH_DATA_DIR"),
    EGRESS_LISTEN: "127.0.0.1:0",
    // With a DNS server, the name is resolved as in production (an empty target) and only the
    // port is the origin's; without, a fixed address.
    ...(dnsServer
      ? { EGRESS_CONNECT_TO: `${ORIGIN_HOST}:443::${originPort}`, EGRESS_DNS_SERVERS: dnsServer }
      : { EGRESS_CONNECT_TO: `${ORIGIN_HOST}:443:127.0.0.1:${originPort}` }),
    EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
    EGRESS_EXTRA_CA: TEST_CA_PATH,
  });
  const proxy = await startEgressProxy(config, logger);
  const { keyId, publicKey } = proxy.sealingKey;
  return {
    ready: {
      type: "ready",
      port: proxy.port,
      sealingKey: { keyId, publicKey: Buffer.from(publicKey).toString("base64") },
      audience: config.EGRESS_AUDIENCE,
    },
    metrics: () => proxy.metrics.render(),
    async close() {
      await proxy.close();
      flush();
    },
  };
}

async function main(): Promise<void> {
  const kind = process.argv[2];
  if (kind !== "proxy" && kind !== "floor") throw new Error("usage: egress-target.ts proxy|floor");
  if (!process.send) throw new Error("egress-target.ts runs as a forked child (see egress.ts)");
  const send = (message: EgressTargetMessage) => process.send?.(message);
  const target = await startTarget(kind);
  let profiler: Profiler | undefined;
  process.on("message", async (command: EgressTargetCommand) => {
    switch (command.type) {
      case "cpu": {
        const cpu = process.cpuUsage();
        send({ type: "cpu", cpuMs: (cpu.user + cpu.system) / 1000 });
        break;
      }
      case "profile":
        profiler ??= await createProfiler();
        await (command.action === "resume" ? profiler.resume() : profiler.pause());
        send({ type: "profiled" });
        break;
      case "finish-profile": {
        const profile: CpuProfile | undefined = await profiler?.finish(command.path);
        send({ type: "finished-profile", summary: profile && summarizeProfile(profile) });
        break;
      }
      case "metrics":
        send({ type: "metrics", text: target.metrics() });
        break;
      case "close":
        await target.close();
        send({ type: "closed" });
        process.disconnect();
        break;
    }
  });
  // The parent going away (Ctrl-C, crash) takes this process with it.
  process.on("disconnect", () => process.exit(0));
  send(target.ready);
}

await main();
