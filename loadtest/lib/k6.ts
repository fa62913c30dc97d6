// k6 for the benchmarks: a pinned binary installed on first use, one run per scenario with its
// summary written to JSON, and the figures read back and printed as a table. Shared by every bench.
import { spawn, spawnSync } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";

export const K6_VERSION = "v1.8.1";
export const LOADTEST_DIR = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
export const RESULTS_DIR = join(LOADTEST_DIR, "results");
export const K6_BIN = join(LOADTEST_DIR, ".bin", "k6");

/** Trend stats every run asks k6 for; p50 and p99 are what the tables print. */
const SUMMARY_TREND_STATS = "avg,min,med,p(50),p(90),p(99),max,count";

/** Installs k6 into loadtest/.bin with `go install` unless the pinned version is already there. */
export function ensureK6(): string {
  if (existsSync(K6_BIN)) {
    const version = spawnSync(K6_BIN, ["version"], { encoding: "utf8" }).stdout ?? "";
    if (version.includes(`k6 ${K6_VERSION} `)) return K6_BIN;
    console.log(`loadtest/.bin/k6 is not ${K6_VERSION} (${version.trim() || "unreadable"}); reinstalling`);
  }
  console.log(`installing k6 ${K6_VERSION} (first run only)...`);
  const started = Date.now();
  const result = spawnSync("go", ["install", `go.k6.io/k6@${K6_VERSION}`], {
    env: { ...process.env, GOBIN: dirname(K6_BIN), CGO_ENABLED: "0" },
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (result.error) {
    throw new Error(`could not run \`go install\` (is Go installed and on PATH?): ${result.error.message}`);
  }
  if (result.status !== 0 || !existsSync(K6_BIN)) {
    throw new Error(`\`go install go.k6.io/k6@${K6_VERSION}\` failed (exit ${result.status})`);
  }
  console.log(`installed k6 ${K6_VERSION} in ${Math.round((Date.now() - started) / 1000)} s`);
  return K6_BIN;
}

export interface K6Run {
  /** Short name: the log and summary files are named after it. */
  name: string;
  /** Path of the k6 script. */
  script: string;
  /** Passed to the script as __ENV (k6 -e). */
  vars: Record<string, string | number>;
  /** Extra environment for the k6 process itself (e.g. SSL_CERT_FILE). */
  processEnv?: Record<string, string>;
}

export interface K6Result {
  name: string;
  exitCode: number;
  summaryPath: string;
  logPath: string;
  summary: K6Summary;
  /** CPU time k6 itself used (user + system), when the shell could report it. */
  cpuMs: number | undefined;
}

/** The subset of k6's handleSummary data the benches read. */
export interface K6Summary {
  state: { testRunDurationMs: number };
  metrics: Record<string, { type: string; values: Record<string, number> }>;
}

/**
 * Runs one k6 script; its output goes to results/<name>.k6.log and its summary (handleSummary,
 * see k6/lib/summary.js) to results/<name>.summary.json. Resolves once k6 has exited.
 */
export async function runK6(run: K6Run): Promise<K6Result> {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const summaryPath = join(RESULTS_DIR, `${run.name}.summary.json`);
  const logPath = join(RESULTS_DIR, `${run.name}.k6.log`);
  const args = [
    "run",
    "--quiet",
    "--no-color",
    "--no-usage-report",
    `--summary-trend-stats=${SUMMARY_TREND_STATS}`,
    "-e",
    `SUMMARY_PATH=${summaryPath}`,
    ...Object.entries(run.vars).flatMap(([key, value]) => ["-e", `${key}=${value}`]),
    run.script,
  ];
  const timesPath = join(RESULTS_DIR, `${run.name}.k6.times`);
  rmSync(summaryPath, { force: true });
  rmSync(timesPath, { force: true });
  const log = createWriteStream(logPath);
  // Through bash, whose `times` reports the CPU time of the k6 it waited for: on a small machine
  // the load generator competes with what it measures, and the benches say how much it took.
  const child = spawn("bash", ["-c", K6_WRAPPER, "k6", K6_BIN, ...args], {
    env: { ...process.env, ...run.processEnv, K6_TIMES_FILE: timesPath },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.pipe(log, { end: false });
  child.stderr.pipe(log, { end: false });
  const exitCode = await new Promise<number>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
  await new Promise<void>((resolve) => log.end(resolve));
  if (!existsSync(summaryPath)) {
    throw new Error(
      `k6 run ${run.name} wrote no summary (exit ${exitCode}); see ${logPath}:\n${tail(logPath)}`,
    );
  }
  const summary = JSON.parse(readFileSync(summaryPath, "utf8")) as K6Summary;
  return { name: run.name, exitCode, summaryPath, logPath, summary, cpuMs: readChildCpuMs(timesPath) };
}

const K6_WRAPPER = '"$@"; rc=$?; times > "$K6_TIMES_FILE"; exit $rc';

/** bash `times`: line 1 is the shell's own user/system time, line 2 its children's ("0m1.234s 0m0.100s"). */
function readChildCpuMs(path: string): number | undefined {
  if (!existsSync(path)) return undefined;
  const children = readFileSync(path, "utf8").trim().split("\n")[1] ?? "";
  const parts = [...children.matchAll(/(\d+)m([\d.]+)s/g)].map(
    (m) => Number(m[1]) * 60_000 + Number(m[2]) * 1000,
  );
  return parts.length === 2 ? parts[0]! + parts[1]! : undefined;
}

/** The last lines of a log, for error messages. */
export function tail(path: string, lines = 20): string {
  if (!existsSync(path)) return "";
  return readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
}

export interface ScenarioFigures {
  scenario: string;
  vus: number;
  requests: number;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  checksPassed: number;
  checksFailed: number;
}

function metricValue(summary: K6Summary, metric: string, stat: string): number {
  const value = summary.metrics[metric]?.values[stat];
  if (value === undefined) throw new Error(`the k6 summary has no ${metric} ${stat}`);
  return value;
}

/**
 * The figures of one run: completed iterations (one request each) over the run's duration, and
 * the latency percentiles of `latencyMetric` (http_req_duration, grpc_req_duration, ...).
 */
export function figuresOf(
  result: K6Result,
  options: { scenario: string; vus: number; latencyMetric: string },
): ScenarioFigures {
  const { summary } = result;
  const requests = metricValue(summary, "iterations", "count");
  return {
    scenario: options.scenario,
    vus: options.vus,
    requests,
    reqPerSec: requests / (summary.state.testRunDurationMs / 1000),
    p50Ms: metricValue(summary, options.latencyMetric, "p(50)"),
    p99Ms: metricValue(summary, options.latencyMetric, "p(99)"),
    checksPassed: summary.metrics.checks?.values.passes ?? 0,
    checksFailed: summary.metrics.checks?.values.fails ?? 0,
  };
}

/** `scenario | requests | req/s | p50 ms | p99 ms` as an aligned text table. */
export function formatTable(rows: readonly ScenarioFigures[]): string {
  const header = ["scenario", "VUs", "requests", "req/s", "p50 ms", "p99 ms"];
  const body = rows.map((r) => [
    r.scenario,
    String(r.vus),
    String(r.requests),
    r.reqPerSec.toFixed(0),
    r.p50Ms.toFixed(2),
    r.p99Ms.toFixed(2),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]?.length ?? 0)));
  const line = (cells: string[]) =>
    cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join(" | ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("-|-"), ...body.map(line)].join("\n");
}

/** Throughput of `subject` relative to `baseline`, two decimals. */
export function throughputRatio(subject: ScenarioFigures, baseline: ScenarioFigures): string {
  return (subject.reqPerSec / baseline.reqPerSec).toFixed(2);
}
