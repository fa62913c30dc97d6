// npm run bench:local: http_request through `vault serve` (MCP over HTTP, a session grant, the
// egress proxy as its own process, a TLS origin) next to direct HTTPS calls to the same origin in
// the same run. Prints req/s, p50 and p99 of both and the throughput ratio.
//
//   npm run bench:local -- [--vus 16] [--direct-iterations N] [--local-iterations N]
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import pino from "pino";
import { HTTP_REQUEST_TOOL } from "../control-plane/src/grants/grant-scope.ts";
import { startLocalServer } from "../control-plane/src/local/local-server.ts";
import { loadOrCreateLocalTokens } from "../control-plane/src/local/local-tokens.ts";
import { LOCAL_OPERATOR, openLocalVault } from "../control-plane/src/local/local-vault.ts";
import {
  ensureK6,
  figuresOf,
  formatTable,
  K6_VERSION,
  LOADTEST_DIR,
  RESULTS_DIR,
  runK6,
  throughputRatio,
} from "./lib/k6.ts";
import { ORIGIN_HOST, startOriginProcess, TEST_CA_PATH } from "./lib/origin-process.ts";

const { values: args } = parseArgs({
  options: {
    vus: { type: "string", default: "16" },
    "direct-iterations": { type: "string", default: "40000" },
    "local-iterations": { type: "string", default: "6000" },
  },
});
const vus = Number(args.vus);
const directIterations = Number(args["direct-iterations"]);
const localIterations = Number(args["local-iterations"]);
for (const [name, n] of Object.entries({ vus, directIterations, localIterations })) {
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer`);
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
  try {
    const direct = await runK6({
      name: `local-direct-${vus}vu`,
      script: join(LOADTEST_DIR, "k6", "egress-direct.js"),
      vars: { VUS: vus, ITERATIONS: directIterations, ORIGIN_PORT: origin.port, SECRET: secret },
      processEnv: { SSL_CERT_FILE: TEST_CA_PATH },
    });
    const local = await runK6({
      name: `local-mcp-${vus}vu`,
      script: join(LOADTEST_DIR, "k6", "local-mcp.js"),
      vars: {
        VUS: vus,
        ITERATIONS: localIterations,
        MCP_URL: `${server.url}/mcp`,
        MODEL_TOKEN: tokens.model,
        ITEM: "BENCH_TOKEN",
      },
    });
    const rows = [
      figuresOf(direct, { scenario: "direct HTTPS", vus, latencyMetric: "http_req_duration" }),
      figuresOf(local, { scenario: "vault serve http_request", vus, latencyMetric: "http_req_duration" }),
    ];
    for (const [run, row] of [
      [direct, rows[0]!],
      [local, rows[1]!],
    ] as const) {
      if (run.exitCode !== 0 || row.checksFailed > 0)
        problems.push(
          `${run.name}: ${row.checksFailed} failed checks (exit ${run.exitCode}); see ${run.logPath}`,
        );
    }
    console.log(`\n${formatTable(rows)}\n`);
    console.log(
      `ratio vault-serve/direct throughput: ${throughputRatio(rows[1]!, rows[0]!)}  (target >= 0.30)`,
    );
    console.log(
      `vault serve p99: ${rows[1]!.p99Ms.toFixed(2)} ms at ${vus} concurrent calls  (target < 20 ms)`,
    );
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
