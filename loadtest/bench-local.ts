// npm run bench:local: http_request through `vault serve` (MCP over HTTP, a session grant, the
// egress proxy as its own process, a TLS origin) next to direct HTTPS calls to the same origin in
// the same run, at each VU level. Prints req/s, p50 and p99 of both, the throughput ratio, the
// latency vault serve adds over a direct call, and the CPU time per call of vault serve (this
// process: HTTP, MCP, the embedded database, the ticket), of the proxy and of the origin.
//
//   npm run bench:local -- [--vus 1,16] [--direct-iterations N] [--local-iterations N] [--warmup N]
//                          [--cpu-prof]
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import pino from "pino";
import { HTTP_REQUEST_TOOL } from "../control-plane/src/grants/grant-scope.ts";
import { startLocalServer } from "../control-plane/src/local/local-server.ts";
import { loadOrCreateLocalTokens } from "../control-plane/src/local/local-tokens.ts";
import { LOCAL_OPERATOR, openLocalVault } from "../control-plane/src/local/local-vault.ts";
import { createProfiler, summarizeProfile } from "./lib/cpu-profile.ts";
import {
  ensureK6,
  figuresOf,
  formatTable,
  K6_VERSION,
  type K6Run,
  LOADTEST_DIR,
  RESULTS_DIR,
  runK6,
  type ScenarioFigures,
  throughputRatio,
} from "./lib/k6.ts";
import { ORIGIN_HOST, startOriginProcess, TEST_CA_PATH } from "./lib/origin-process.ts";

