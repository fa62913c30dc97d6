// npm run bench:hosted: MCP http_request through the hosted control plane (its own process, on a
// real PostgreSQL, an avm_ agent with a standing approval) to one and then two egress proxy
// processes behind one DNS name (round robin, mTLS), next to direct HTTPS calls to the same origin
// in the same run, and next to the floor: a bare Fastify route making the same database round
// trips, signing a ticket and calling the same proxies (lib/hosted-floor.ts). Prints req/s, p50,
// p99, the CPU per call of the control plane, the floor and the origin, for each proxy the calls
// it served, its share of them and its CPU per call it served, and the statements every process
// sent PostgreSQL per agent call, counted on the wire (lib/pg-statement-counter.ts), and PostgreSQL's
// CPU per call (its backends', lib/pg-backend-cpu.ts, when it runs on this machine).
//
//   DATABASE_URL=postgres://... npm run bench:hosted -- [--vus 8] [--direct-iterations N] [--hosted-iterations N]
//                                                     [--warmup N] [--cpu-prof]
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { newId } from "@latch/shared/ids";
import pino from "pino";
import { keyringPath, loadOrCreateKeyring } from "../control-plane/src/auth/kek.ts";
import { loadConfig } from "../control-plane/src/config.ts";
import { buildControlPlane } from "../control-plane/src/control-plane.ts";
import { openDatabase } from "../control-plane/src/db/database.ts";
import type { EgressClient } from "../control-plane/src/egress/egress-client.ts";
import { loadOrCreateTicketKey } from "../control-plane/src/egress/ticket-key.ts";
import { loadOrCreateOAuthKeys } from "../control-plane/src/oauth/oauth-keys.ts";
import { loadOrCreateSealingKeyring } from "../egress-proxy/src/keys/sealing-keys.ts";
import { startDnsServer } from "../egress-proxy/test/dns-server.ts";
import { type CpuProfile, summarizeProfile } from "./lib/cpu-profile.ts";
import {
  ensureK6,
  figuresOf,
  formatTable,
  K6_VERSION,
  LOADTEST_DIR,
  RESULTS_DIR,
  runK6,
  type ScenarioFigures,
} from "./lib/k6.ts";
import { ORIGIN_HOST, startOriginProcess, TEST_CA_PATH } from "./lib/origin-process.ts";
import { pgBackendCpuMs, pgCpuBetween } from "./lib/pg-backend-cpu.ts";
import { type StatementCounts, startPgStatementCounter } from "./lib/pg-statement-counter.ts";

const REPO = new URL("..", import.meta.url).pathname;
const SERVICE = "egress.bench.test";

const { values: args } = parseArgs({
  options: {
    vus: { type: "string", default: "8" },
    "direct-iterations": { type: "string", default: "20000" },
    "hosted-iterations": { type: "string", default: "3000" },
    // Unreported calls through the control plane and the floor before each proxy set-up's runs:
    // enough for V8 to compile their hot paths (as bench:egress and bench:local).
    warmup: { type: "string", default: "2000" },
    // V8's profiler in the control plane's and the floor's processes (node --cpu-prof).
    "cpu-prof": { type: "boolean", default: false },
  },
});
const PROFILE_DIR = join(RESULTS_DIR, "bench-hosted-profiles");
const vus = Number(args.vus);
const directIterations = Number(args["direct-iterations"]);
const hostedIterations = Number(args["hosted-iterations"]);
const warmupIterations = Number(args.warmup);
for (const [name, n] of Object.entries({ vus, directIterations, hostedIterations, warmupIterations })) {
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer`);
}

/** Execute calls a proxy answered, from its admin listener's /metrics. */
async function answeredBy(metricsUrl: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  return Number(/latch_egress_calls_total\{outcome="answered"\} (\d+)/.exec(text)?.[1] ?? 0);
}

/** CPU time (user + system, ms) a process has used, from /proc. */
function cpuMsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Starts a process and resolves once its output matches `ready`, with the text that matched. */
function startProcess(
  command: string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp,
): Promise<ChildProcess & { ready: RegExpExecArray }> {
  const child = spawn(command[0]!, command.slice(1), { env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${command.join(" ")} did not start:\n${output}`)),
      60_000,
    );
    const onData = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-4000);
      const matched = ready.exec(output);
      if (matched) {
        clearTimeout(timer);
        // Read on, so that a full pipe never blocks the process.
        child.stdout!.off("data", onData).resume();
        child.stderr!.off("data", onData).resume();
        resolve(Object.assign(child, { ready: matched }));
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => reject(new Error(`${command.join(" ")} exited (${code}):\n${output}`)));
  });
}

