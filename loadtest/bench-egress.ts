// npm run bench:egress: the egress proxy's gRPC Execute path under k6, next to direct HTTPS calls
// to the same origin and a bare forwarder (the floor) behind the same gRPC service, in the same run.
// Prints req/s, p50 and p99 of all three, the latency the proxy adds over direct, and the proxy's
// CPU per call against the floor's.
//
//   npm run bench:egress -- [--vus 1,4,16] [--direct-iterations N] [--proxy-iterations N] [--warmup N]
//                           [--rounds N] [--cpu-prof] [--dns-ttl SECONDS]
//
// The origin, the proxy and the floor each run in a process of their own (only one of the last two
// has calls at a time), k6 in another; this one mints the tickets. The proxy's and the floor's
// measured calls are split into rounds run in turn (proxy, floor, floor, proxy, ...), so that both
// see the same machine. See loadtest/README.md.
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { startDnsServer } from "../egress-proxy/test/dns-server.ts";
import {
  type EgressTarget,
  echoCallSpec,
  startBenchFloor,
  startBenchProxy,
  writeTicketFile,
} from "./lib/egress.ts";
import {
  ensureK6,
  figuresOf,
  formatTable,
  K6_VERSION,
  LOADTEST_DIR,
  RESULTS_DIR,
  runK6,
  type ScenarioFigures,
  tail,
  throughputRatio,
} from "./lib/k6.ts";
import { ORIGIN_HOST, startOriginProcess, TEST_CA_PATH } from "./lib/origin-process.ts";

const { values: args } = parseArgs({
  options: {
    vus: { type: "string", default: "1,4,16" },
    "direct-iterations": { type: "string", default: "20000" },
    // Also the floor's: both answer the same gRPC calls.
    "proxy-iterations": { type: "string", default: "12000" },
    // Long enough for V8 to have compiled the proxy's hot code before the measured run: after
    // 300 calls its compiler threads were still 12 % of the proxy's CPU (loadtest/README.md).
    warmup: { type: "string", default: "3000" },
    // The proxy's and the floor's measured calls, split into this many runs each, taken in turn
    // (ABBA): what the machine does meanwhile (another VM, the clock) falls on both alike.
    rounds: { type: "string", default: "4" },
    // Profiles the proxy's process during its measured runs and the floor's during its own.
    "cpu-prof": { type: "boolean", default: false },
    // Also a proxy that resolves the origin's name through a loopback DNS server whose answers
    // live this many seconds (0: asked on every call), next to the one dialling a fixed address.
    "dns-ttl": { type: "string" },
  },
});