const { values: args } = parseArgs({
  options: {
    vus: { type: "string", default: "1,16" },
    "direct-iterations": { type: "string", default: "20000" },
    "local-iterations": { type: "string", default: "6000" },
    // Enough calls for V8 to compile the hot path first: after 200, vault serve read 1.20-1.27 ms
    // per call at 1 VU; after 2000, 1.03 (loadtest/README.md, issue 27).
    warmup: { type: "string", default: "2000" },
    // Profiles this process (vault serve, not the proxy) during the measured vault serve runs.
    "cpu-prof": { type: "boolean", default: false },
  },
});
const vusLevels = args.vus.split(",").map((v) => Number(v.trim()));
const directIterations = Number(args["direct-iterations"]);
const localIterations = Number(args["local-iterations"]);
const warmupIterations = Number(args.warmup);
const numbers: [string, number][] = [
  ["direct-iterations", directIterations],
  ["local-iterations", localIterations],
  ["warmup", warmupIterations],
  ...vusLevels.map((v): [string, number] => ["vus", v]),
];
for (const [name, n] of numbers) {
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer`);
}

/**
 * CPU time (user + system, ms) of the egress proxy `vault serve` spawned: the child of this
 * process running egress-proxy's main, read from /proc (Linux; undefined elsewhere).
 */
function proxyCpuMs(): number | undefined {
  if (!existsSync("/proc/self/stat")) return undefined;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // Fields after the command name (which may hold spaces) start at ") ".
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[1]) !== process.pid) continue;
      if (!readFileSync(`/proc/${entry}/cmdline`, "utf8").includes("egress-proxy")) continue;
      const ticksPerSecond = 100;
      return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
    } catch {
      // The process ended while we read it.
    }
  }
  return undefined;
}

async function main(): Promise<number> {
  ensureK6();
  mkdirSync(RESULTS_DIR, { recursive: true });
  console.log(
    `bench:local  k6 ${K6_VERSION}, node ${process.version}, ${availableParallelism()} CPUs, load ${loadavg()[0]?.toFixed(2)}`,
  );
  const secret = `ghp_bench_${randomBytes(16).toString("hex")}`;
  const origin = await startOriginProcess();
  // The proxy `vault serve` spawns reaches the loopback origin through the test knobs.
  Object.assign(process.env, {
    NODE_ENV: "test",
    LOG_LEVEL: "warn",
    EGRESS_CONNECT_TO: `${ORIGIN_HOST}:443:127.0.0.1:${origin.port}`,
    EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
    EGRESS_EXTRA_CA: TEST_CA_PATH,
  });
  const dataDir = mkdtempSync(join(tmpdir(), "latch-bench-local-"));
  const logger = pino({ level: "warn" });
  console.log("opening a fresh local vault (embedded database, egress proxy process)...");
  const vault = await openLocalVault({ dataDir, logger });
  await vault.egressReady();
  const tokens = loadOrCreateLocalTokens(dataDir);
  const server = await startLocalServer({ vault, tokens, logger, dataDir, port: 0 });
  const item = await vault.items.storeItem(vault.organisationId, LOCAL_OPERATOR, {
    name: "BENCH_TOKEN",
    value: secret,
    allowed_hosts: [ORIGIN_HOST],
  });
  await vault.grants.createActiveGrant({
    organisationId: vault.organisationId,
    environment: vault.environment,
    itemId: item.id,
    agentId: "k6-bench",
    toolId: HTTP_REQUEST_TOOL,
    actor: LOCAL_OPERATOR,
    policy: "session",
  });
  console.log(`vault serve ${server.url}, origin https://${ORIGIN_HOST}:${origin.port}`);

  const problems: string[] = [];
  const profiler = args["cpu-prof"] ? await createProfiler() : undefined;
  const directRun = (name: string, vus: number, iterations: number): K6Run => ({
    name,
    script: join(LOADTEST_DIR, "k6", "egress-direct.js"),
    vars: { VUS: vus, ITERATIONS: iterations, ORIGIN_PORT: origin.port, SECRET: secret },
    processEnv: { SSL_CERT_FILE: TEST_CA_PATH },
  });
  const localRun = (name: string, vus: number, iterations: number): K6Run => ({
    name,
    script: join(LOADTEST_DIR, "k6", "local-mcp.js"),
    vars: {
      VUS: vus,
      ITERATIONS: iterations,
      MCP_URL: `${server.url}/mcp`,
      MODEL_TOKEN: tokens.model,
      ITEM: "BENCH_TOKEN",
    },
  });
  /** One k6 run with the CPU time of vault serve (this process), the proxy and the origin around it. */
  async function measured(run: K6Run, isProfiled: boolean) {
    const originBefore = await origin.stats();
    const proxyBefore = proxyCpuMs();
    if (isProfiled) await profiler?.resume();
    const cpuBefore = process.cpuUsage();
    const result = await runK6(run);
    const cpu = process.cpuUsage(cpuBefore);
    if (isProfiled) await profiler?.pause();
    const proxyAfter = proxyCpuMs();
    const originAfter = await origin.stats();
    const iterations = Number(run.vars.ITERATIONS);
    const perCall = (ms: number | undefined) => (ms === undefined ? undefined : ms / iterations);
    return {
      result,
      k6: perCall(result.cpuMs),
      self: perCall((cpu.user + cpu.system) / 1000),
      proxy: perCall(
        proxyBefore === undefined || proxyAfter === undefined ? undefined : proxyAfter - proxyBefore,
      ),
      origin: perCall(originAfter.cpuMs - originBefore.cpuMs),
    };
  }
  const check = (result: Awaited<ReturnType<typeof runK6>>, row: ScenarioFigures, planned: number) => {
    if (result.exitCode !== 0 || row.checksFailed > 0 || row.requests !== planned) {
      problems.push(
        `${result.name}: ${row.checksFailed} failed checks, ${row.requests} of ${planned} iterations (exit ${result.exitCode}); see ${result.logPath}`,
      );
    }
  };

  const levels: {
    vus: number;
    direct: ScenarioFigures;
    local: ScenarioFigures;
    cpu: Awaited<ReturnType<typeof measured>>;
    directCpu: Awaited<ReturnType<typeof measured>>;
  }[] = [];
  try {
    for (const vus of vusLevels) {
      console.log(`\n${vus} VUs: warm-up (${warmupIterations} iterations each, not reported)...`);
      await runK6(directRun(`local-direct-warmup-${vus}vu`, vus, warmupIterations));
      await runK6(localRun(`local-mcp-warmup-${vus}vu`, vus, warmupIterations));
      console.log(`${vus} VUs: direct ${directIterations}, vault serve ${localIterations} iterations...`);
      const directCpu = await measured(directRun(`local-direct-${vus}vu`, vus, directIterations), false);
      const cpu = await measured(localRun(`local-mcp-${vus}vu`, vus, localIterations), true);
      const direct = figuresOf(directCpu.result, {
        scenario: "direct HTTPS",
        vus,
        latencyMetric: "http_req_duration",
      });
      const local = figuresOf(cpu.result, {
        scenario: "vault serve http_request",
        vus,
        latencyMetric: "http_req_duration",
      });
      check(directCpu.result, direct, directIterations);
      check(cpu.result, local, localIterations);
      levels.push({ vus, direct, local, cpu, directCpu });
    }
    console.log(`\n${formatTable(levels.flatMap((l) => [l.direct, l.local]))}\n`);
    const ms = (v: number | undefined) => (v === undefined ? "?" : `${v.toFixed(3)} ms`);
    const signedMs = (v: number) => `${v >= 0 ? "+" : ""}${v.toFixed(2)} ms`;
    for (const l of levels) {
      console.log(
        `${String(l.vus).padStart(3)} VUs  ratio vault-serve/direct throughput ${throughputRatio(l.local, l.direct)};` +
          ` added latency p50 ${signedMs(l.local.p50Ms - l.direct.p50Ms)}, p99 ${signedMs(l.local.p99Ms - l.direct.p99Ms)}`,
      );
    }
    console.log(
      "\nCPU time per call, user + system (2 cores shared by k6, vault serve, the proxy and the origin):",
    );
    for (const l of levels) {
      const vus = `${String(l.vus).padStart(3)} VUs`;
      console.log(`  ${vus}  direct       k6 ${ms(l.directCpu.k6)}, origin ${ms(l.directCpu.origin)}`);
      console.log(
        `  ${vus}  vault serve  k6 ${ms(l.cpu.k6)}, origin ${ms(l.cpu.origin)}, proxy ${ms(l.cpu.proxy)},` +
          ` vault serve ${ms(l.cpu.self)} (target <= 1.2 ms, goal 0.8 ms)`,
      );
    }
    const last = levels.at(-1);
    if (last) {
      console.log(`\nvault serve p99: ${last.local.p99Ms.toFixed(2)} ms at ${last.vus} concurrent calls`);
    }
    if (profiler) {
      const path = join(RESULTS_DIR, "bench-local.vault-serve.cpuprofile");
      const profile = await profiler.finish(path);
      if (profile)
        console.log(`\nCPU profile of vault serve during its runs (${path}):\n${summarizeProfile(profile)}`);
    }
  } finally {
    await server.close();
    await vault.close();
    await origin.close();
  }
  for (const problem of problems) console.error(`FAILED ${problem}`);
  return problems.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