/** Waits for a process to exit (a profile is written as it does). */
function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => child.once("exit", () => resolve()));
}

/** "1.23 select clients, 1.00 insert audit_events, ...": statements per call by kind. */
function describeCounts(counts: StatementCounts, calls: number): string {
  return [...counts.byKind.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([kind, n]) => `${(n / calls).toFixed(2)} ${kind}`)
    .join(", ");
}

async function main(): Promise<number> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    console.error("bench:hosted runs on a real PostgreSQL: set DATABASE_URL=postgres://...");
    return 2;
  }
  ensureK6();
  console.log(
    `bench:hosted  k6 ${K6_VERSION}, node ${process.version}, ${availableParallelism()} CPUs, load ${loadavg()[0]?.toFixed(2)}`,
  );
  const root = mkdtempSync(join(tmpdir(), "latch-bench-hosted-"));
  const keys = join(root, "keys");
  const ticketKey = loadOrCreateTicketKey(keys);
  loadOrCreateKeyring(keyringPath(keys));
  await loadOrCreateOAuthKeys(keys);
  const sealing = await loadOrCreateSealingKeyring(keys);
  const certs = join(root, "certs");
  execFileSync("sh", [join(REPO, "deploy/scripts/make-certs.sh"), certs, SERVICE], { stdio: "ignore" });
  const secret = `ghp_bench_${randomBytes(16).toString("hex")}`;
  const origin = await startOriginProcess();
  const dns = await startDnsServer({ [SERVICE]: { A: ["127.0.0.1"] } });

  // The organisation, its credential and the agent's client, through the plane's own services.
  const logger = pino({ level: "warn" });
  const database = await openDatabase({ databaseUrl, dataDir: root });
  const config = loadConfig({ NODE_ENV: "test", DATA_DIR: keys, EGRESS_URL: "127.0.0.1:1" });
  const seed = await buildControlPlane({
    config,
    dataDir: keys,
    ticketKey,
    egress: { client: {} as EgressClient, sealingKey: async () => sealing.current },
    logger,
    database,
  });
  const organisationId = newId("org");
  await database.db.insertInto("organisations").values({ id: organisationId, name: "bench" }).execute();
  await seed.services.items.storeItem(organisationId, "bench", {
    name: "BENCH_TOKEN",
    value: secret,
    environment: "staging",
    allowed_hosts: [ORIGIN_HOST],
  });
  const client = await seed.services.clients.issueClient(organisationId, "model", {
    name: "k6-bench",
    environment: "staging",
  });

  // Every process under test reaches PostgreSQL through the counting relay; this process's own
  // connection (the seed above) does not, so only their statements are counted.
  const counter = await startPgStatementCounter(databaseUrl);
  const profileFlags = (name: string) =>
    args["cpu-prof"]
      ? ["--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}`, `--cpu-prof-name=${name}.cpuprofile`]
      : [];
  if (args["cpu-prof"]) {
    rmSync(PROFILE_DIR, { recursive: true, force: true });
    mkdirSync(PROFILE_DIR, { recursive: true });
  }

  const grpcPort = await freePort();
  const adminPort = await freePort();
  const proxies: ChildProcess[] = [];
  const adminUrls: string[] = [];
  const startProxy = async (ip: string) => {
    adminUrls.push(`http://${ip}:${adminPort}/metrics`);
    proxies.push(
      await startProcess(
        [process.execPath, join(REPO, "egress-proxy/src/main.ts")],
        {
          PATH: process.env.PATH,
          NODE_ENV: "test",
          LOG_LEVEL: "warn",
          DATA_DIR: join(root, `proxy-${ip}`),
          EGRESS_LISTEN: `${ip}:${grpcPort}`,
          EGRESS_METRICS_LISTEN: `${ip}:${adminPort}`,
          EGRESS_TLS_CERT: join(certs, "egress.pem"),
          EGRESS_TLS_KEY: join(certs, "egress-key.pem"),
          EGRESS_TLS_CLIENT_CA: join(certs, "ca.pem"),
          EGRESS_SEALING_KEY_FILE: join(keys, "egress", "sealing-keys.json"),
          EGRESS_TICKET_PUBLIC_KEYS: readFileSync(
            join(keys, "control-plane", "ticket-public-keys.txt"),
            "utf8",
          ),
          EGRESS_REPLAY_DATABASE_URL: counter.url,
          EGRESS_CONNECT_TO: `${ORIGIN_HOST}:443:127.0.0.1:${origin.port}`,
          EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
          EGRESS_EXTRA_CA: TEST_CA_PATH,
        },
        /LATCH_EGRESS_READY/,
      ),
    );
  };
  await startProxy("127.0.0.1");
  const egressUrl = `dns://${dns.server}/${SERVICE}:${grpcPort}`;
  const egressClientEnv = {
    EGRESS_URL: egressUrl,
    // grpc-js asks the resolver named in a dns:// target only with its own resolver.
    GRPC_NODE_USE_ALTERNATIVE_RESOLVER: "true",
    EGRESS_CLIENT_TLS_CA: join(certs, "ca.pem"),
    EGRESS_CLIENT_TLS_CERT: join(certs, "control-plane.pem"),
    EGRESS_CLIENT_TLS_KEY: join(certs, "control-plane-key.pem"),
    TICKET_SIGNING_KEY_FILE: join(keys, "control-plane", "ticket-signing-key.pem"),
  };
  const httpPort = await freePort();
  const plane = await startProcess(
    [process.execPath, ...profileFlags("control-plane"), join(REPO, "control-plane/src/main.ts")],
    {
      PATH: process.env.PATH,
      NODE_ENV: "development",
      LOG_LEVEL: "warn",
      BASE_URL: "http://localhost:8787",
      PORT: String(httpPort),
      DATA_DIR: join(root, "control-plane"),
      DATABASE_URL: counter.url,
      ...egressClientEnv,
      KEK_KEYRING_FILE: join(keys, "control-plane", "kek.json"),
      OAUTH_JWKS_FILE: join(keys, "oauth", "jwks.json"),
    },
    /Latch is running at/,
  );
  // The floor's channel resolves the name when it connects: it is started again once the second
  // proxy is in the name, so that it balances over both as the control plane does.
  const startFloor = (proxyCount: number) =>
    startProcess(
      [
        process.execPath,
        ...profileFlags(`floor-${proxyCount}proxy`),
        join(REPO, "loadtest/lib/hosted-floor.ts"),
      ],
      {
        PATH: process.env.PATH,
        DATA_DIR: join(root, "floor"),
        DATABASE_URL: counter.url,
        ...egressClientEnv,
      },
      /FLOOR_READY port=\d+/,
    );
  let floorProcess = await startFloor(1);
  const floorUrlOf = (floor: typeof floorProcess) =>
    `http://127.0.0.1:${/port=(\d+)/.exec(floor.ready[0])![1]}/mcp`;
  let floorUrl = floorUrlOf(floorProcess);
  const mcpUrl = `http://127.0.0.1:${httpPort}/mcp`;

  // The agent asks once (as k6-bench, the name the k6 script initializes with); the operator
  // approves it standing, so every call of the run is covered.
  const headers = { authorization: `Bearer ${client.token}`, "content-type": "application/json" };
  const init = await fetch(mcpUrl, {
    method: "POST",
    headers,
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: {
        protocolVersion: "2024-11-05",
        capabilities: {},
        clientInfo: { name: "k6-bench", version: "1" },
      },
    }),
  });
  const session = init.headers.get("mcp-session-id") ?? "";
  const asked = await fetch(mcpUrl, {
    method: "POST",
    headers: { ...headers, "mcp-session-id": session },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "request_grant", arguments: { item_name: "BENCH_TOKEN" } },
    }),
  }).then((r) => r.json() as Promise<{ result: { content: { text: string }[] } }>);
  const grantId = (JSON.parse(asked.result.content[0]!.text) as { grant_id: string }).grant_id;
  await seed.services.grants.approveGrant(organisationId, "bench", grantId, "item_standing");

  const rows: ScenarioFigures[] = [];
  const cpuRows: string[] = [];
  const problems: string[] = [];
  const totals = { planeCpuMs: 0, planeCalls: 0, floorCpuMs: 0, floorCalls: 0, statements: 0 };
  const statementKinds: StatementCounts = { total: 0, byKind: new Map() };
  try {
    const direct = await runK6({
      name: `hosted-direct-${vus}vu`,
      script: join(LOADTEST_DIR, "k6", "egress-direct.js"),
      vars: { VUS: vus, ITERATIONS: directIterations, ORIGIN_PORT: origin.port, SECRET: secret },
      processEnv: { SSL_CERT_FILE: TEST_CA_PATH },
    });
    rows.push(figuresOf(direct, { scenario: "direct HTTPS", vus, latencyMetric: "http_req_duration" }));
    if (direct.exitCode !== 0)
      problems.push(`${direct.name}: exit ${direct.exitCode}; see ${direct.logPath}`);

    for (const replicas of [1, 2]) {
      if (replicas === 2) {
        await startProxy("127.0.0.2");
        dns.setPlan(SERVICE, { A: ["127.0.0.1", "127.0.0.2"] });
        // The control plane resolves the name again every 2 s; the floor starts again.
        await new Promise((resolve) => setTimeout(resolve, 4_000));
        floorProcess.kill("SIGTERM");
        await exited(floorProcess);
        floorProcess = await startFloor(2);
        floorUrl = floorUrlOf(floorProcess);
      }
      const proxyLabel = `${replicas} prox${replicas === 1 ? "y" : "ies"}`;
      // Both paths (and the proxies behind them) warmed up alike before either is measured.
      for (const target of ["plane", "floor"] as const) {
        const warm = await runK6({
          name: `hosted-${target === "plane" ? "mcp" : "floor"}-warmup-${replicas}proxy-${vus}vu`,
          script: join(LOADTEST_DIR, "k6", "hosted-mcp.js"),
          vars: {
            VUS: vus,
            ITERATIONS: warmupIterations,
            MCP_URL: target === "plane" ? mcpUrl : floorUrl,
            MODEL_TOKEN: client.token,
            ITEM: "BENCH_TOKEN",
          },
        });
        if (warm.exitCode !== 0) problems.push(`${warm.name}: exit ${warm.exitCode}; see ${warm.logPath}`);
      }
      for (const target of ["plane", "floor"] as const) {
        const pids = {
          [target === "plane" ? "control plane" : "floor"]: (target === "plane" ? plane : floorProcess).pid!,
          ...Object.fromEntries(proxies.map((p, i) => [`proxy ${i + 1}`, p.pid!])),
        };
        const before = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuMsOf(pid)]));
        const servedBefore = await Promise.all(adminUrls.map(answeredBy));
        const originBefore = (await origin.stats()).cpuMs;
        const pgBefore = await pgBackendCpuMs(database.db);
        counter.take();
        const run = await runK6({
          name: `hosted-${target === "plane" ? "mcp" : "floor"}-${replicas}proxy-${vus}vu`,
          script: join(LOADTEST_DIR, "k6", "hosted-mcp.js"),
          vars: {
            VUS: vus,
            ITERATIONS: hostedIterations,
            MCP_URL: target === "plane" ? mcpUrl : floorUrl,
            MODEL_TOKEN: client.token,
            ITEM: "BENCH_TOKEN",
          },
        });
        const counts = counter.take();
        const pgCpuMs = pgCpuBetween(pgBefore, await pgBackendCpuMs(database.db));
        const row = figuresOf(run, {
          scenario: `${target === "plane" ? "hosted http_request" : "floor (bare route)"}, ${proxyLabel}`,
          vus,
          latencyMetric: "http_req_duration",
        });
        rows.push(row);
        if (run.exitCode !== 0 || row.checksFailed > 0 || row.requests !== hostedIterations) {
          problems.push(
            `${run.name}: ${row.checksFailed} failed checks, ${row.requests} of ${hostedIterations} calls (exit ${run.exitCode}); see ${run.logPath}`,
          );
        }
        // The control plane and the origin see every call; each proxy only the calls it served, so
        // its CPU is divided by those (its own answered counter), and its share is said beside it.
        const served = (await Promise.all(adminUrls.map(answeredBy))).map((n, i) => n - servedBefore[i]!);
        const totalServed = served.reduce((a, b) => a + b, 0);
        const perCall = Object.entries(pids).map(([name, pid]) => {
          const cpuMs = cpuMsOf(pid) - before[name]!;
          const proxy = /^proxy (\d+)$/.exec(name);
          if (!proxy) {
            if (target === "plane") {
              totals.planeCpuMs += cpuMs;
              totals.planeCalls += row.requests;
            } else {
              totals.floorCpuMs += cpuMs;
              totals.floorCalls += row.requests;
            }
            return `${name} ${(cpuMs / row.requests).toFixed(3)}`;
          }
          const n = served[Number(proxy[1]) - 1]!;
          const share = totalServed > 0 ? Math.round((100 * n) / totalServed) : 0;
          return `${name} ${n > 0 ? (cpuMs / n).toFixed(3) : "-"} per call it served (${n} calls, ${share}%)`;
        });
        perCall.push(`origin ${(((await origin.stats()).cpuMs - originBefore) / row.requests).toFixed(3)}`);
        // Every backend of the database: the control plane's (or the floor's) and the proxies' spends.
        perCall.push(
          `PostgreSQL ${pgCpuMs === undefined ? "- (not on this machine)" : (pgCpuMs / row.requests).toFixed(3)}`,
        );
        cpuRows.push(
          `${proxyLabel}, ${target === "plane" ? "control plane" : "floor"}: CPU ms per call: ${perCall.join(", ")}`,
        );
        cpuRows.push(
          `${proxyLabel}, ${target === "plane" ? "control plane" : "floor"}: ${(counts.total / row.requests).toFixed(2)} statements per call: ${describeCounts(counts, row.requests)}`,
        );
        if (target === "plane") {
          totals.statements += counts.total;
          statementKinds.total += counts.total;
          for (const [kind, n] of counts.byKind)
            statementKinds.byKind.set(kind, (statementKinds.byKind.get(kind) ?? 0) + n);
        }
      }
    }
    console.log(`\n${formatTable(rows)}\n`);
    for (const line of cpuRows) console.log(line);
    // The figures issue 27 tracks, over both proxy set-ups, as lines of their own.
    const ratio = totals.planeCpuMs / totals.planeCalls / (totals.floorCpuMs / totals.floorCalls);
    console.log(
      `control plane ${(totals.planeCpuMs / totals.planeCalls).toFixed(3)} ms, floor ${(totals.floorCpuMs / totals.floorCalls).toFixed(3)} ms CPU per call (target ratio <= 1.5x)`,
    );
    console.log(`control plane CPU per call / floor CPU per call = ${ratio.toFixed(2)}x`);
    console.log(`database statements per agent call = ${(totals.statements / totals.planeCalls).toFixed(2)}`);
    console.log(`load average (1 min) after ${(loadavg()[0] ?? 0).toFixed(2)}`);
    console.log(`results and k6 logs in ${RESULTS_DIR}`);
  } finally {
    plane.kill("SIGTERM");
    floorProcess.kill("SIGTERM");
    for (const proxy of proxies) proxy.kill("SIGTERM");
    await Promise.all([exited(plane), exited(floorProcess)]);
    await seed.close();
    await database.close();
    await origin.close();
    await dns.close();
    await counter.close();
  }
  if (args["cpu-prof"]) {
    for (const name of ["control-plane", "floor-1proxy", "floor-2proxy"]) {
      const path = join(PROFILE_DIR, `${name}.cpuprofile`);
      if (!existsSync(path)) continue;
      const profile = JSON.parse(readFileSync(path, "utf8")) as CpuProfile;
      console.log(`\nCPU profile of the ${name} process (${path}):\n${summarizeProfile(profile)}`);
    }
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