function positiveInt(name: string, text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, got ${text}`);
  return n;
}

const vusLevels = args.vus.split(",").map((v) => positiveInt("vus", v.trim()));
const directIterations = positiveInt("direct-iterations", args["direct-iterations"]);
const proxyIterations = positiveInt("proxy-iterations", args["proxy-iterations"]);
const warmupIterations = positiveInt("warmup", args.warmup);
const rounds = positiveInt("rounds", args.rounds);
if (proxyIterations % rounds !== 0) {
  throw new Error(`--proxy-iterations (${proxyIterations}) must split evenly into --rounds (${rounds})`);
}
const dnsTtl = args["dns-ttl"] === undefined ? undefined : Number(args["dns-ttl"]);
if (dnsTtl !== undefined && !(Number.isInteger(dnsTtl) && dnsTtl >= 0 && dnsTtl <= 3600)) {
  throw new Error(`--dns-ttl takes whole seconds from 0 to 3600, got ${args["dns-ttl"]}`);
}

const PROTO_ROOT = new URL("../proto", import.meta.url).pathname;
const DIRECT_SCRIPT = join(LOADTEST_DIR, "k6", "egress-direct.js");
const PROXY_SCRIPT = join(LOADTEST_DIR, "k6", "egress-proxy.js");

const SCENARIOS = {
  proxy: "proxy (gRPC Execute)",
  "proxy-dns": "proxy, names through DNS",
  floor: "floor (bare forwarder)",
} as const;

/** Why the bench fails, collected across runs so that every problem is reported. */
const problems: string[] = [];

async function main(): Promise<void> {
  ensureK6();
  mkdirSync(RESULTS_DIR, { recursive: true });
  console.log(
    `bench:egress  k6 ${K6_VERSION}, node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model ?? "?"})`,
  );

  const loadBefore = loadavg()[0] ?? 0;
  if (loadBefore > 0.5) {
    console.log(
      `note: load average ${loadBefore.toFixed(2)} before the run; other work on this machine makes the figures noisy`,
    );
  }

  const secret = `sk_bench_${randomBytes(16).toString("hex")}`;
  const origin = await startOriginProcess();
  const bench = await startBenchProxy({
    originPort: origin.port,
    logPath: join(RESULTS_DIR, "bench-egress.proxy.log"),
  });
  const floor = await startBenchFloor({ originPort: origin.port, secret });
  const call = await echoCallSpec(bench.sealingKey, secret);
  // The DNS server answers the origin's name with 127.0.0.1 (A only: an empty AAAA answer).
  const dnsServer =
    dnsTtl === undefined
      ? undefined
      : await startDnsServer({ [ORIGIN_HOST]: { A: ["127.0.0.1"], ttl: dnsTtl } });
  const dnsBench = dnsServer
    ? await startBenchProxy({
        originPort: origin.port,
        logPath: join(RESULTS_DIR, "bench-egress.proxy-dns.log"),
        dnsServer: dnsServer.server,
      })
    : undefined;
  const dnsCall = dnsBench && (await echoCallSpec(dnsBench.sealingKey, secret));
  console.log(
    `origin https://api.latch.test:${origin.port} (pid ${origin.pid}), proxy grpc ${bench.address}` +
      ` (pid ${bench.pid}), floor grpc ${floor.address} (pid ${floor.pid})`,
  );

  const directVars = { ORIGIN_PORT: origin.port, SECRET: secret };
  const directEnv = { SSL_CERT_FILE: TEST_CA_PATH };
  const ticketsFile = join(RESULTS_DIR, "bench-egress.tickets.json");
  const grpcVars = { PROTO_ROOT, TICKETS_FILE: ticketsFile, SECRET: secret };

  const isProfiling = args["cpu-prof"];

  /**
   * One k6 run, with the origin's CPU time around it and, for a proxied run, the target's (the
   * proxy's or the floor's); the target profiled when asked.
   */
  async function measured(run: Parameters<typeof runK6>[0], target?: EgressTarget, isProfiled = false) {
    const originBefore = await origin.stats();
    if (isProfiled) await target?.profile("resume");
    const cpuBefore = (await target?.cpuMs()) ?? 0;
    const started = performance.now();
    const result = await runK6(run);
    const wallMs = performance.now() - started;
    const cpuAfter = (await target?.cpuMs()) ?? 0;
    if (isProfiled) await target?.profile("pause");
    const originAfter = await origin.stats();
    return {
      result,
      wallMs,
      targetCpuMs: cpuAfter - cpuBefore,
      originRequests: originAfter.requests - originBefore.requests,
      originCpuMs: originAfter.cpuMs - originBefore.cpuMs,
    };
  }

  async function direct(name: string, vus: number, iterations: number): Promise<Run> {
    const m = await measured({
      name,
      script: DIRECT_SCRIPT,
      vars: { ...directVars, VUS: vus, ITERATIONS: iterations },
      processEnv: directEnv,
    });
    const figures = figuresOf(m.result, { scenario: "direct", vus, latencyMetric: "http_req_duration" });
    check(m.result, figures, iterations);
    return {
      figures,
      originCpuMsPerRequest: m.originCpuMs / m.originRequests,
      k6CpuMsPerRequest: perRequest(m.result.cpuMs, iterations),
    };
  }

  /**
   * One gRPC run of k6/egress-proxy.js against the proxy or the floor, with tickets minted the
   * same way for both (the floor decodes them and never checks or spends them).
   */
  async function proxied(
    target: Target,
    name: string,
    vus: number,
    iterations: number,
    isWarmUp = false,
  ): Promise<ProxiedRun> {
    const proxy =
      target === "proxy-dns" && dnsBench && dnsCall ? { bench: dnsBench, call: dnsCall } : { bench, call };
    writeTicketFile(proxy.bench.minter, proxy.call, iterations, ticketsFile);
    const subject = target === "floor" ? floor : proxy.bench;
    const m = await measured(
      {
        name,
        script: PROXY_SCRIPT,
        vars: {
          ...grpcVars,
          PROXY_ADDR: subject.address,
          VUS: vus,
          ITERATIONS: iterations,
        },
      },
      subject,
      isProfiling && !isWarmUp,
    );
    const figures = figuresOf(m.result, {
      scenario: SCENARIOS[target],
      vus,
      latencyMetric: "grpc_req_duration",
    });
    check(m.result, figures, iterations);
    const ok = m.result.summary.metrics.calls_ok?.values.count ?? 0;
    if (ok !== iterations) problems.push(`${name}: ${ok} of ${iterations} proxied calls passed every check`);
    if (m.originRequests !== iterations) {
      problems.push(
        `${name}: the origin received ${m.originRequests} requests for ${iterations} proxied calls`,
      );
    }
    return {
      figures,
      iterations,
      ok: Math.min(ok, m.originRequests),
      targetCpuMs: m.targetCpuMs,
      wallMs: m.wallMs,
      originCpuMs: m.originCpuMs,
      originRequests: m.originRequests,
      k6CpuMs: m.result.cpuMs,
    };
  }

  /**
   * The proxy's and the floor's measured calls at one level: `rounds` runs of each, in turn and
   * in ABBA order (proxy, floor, floor, proxy, ...), so that a slow spell of the machine falls on
   * both rather than on whichever ran second.
   */
  async function proxyAndFloor(vus: number): Promise<{ proxy: ProxiedRun[]; floor: ProxiedRun[] }> {
    const runs = { proxy: [] as ProxiedRun[], floor: [] as ProxiedRun[] };
    const perRound = proxyIterations / rounds;
    for (let round = 1; round <= rounds; round++) {
      const order = round % 2 === 1 ? (["proxy", "floor"] as const) : (["floor", "proxy"] as const);
      for (const target of order) {
        const suffix = rounds === 1 ? "" : `-r${round}`;
        runs[target].push(await proxied(target, `egress-${target}-${vus}vu${suffix}`, vus, perRound));
      }
    }
    return runs;
  }

  const say = (r: Run) =>
    console.log(
      `  ${r.figures.reqPerSec.toFixed(0)} req/s, p50 ${r.figures.p50Ms.toFixed(2)} ms, p99 ${r.figures.p99Ms.toFixed(2)} ms`,
    );
  const levels: {
    vus: number;
    direct: Run;
    proxy: Run;
    floor: Run;
    proxyDns?: Run;
    roundRatios: number[];
  }[] = [];
  let proxiedOk = 0;
  let proxiedPlanned = 0;
  for (const vus of vusLevels) {
    console.log(`\n${vus} VUs: warm-up (${warmupIterations} iterations each, not reported)...`);
    await direct(`egress-direct-warmup-${vus}vu`, vus, warmupIterations);
    await proxied("proxy", `egress-proxy-warmup-${vus}vu`, vus, warmupIterations, true);
    await proxied("floor", `egress-floor-warmup-${vus}vu`, vus, warmupIterations, true);

    console.log(`${vus} VUs: direct, ${directIterations} iterations...`);
    const d = await direct(`egress-direct-${vus}vu`, vus, directIterations);
    say(d);
    console.log(
      `${vus} VUs: proxy and floor, ${proxyIterations} iterations each in ${rounds} round${rounds === 1 ? "" : "s"}` +
        ` (tickets minted before each run)...`,
    );
    const runs = await proxyAndFloor(vus);
    const p = combine(runs.proxy);
    say(p);
    const f = combine(runs.floor);
    say(f);
    const roundRatios = runs.proxy.map((run, i) => cpuPerCall(run) / cpuPerCall(runs.floor[i]!));
    if (rounds > 1) {
      const each = roundRatios.map((ratio) => `${ratio.toFixed(2)}x`).join(", ");
      console.log(`  proxy CPU per call / floor CPU per call, round by round: ${each}`);
    }
    let proxyDns: Run | undefined;
    if (dnsBench) {
      console.log(
        `${vus} VUs: proxy resolving through DNS (TTL ${dnsTtl} s), ${proxyIterations} iterations...`,
      );
      await proxied("proxy-dns", `egress-proxy-dns-warmup-${vus}vu`, vus, warmupIterations, true);
      proxyDns = combine([await proxied("proxy-dns", `egress-proxy-dns-${vus}vu`, vus, proxyIterations)]);
      say(proxyDns);
    }
    levels.push({ vus, direct: d, proxy: p, floor: f, roundRatios, ...(proxyDns ? { proxyDns } : {}) });
    proxiedOk += p.ok;
    proxiedPlanned += proxyIterations;
  }

  if (isProfiling) {
    for (const target of [bench, floor]) {
      const path = join(RESULTS_DIR, `bench-egress.${target.kind}.cpuprofile`);
      const summary = await target.finishProfile(path);
      if (summary) console.log(`\nCPU profile of the ${target.kind} runs (${path}):\n${summary}`);
    }
  }
  const originStats = await origin.stats();
  const calls = await bench.metrics();
  const dnsQueries = dnsServer?.queries.length ?? 0;
  await floor.close();
  await bench.close();
  await dnsBench?.close();
  await dnsServer?.close();
  await origin.close();

  const rows = levels.flatMap((l) => [
    l.direct.figures,
    l.proxy.figures,
    l.floor.figures,
    ...(l.proxyDns ? [l.proxyDns.figures] : []),
  ]);
  const ratios = levels.map((l) => ({
    vus: l.vus,
    ratio: throughputRatio(l.proxy.figures, l.direct.figures),
  }));
  console.log(`\n${formatTable(rows)}\n`);
  for (const { vus, ratio } of ratios) console.log(`ratio proxy/direct throughput (${vus} VUs): ${ratio}`);
  for (const l of levels) {
    // What an agent feels: the proxy's latency over a direct call at the same concurrency.
    const added = (run: Run) =>
      `p50 ${signedMs(run.figures.p50Ms - l.direct.figures.p50Ms)}, p99 ${signedMs(run.figures.p99Ms - l.direct.figures.p99Ms)}`;
    console.log(
      `added latency at ${l.vus} VU${l.vus === 1 ? "" : "s"}: ${added(l.proxy)} (floor: ${added(l.floor)})`,
    );
  }
  console.log(
    proxiedOk === proxiedPlanned && problems.length === 0
      ? `every proxied call reached the origin and got 200, credential redacted (${proxiedOk}/${proxiedPlanned})`
      : `NOT every proxied call reached the origin with 200 (${proxiedOk}/${proxiedPlanned} did)`,
  );
  console.log("\nCPU time per request, user + system (2 cores shared by k6, proxy and origin):");
  const ms = (v: number | undefined) => (v === undefined ? "?" : `${v.toFixed(3)} ms`);
  for (const l of levels) {
    const p = l.proxy;
    const vus = `${String(l.vus).padStart(3)} VUs`;
    console.log(
      `  ${vus}  direct  k6 ${ms(l.direct.k6CpuMsPerRequest)}, origin ${ms(l.direct.originCpuMsPerRequest)}`,
    );
    console.log(
      `  ${vus}  proxy   k6 ${ms(p.k6CpuMsPerRequest)}, origin ${ms(p.originCpuMsPerRequest)},` +
        ` proxy ${ms(p.proxyCpuMsPerCall)} (busy ${Math.round(100 * (p.proxyCoreShare ?? 0))}% of one core)`,
    );
    const f = l.floor;
    console.log(
      `  ${vus}  floor   k6 ${ms(f.k6CpuMsPerRequest)}, origin ${ms(f.originCpuMsPerRequest)},` +
        ` floor ${ms(f.proxyCpuMsPerCall)} (busy ${Math.round(100 * (f.proxyCoreShare ?? 0))}% of one core)`,
    );
    const directTotal = sum(l.direct.k6CpuMsPerRequest, l.direct.originCpuMsPerRequest);
    const proxyTotal = sum(p.k6CpuMsPerRequest, p.originCpuMsPerRequest, p.proxyCpuMsPerCall);
    if (directTotal !== undefined && proxyTotal !== undefined) {
      // Less sensitive to other load on the machine than req/s: what each request costs in all.
      console.log(
        `  ${vus}  all processes: direct ${ms(directTotal)}, proxy ${ms(proxyTotal)},` +
          ` floor ${ms(sum(f.k6CpuMsPerRequest, f.originCpuMsPerRequest, f.proxyCpuMsPerCall))};` +
          ` CPU ratio direct/proxy ${(directTotal / proxyTotal).toFixed(2)}`,
      );
    }
  }
  // The figure issues 15 and 27 track: what our own work costs over the cheapest forwarder of this
  // stack. Issue 27's targets: at most 1.6x at 1 VU and 1.8x at 16 VUs (none set between).
  const floorRatios = levels.map((l) => ({
    vus: l.vus,
    ratio: (l.proxy.proxyCpuMsPerCall ?? Number.NaN) / (l.floor.proxyCpuMsPerCall ?? Number.NaN),
  }));
  for (const { vus, ratio } of floorRatios) {
    console.log(
      `  ${String(vus).padStart(3)} VUs  proxy CPU per call / floor CPU per call = ${ratio.toFixed(2)}x` +
        (vus === 1 ? " (target <= 1.6x)" : vus === 16 ? " (target <= 1.8x)" : ""),
    );
  }
  for (const l of levels) {
    if (!l.proxyDns) continue;
    const withDns = l.proxyDns.proxyCpuMsPerCall ?? Number.NaN;
    const fixed = l.proxy.proxyCpuMsPerCall ?? Number.NaN;
    console.log(
      `  ${String(l.vus).padStart(3)} VUs  proxy CPU per call resolving through DNS (TTL ${dnsTtl} s) = ${withDns.toFixed(3)} ms` +
        ` (a fixed address: ${fixed.toFixed(3)} ms, ${signedMs(withDns - fixed)})`,
    );
  }
  if (dnsServer) console.log(`DNS queries answered: ${dnsQueries}`);
  console.log(
    `origin: ${originStats.requests} requests on ${originStats.connections} TLS connections in all`,
  );
  const outcomes = calls.split("\n").filter((l) => l.startsWith("latch_egress_"));
  console.log(`proxy metrics: ${outcomes.join(", ") || "(none)"}`);
  console.log(
    `load average (1 min) before ${loadBefore.toFixed(2)}, after ${(loadavg()[0] ?? 0).toFixed(2)}`,
  );

  writeFileSync(
    join(RESULTS_DIR, "bench-egress.json"),
    JSON.stringify(
      {
        date: new Date().toISOString(),
        node: process.version,
        k6: K6_VERSION,
        cpus: availableParallelism(),
        loadAverageBefore: loadBefore,
        levels,
        ratios,
        floorRatios,
        problems,
      },
      null,
      2,
    ),
  );
  if (problems.length > 0) {
    console.error(`\nbench:egress FAILED:\n  ${problems.join("\n  ")}`);
    process.exitCode = 1;
  }
}

interface Run {
  figures: ScenarioFigures;
  originCpuMsPerRequest: number;
  k6CpuMsPerRequest: number | undefined;
  /** Proxy and floor scenarios only: its process's CPU time per call, and its share of one core. */
  proxyCpuMsPerCall?: number;
  proxyCoreShare?: number;
}

type Target = "proxy" | "proxy-dns" | "floor";

/** One k6 run against the proxy or the floor, as measured around it. */
interface ProxiedRun {
  figures: ScenarioFigures;
  iterations: number;
  /** Calls that passed every check and reached the origin. */
  ok: number;
  targetCpuMs: number;
  wallMs: number;
  originCpuMs: number;
  originRequests: number;
  k6CpuMs: number | undefined;
}

function cpuPerCall(run: ProxiedRun): number {
  return run.targetCpuMs / run.iterations;
}

/**
 * Runs of one target as one: CPU, calls and time summed (so per call is over all of them); the
 * latency percentiles are the median round's (percentiles do not add up).
 */
function combine(runs: readonly ProxiedRun[]): Run & { ok: number } {
  const total = (pick: (run: ProxiedRun) => number) => runs.reduce((t, run) => t + pick(run), 0);
  const iterations = total((run) => run.iterations);
  const requests = total((run) => run.figures.requests);
  const seconds = total((run) => run.figures.requests / run.figures.reqPerSec);
  const first = runs[0];
  if (!first) throw new Error("no run to combine");
  const k6Ms = runs.some((run) => run.k6CpuMs === undefined) ? undefined : total((run) => run.k6CpuMs ?? 0);
  return {
    figures: {
      scenario: first.figures.scenario,
      vus: first.figures.vus,
      requests,
      reqPerSec: requests / seconds,
      p50Ms: median(runs.map((run) => run.figures.p50Ms)),
      p99Ms: median(runs.map((run) => run.figures.p99Ms)),
      checksPassed: total((run) => run.figures.checksPassed),
      checksFailed: total((run) => run.figures.checksFailed),
    },
    originCpuMsPerRequest: total((run) => run.originCpuMs) / total((run) => run.originRequests),
    k6CpuMsPerRequest: perRequest(k6Ms, iterations),
    proxyCpuMsPerCall: total((run) => run.targetCpuMs) / iterations,
    proxyCoreShare: total((run) => run.targetCpuMs) / total((run) => run.wallMs),
    ok: total((run) => run.ok),
  };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

function sum(...values: (number | undefined)[]): number | undefined {
  return values.some((v) => v === undefined) ? undefined : values.reduce<number>((t, v) => t + (v ?? 0), 0);
}

/** A latency difference with its sign: "+1.23 ms", "-0.10 ms". */
function signedMs(value: number): string {
  return `${value >= 0 ? "+" : ""}${value.toFixed(2)} ms`;
}

function perRequest(totalMs: number | undefined, requests: number): number | undefined {
  return totalMs === undefined ? undefined : totalMs / requests;
}

/** Records every way a run can fall short: k6's own verdict, failed checks, missing iterations. */
function check(
  result: Awaited<ReturnType<typeof runK6>>,
  figures: ScenarioFigures,
  planned: number,
): ScenarioFigures {
  if (result.exitCode !== 0) {
    problems.push(
      `${result.name}: k6 exited ${result.exitCode} (see ${result.logPath})\n${tail(result.logPath, 10)}`,
    );
  }
  if (figures.checksFailed > 0) {
    problems.push(`${result.name}: ${figures.checksFailed} failed checks (${figures.checksPassed} passed)`);
  }
  if (figures.requests !== planned) {
    problems.push(`${result.name}: ${figures.requests} of ${planned} iterations completed`);
  }
  return figures;
}

await main();
