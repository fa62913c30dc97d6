// Issue 14's multi-host test on one machine: network namespaces joined by veth pairs as separate
// hosts. PostgreSQL on one, two control-plane processes on two more, two and then three egress
// proxies each on its own, the origin and the DNS server (the proxies' service name resolves to
// every proxy) on the test's own host. Agents call http_request over MCP through both control
// planes. Root and iproute2 only (CI has both); skipped elsewhere, with the reason printed.
import { execFileSync } from "node:child_process";
import {
  appendFileSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningDnsServer, startDnsServer } from "../../egress-proxy/test/dns-server.ts";
import { type RunningOrigin, startOrigin } from "../../egress-proxy/test/origin.ts";
import { openDatabase } from "../src/db/database.ts";
import { connectAgent, type HostedHarness, operatorWithClient, startHosted, toolAnswer } from "./hosted.ts";
import { canMakeNamespaces, createNetwork, type Host, type HostProcess, type Network } from "./netns.ts";

const CP_MAIN = new URL("../src/main.ts", import.meta.url).pathname;
const PROXY_MAIN = new URL("../../egress-proxy/src/main.ts", import.meta.url).pathname;
const MAKE_CERTS = new URL("../../deploy/scripts/make-certs.sh", import.meta.url).pathname;
const PKI_CA = new URL("../../egress-proxy/test/pki/trusted-ca.pem", import.meta.url).pathname;
const SERVICE = "egress.latch.test";
const PG_BIN = ["/usr/lib/postgresql"]
  .filter(existsSync)
  .flatMap((root) => readdirSync(root).map((v) => join(root, v, "bin")))
  .filter((dir) => existsSync(join(dir, "initdb")))
  .sort()
  .pop();
const canRun = canMakeNamespaces() && PG_BIN !== undefined;
if (!canRun) process.stdout.write("multi-host test skipped: needs root, iproute2 and PostgreSQL's initdb\n");

let net: Network;
let dns: RunningDnsServer;
let origin: RunningOrigin;
let seed: HostedHarness;
let seedDatabase: Awaited<ReturnType<typeof openDatabase>>;
let pgDir: string;
let token: string;
let operator: Awaited<ReturnType<typeof operatorWithClient>>["op"];
const proxies = new Map<string, { host: Host; process: HostProcess }>();
const planes: { host: Host; process: HostProcess; url: string; agent?: Client }[] = [];
const figures: string[] = [];
let startProxy: (host: Host) => Promise<void>;
let egressDatabaseUrl: string;
let startPlane: (name: string, octet: number) => Promise<(typeof planes)[number]>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(
  what: string,
  probe: () => Promise<boolean> | boolean,
  timeoutMs = 60_000,
  lines?: string[],
) {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    if (await probe()) return;
    await sleep(200);
  }
  throw new Error(`${what} did not come up:\n${(lines ?? []).slice(-20).join("\n")}`);
}

async function answered(proxyIp: string): Promise<number> {
  try {
    const text = await (await fetch(`http://${proxyIp}:9090/metrics`)).text();
    return Number(/latch_egress_calls_total\{outcome="answered"\} (\d+)/.exec(text)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

beforeAll(async () => {
  const root = mkdtempSync(join(tmpdir(), "latch-multihost-"));
  net = createNetwork();
  // Port 53, so that each host's resolv.conf points at it and the control planes resolve the
  // proxies' name through getaddrinfo as deployed. Should something hold port 53 on every address,
  // another port, named in a dns:// target that grpc-js's own resolver asks instead.
  dns = await startDnsServer({}, { host: net.selfIp, port: 53 }).catch(() =>
    startDnsServer({}, { host: net.selfIp, port: 0 }),
  );
  const viaResolvConf = dns.port === 53;
  origin = await startOrigin(
    (req, res) => {
      const delay = Number(new URL(req.url ?? "/", "https://x").searchParams.get("delay") ?? 0);
      setTimeout(() => res.end("{}"), delay);
    },
    { host: net.selfIp },
  );

  // PostgreSQL on its own host.
  const pgHost = net.addHost("pg", 10);
  pgDir = join(root, "pgdata");
  mkdirSync(pgDir);
  const postgresUid = Number(execFileSync("id", ["-u", "postgres"]).toString());
  chownSync(pgDir, postgresUid, postgresUid);
  chownSync(root, postgresUid, postgresUid);
  execFileSync(
    "runuser",
    ["-u", "postgres", "--", join(PG_BIN!, "initdb"), "-D", pgDir, "-U", "postgres", "--auth=trust"],
    {
      stdio: "ignore",
    },
  );
  // The other hosts of the test network connect over TCP (trust: a throwaway server).
  appendFileSync(join(pgDir, "pg_hba.conf"), `host all all ${net.subnet}.0/24 trust\n`);
  const pgProcess = net.spawnIn(
    pgHost,
    [
      "runuser",
      "-u",
      "postgres",
      "--",
      join(PG_BIN!, "postgres"),
      "-D",
      pgDir,
      "-k",
      pgDir,
      "-c",
      `listen_addresses=${pgHost.ip}`,
    ],
    { PATH: process.env.PATH },
  );
  void pgProcess.exited.then((code) => pgProcess.lines.push(`postgres exited with ${code}`));
  const databaseUrl = `postgres://postgres@${pgHost.ip}:5432/postgres`;
  // The proxies' own role, made before the control plane migrates (as compose's first start does),
  // so that the migration grants it SELECT, INSERT and DELETE on egress_spent_tickets and nothing else.
  egressDatabaseUrl = `postgres://latch_egress@${pgHost.ip}:5432/postgres`;
  await waitFor(
    "PostgreSQL",
    async () => {
      try {
        const db = await openDatabase({ databaseUrl, dataDir: root, migrate: false });
        const isUp = await db.ping();
        await db.close();
        return isUp;
      } catch (error) {
        pgProcess.lines.push(`probe: ${(error as Error).message}`);
        return false;
      }
    },
    60_000,
    pgProcess.lines,
  );

  {
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    await admin.query("CREATE ROLE latch_egress LOGIN");
    await admin.end();
  }

  // The organisation, its credential, a model client and a standing approval, made by an
  // in-process plane on the same database (its DATA_DIR holds the keys every process shares).
  seedDatabase = await openDatabase({ databaseUrl, dataDir: root });
  seed = await startHosted({ database: seedDatabase });
  const made = await operatorWithClient(seed, {
    secret: "sk_live_multihost_canary_6b0e",
    items: [{ name: "API_KEY" }],
    clientName: "multi-host agent",
  });
  token = made.token;
  operator = made.op;
  const keys = seed.egress.dataDir;
  const certs = join(root, "certs");
  execFileSync("sh", [MAKE_CERTS, certs, SERVICE], { stdio: "ignore" });
  const ticketPublicKeys = readFileSync(join(keys, "control-plane", "ticket-public-keys.txt"), "utf8").trim();

  startProxy = async (host: Host) => {
    const process_ = net.spawnIn(host, [process.execPath, PROXY_MAIN], {
      PATH: process.env.PATH,
      NODE_ENV: "test",
      DATA_DIR: join(root, host.name),
      EGRESS_LISTEN: `${host.ip}:50051`,
      EGRESS_METRICS_LISTEN: `${host.ip}:9090`,
      EGRESS_TLS_CERT: join(certs, "egress.pem"),
      EGRESS_TLS_KEY: join(certs, "egress-key.pem"),
      EGRESS_TLS_CLIENT_CA: join(certs, "ca.pem"),
      EGRESS_SEALING_KEY_FILE: join(keys, "egress", "sealing-keys.json"),
      EGRESS_TICKET_PUBLIC_KEYS: ticketPublicKeys,
      EGRESS_REPLAY_DATABASE_URL: egressDatabaseUrl,
      EGRESS_DRAIN_TIMEOUT_MS: "10000",
      EGRESS_CONNECT_TO: `api.latch.test:443:${net.selfIp}:${origin.port}`,
      EGRESS_ALLOW_CIDRS: `${net.selfIp}/32`,
      EGRESS_EXTRA_CA: PKI_CA,
    });
    proxies.set(host.name, { host, process: process_ });
    await waitFor(
      `proxy ${host.name}`,
      () => process_.lines.some((l) => l.startsWith("LATCH_EGRESS_READY")),
      60_000,
      process_.lines,
    );
  };
  const e1 = net.addHost("e1", 31);
  const e2 = net.addHost("e2", 32);
  dns.setPlan(SERVICE, { A: [e1.ip, e2.ip] });
  await Promise.all([startProxy(e1), startProxy(e2)]);

  startPlane = async (name: string, octet: number) => {
    const host = net.addHost(name, octet, viaResolvConf ? { nameserver: net.selfIp } : {});
    const process_ = net.spawnIn(host, [process.execPath, CP_MAIN], {
      PATH: process.env.PATH,
      NODE_ENV: "development",
      BASE_URL: "http://localhost:8787",
      HOST: host.ip,
      PORT: "8787",
      DATA_DIR: join(root, name),
      DATABASE_URL: databaseUrl,
      EGRESS_URL: viaResolvConf ? `${SERVICE}:50051` : `dns://${dns.server}/${SERVICE}:50051`,
      ...(viaResolvConf ? {} : { GRPC_NODE_USE_ALTERNATIVE_RESOLVER: "true" }),
      EGRESS_CLIENT_TLS_CA: join(certs, "ca.pem"),
      EGRESS_CLIENT_TLS_CERT: join(certs, "control-plane.pem"),
      EGRESS_CLIENT_TLS_KEY: join(certs, "control-plane-key.pem"),
      TICKET_SIGNING_KEY_FILE: join(keys, "control-plane", "ticket-signing-key.pem"),
      KEK_KEYRING_FILE: join(keys, "control-plane", "kek.json"),
      SHUTDOWN_TIMEOUT_MS: "10000",
      METRICS_LISTEN: `${host.ip}:9464`,
    });
    const url = `http://${host.ip}:8787`;
    await waitFor(
      `control plane ${name}`,
      async () =>
        (await fetch(`${url}/ready`).then(
          (r) => r.status,
          () => 0,
        )) === 200,
      90_000,
      process_.lines,
    );
    return { host, process: process_, url };
  };
  for (const [name, octet] of [
    ["cp1", 21],
    ["cp2", 22],
  ] as const) {
    planes.push(await startPlane(name, octet));
  }
  // Standing approval for the agent, asked through one plane and approved by the operator.
  const agent = await connectAgent(planes[0]!.url, token);
  const asked = toolAnswer(
    await agent.callTool({ name: "request_grant", arguments: { item_name: "API_KEY" } }),
  );
  await made.op.request("POST", `/api/grants/${asked.grant_id}/approve`, { policy: "item_standing" });
  planes[0]!.agent = agent;
  planes[1]!.agent = await connectAgent(planes[1]!.url, token);
}, 240_000);

afterAll(async () => {
  process.stdout.write(`multi-host figures:\n  ${figures.join("\n  ")}\n`);
  for (const plane of planes) await plane.agent?.close().catch(() => {});
  await seed?.close();
  await seedDatabase?.close();
  if (pgDir) {
    try {
      execFileSync(
        "runuser",
        ["-u", "postgres", "--", join(PG_BIN!, "pg_ctl"), "-D", pgDir, "-m", "immediate", "stop"],
        {
          stdio: "ignore",
        },
      );
    } catch {
      // not running
    }
  }
  net?.close();
  await origin?.close();
  await dns?.close();
}, 60_000);

let serial = 0;
/** One http_request through plane `i`, tagged so the origin shows how often it arrived. */
async function call(i: number, delay = 0) {
  const tag = `mh${++serial}`;
  const started = Date.now();
  try {
    const answer = toolAnswer(
      await planes[i % planes.length]!.agent!.callTool({
        name: "http_request",
        arguments: { method: "GET", path: `/v1/x?tag=${tag}&delay=${delay}`, item_name: "API_KEY" },
      }),
    );
    return { tag, ok: answer.origin_status === 200, answer, ms: Date.now() - started };
  } catch (error) {
    return { tag, ok: false, error, ms: Date.now() - started };
  }
}
const arrivals = (tag: string) => origin.requests.filter((r) => r.url.includes(`tag=${tag}&`)).length;

describe.skipIf(!canRun)("several hosts: two control planes, two then three proxies, PostgreSQL", () => {
  it("spreads calls from both control planes over every proxy host", async () => {
    const before = await Promise.all([...proxies.values()].map((p) => answered(p.host.ip)));
    const results = await Promise.all(Array.from({ length: 24 }, (_, i) => call(i)));
    expect(results.filter((r) => !r.ok).map((r) => r.answer ?? String(r.error))).toEqual([]);
    for (const r of results) expect(arrivals(r.tag)).toBe(1);
    const after = await Promise.all([...proxies.values()].map((p) => answered(p.host.ip)));
    const perProxy = after.map((n, k) => n - before[k]!);
    figures.push(`24 calls through 2 control planes over 2 proxies: ${perProxy.join(" / ")}`);
    for (const n of perProxy) expect(n).toBeGreaterThan(0);
  }, 60_000);

  it("takes in a third proxy host, and loses a SIGKILLed one without executing any call twice", async () => {
    const e3 = net.addHost("e3", 33);
    await startProxy(e3);
    dns.setPlan(SERVICE, { A: [...proxies.values()].map((p) => p.host.ip) });
    const added = Date.now();
    await waitFor("calls on the third proxy", async () => {
      await call(serial);
      return (await answered(e3.ip)) > 0;
    });
    figures.push(`third proxy host: first call ${Date.now() - added} ms after it entered DNS`);

    const load = Array.from({ length: 12 }, (_, i) => call(i, 1_000));
    await sleep(400);
    const killed = proxies.get("e1")!;
    killed.process.child.kill("SIGKILL");
    const killedAt = Date.now();
    const underLoad = await Promise.all(load);
    const twice = underLoad.filter((r) => arrivals(r.tag) > 1).length;
    expect(twice).toBe(0);
    const after = [];
    let recoveredMs: number | undefined;
    for (let i = 0; i < 12; i++) {
      const r = await call(i);
      after.push(r);
      if (r.ok) recoveredMs ??= Date.now() - killedAt;
    }
    expect(after.filter((r) => !r.ok).map((r) => r.answer ?? String(r.error))).toEqual([]);
    figures.push(
      `SIGKILL of a proxy host with 12 calls in flight: ${underLoad.filter((r) => !r.ok).length} failed for the agent ` +
        `(${underLoad.filter((r) => !r.ok && arrivals(r.tag) === 1).length} of them had reached the origin), ` +
        `0 executed twice; next 12 calls all answered, first ${recoveredMs} ms after the kill`,
    );
    // The dead host leaves the service's DNS answer (as a Kubernetes endpoint would).
    proxies.delete("e1");
    dns.setPlan(SERVICE, { A: [...proxies.values()].map((p) => p.host.ip) });
  }, 120_000);

  it("drains a proxy host on SIGTERM: its calls in flight finish, the agents see no error", async () => {
    const load = Array.from({ length: 8 }, (_, i) => call(i, 1_500));
    await sleep(400);
    const drained = proxies.get("e2")!;
    drained.process.child.kill("SIGTERM");
    const during = [];
    for (let i = 0; i < 6; i++) during.push(await call(i));
    const finished = await Promise.all(load);
    expect(finished.filter((r) => !r.ok).map((r) => r.answer ?? String(r.error))).toEqual([]);
    expect(during.filter((r) => !r.ok).map((r) => r.answer ?? String(r.error))).toEqual([]);
    expect(await drained.process.exited).toBe(0);
    figures.push(
      `SIGTERM of a proxy host with 8 calls in flight: 8/8 finished, 6/6 calls during the drain answered`,
    );
  }, 60_000);

  it("a control-plane host killed mid-call leaves no half-written approval; the other plane carries on", async () => {
    // A one-call approval for a second credential: spent before the request leaves the plane.
    const stored = await operator.request("POST", "/api/items", {
      name: "ONCE_KEY",
      value: "sk_live_multihost_once_0c4d",
      environment: "staging",
      allowed_hosts: ["api.latch.test"],
    });
    expect(stored.statusCode).toBe(201);
    const path = "/v1/once?tag=once&delay=1500";
    const ask = (i: number) =>
      planes[i]!.agent!.callTool({
        name: "http_request",
        arguments: { method: "GET", path, item_name: "ONCE_KEY" },
      }).then(toolAnswer);
    const pending = await ask(0);
    expect(pending.status).toBe("pending");
    const approved = await operator.request("POST", `/api/grants/${pending.grant_id}/approve`, {
      policy: "prompt",
    });
    expect(approved.statusCode).toBe(200);

    const inFlight = ask(0).catch((error: unknown) => ({ lost: String(error) }));
    // Killed while the origin is answering: the approval was spent and the request went out.
    for (let i = 0; i < 100 && !origin.requests.some((r) => r.url === path); i++) await sleep(50);
    planes[0]!.process.child.kill("SIGKILL");
    const lost = await inFlight;
    expect(lost).not.toHaveProperty("origin_status");
    const arrived = origin.requests.filter((r) => r.url === path).length;
    expect(arrived).toBeLessThanOrEqual(1);
    // The approval is consumed, not half-spent: the same call through the other plane asks anew
    // instead of running a second time on the same approval.
    const row = await seedDatabase.db
      .selectFrom("grants")
      .select(["status"])
      .where("id", "=", pending.grant_id!)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe("consumed");
    const again = await ask(1);
    expect(again.status).toBe("pending");
    expect(origin.requests.filter((r) => r.url === path).length).toBe(arrived);
    const next = await call(1);
    expect(next.ok).toBe(true);
    figures.push(
      `SIGKILL of a control-plane host mid-call on a one-call approval: the call reached the origin ${arrived} time(s), ` +
        "the approval stayed consumed, the retry through the other plane was asked anew (pending), the other plane answered on",
    );
  }, 60_000);
});

// Issue 20: faults with one-call approvals in flight. A proxy host is SIGKILLed, or stalls with no
// reset (SIGSTOP); no approval may be spent for a call that never reached the origin, no call may
// arrive twice, a stalled replica leaves the rotation within 5 s and one that comes back takes
// calls within 3 s of answering its health check, and a stalled proxy that wakes up sends nothing
// that was fenced meanwhile.

/** One control plane's `latch_egress_replicas` gauge. */
async function replicasSeenBy(planeIp: string): Promise<Record<string, number>> {
  try {
    const text = await (await fetch(`http://${planeIp}:9464/metrics`)).text();
    const seen: Record<string, number> = {};
    for (const m of text.matchAll(/^latch_egress_replicas\{state="(\w+)"\} (\d+)$/gm))
      seen[m[1]!] = Number(m[2]);
    return seen;
  } catch {
    return {};
  }
}

/** Whether every control plane sees exactly `count` replicas serving and nothing else. */
async function everyPlaneSees(count: number, strict = true): Promise<boolean> {
  const seen = await Promise.all(planes.map((p) => replicasSeenBy(p.host.ip)));
  return seen.every(
    (s) => s.serving === count && (!strict || ((s.not_serving ?? 0) === 0 && (s.unreachable ?? 0) === 0)),
  );
}

async function proxyMetric(ip: string, name: string, label: string): Promise<number> {
  try {
    const text = await (await fetch(`http://${ip}:9090/metrics`)).text();
    return Number(new RegExp(`^${name}\\{[a-z]+="${label}"\\} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** An organisation of its own (the 30-an-hour limit is per organisation) with a one-call item. */
async function newTenant(label: string) {
  const made = await operatorWithClient(seed, {
    secret: `sk_live_multihost_${label}_91c2`,
    items: [{ name: `ONCE_${label.toUpperCase()}` }],
    clientName: `fault agent ${label}`,
  });
  const agents = await Promise.all(planes.map((p) => connectAgent(p.url, made.token, `agent-${label}`)));
  return { label, op: made.op, item: `ONCE_${label.toUpperCase()}`, agents };
}
type Tenant = Awaited<ReturnType<typeof newTenant>>;

interface OnceCall {
  tag: string;
  grantId: string;
  args: { method: string; path: string; item_name: string; timeout_ms: number };
}

/** `n` calls, each asked for (pending) and approved once by the operator (policy prompt). */
async function approveOnce(t: Tenant, wave: string, n: number, delay: number, timeoutMs: number) {
  const calls: OnceCall[] = [];
  for (let i = 0; i < n; i++) {
    const tag = `${t.label}-${wave}-${i}`;
    const args = {
      method: "GET",
      path: `/v1/once?tag=${tag}&delay=${delay}`,
      item_name: t.item,
      timeout_ms: timeoutMs,
    };
    const asked = toolAnswer(await t.agents[0]!.callTool({ name: "http_request", arguments: args }));
    expect(asked.status).toBe("pending");
    const approved = await t.op.request("POST", `/api/grants/${asked.grant_id}/approve`, {
      policy: "prompt",
    });
    expect(approved.statusCode).toBe(200);
    calls.push({ tag, grantId: asked.grant_id!, args });
  }
  return calls;
}

/** Runs one approved call through plane `i`, timing it. */
async function runOnce(t: Tenant, c: OnceCall, i: number) {
  const started = Date.now();
  try {
    const answer = toolAnswer(
      await t.agents[i % t.agents.length]!.callTool({ name: "http_request", arguments: c.args }),
    );
    return { c, answer, ok: answer.origin_status === 200, ms: Date.now() - started };
  } catch (error) {
    return { c, error: String(error), ok: false, ms: Date.now() - started };
  }
}
type OnceResult = Awaited<ReturnType<typeof runOnce>>;

const onceArrivals = (tag: string) => origin.requests.filter((r) => r.url.includes(`tag=${tag}&`)).length;

async function grantStatus(grantId: string): Promise<string> {
  const row = await seedDatabase.db
    .selectFrom("grants")
    .select(["status"])
    .where("id", "=", grantId)
    .executeTakeFirstOrThrow();
  return row.status;
}

/**
 * The promise, call by call: arrived at most once; an approval spent only for a call that reached
 * the origin, kept for one that did not; the agent told which.
 */
async function expectNoApprovalLost(results: OnceResult[]) {
  const wrong: string[] = [];
  for (const r of results) {
    const arrived = onceArrivals(r.c.tag);
    const status = await grantStatus(r.c.grantId);
    if (arrived > 1) wrong.push(`${r.c.tag} arrived ${arrived} times`);
    if (status === "consumed" && arrived !== 1)
      wrong.push(`${r.c.tag}: approval spent, the call never arrived`);
    if (arrived === 0 && status !== "active") wrong.push(`${r.c.tag}: never arrived, approval ${status}`);
    if (r.ok && arrived !== 1) wrong.push(`${r.c.tag}: answered but arrived ${arrived} times`);
    const approval = r.answer?.approval;
    if (!r.ok && approval === "kept" && status !== "active")
      wrong.push(`${r.c.tag}: told kept, is ${status}`);
    if (!r.ok && approval === "spent" && arrived !== 1)
      wrong.push(`${r.c.tag}: told spent, arrived ${arrived}`);
    if (!r.ok && approval === undefined)
      wrong.push(
        `${r.c.tag}: failed without saying where its approval is: ${JSON.stringify(r.answer ?? r.error)}`,
      );
  }
  expect(wrong).toEqual([]);
}

async function auditActions(item: string): Promise<Record<string, number>> {
  const rows = await seedDatabase.db
    .selectFrom("audit_events")
    .select(["action"])
    .where("item_name", "=", item)
    .execute();
  const counts: Record<string, number> = {};
  for (const r of rows) counts[r.action] = (counts[r.action] ?? 0) + 1;
  return counts;
}

/** Waits for a replica's admin /ready to answer 200, then until a call lands on it; both times. */
async function timeToReturn(ip: string) {
  await waitFor(
    `${ip} ready`,
    async () =>
      (await fetch(`http://${ip}:9090/ready`).then(
        (r) => r.status,
        () => 0,
      )) === 200,
    30_000,
  );
  const readyAt = Date.now();
  const before = await answered(ip);
  let firstCallMs: number | undefined;
  let rotationMs: number | undefined;
  while (Date.now() - readyAt < 15_000 && (firstCallMs === undefined || rotationMs === undefined)) {
    if (rotationMs === undefined && (await everyPlaneSees(2))) rotationMs = Date.now() - readyAt;
    if (firstCallMs === undefined) {
      await Promise.all([call(0), call(1)]);
      if ((await answered(ip)) > before) firstCallMs = Date.now() - readyAt;
    }
    await sleep(50);
  }
  return {
    firstCallMs: firstCallMs ?? Number.POSITIVE_INFINITY,
    rotationMs: rotationMs ?? Number.POSITIVE_INFINITY,
  };
}

describe.skipIf(!canRun)("faults with one-call approvals in flight (issue 20)", () => {
  let e4: Host;
  let e5: Host;

  beforeAll(async () => {
    // The control plane killed by the test above is replaced by a new host.
    for (const [i, plane] of planes.entries()) {
      if (plane.process.child.exitCode === null && plane.process.child.signalCode === null) continue;
      const replacement = await startPlane(`cp${i + 3}`, 23 + i);
      replacement.agent = await connectAgent(replacement.url, token);
      planes[i] = replacement;
    }
    e4 = net.addHost("e4", 34);
    e5 = net.addHost("e5", 35);
    await Promise.all([startProxy(e4), startProxy(e5)]);
    dns.setPlan(SERVICE, { A: [e4.ip, e5.ip] });
    await waitFor(
      "both control planes seeing e4 and e5 serving, and only them",
      () => everyPlaneSees(2),
      30_000,
    );
    // Warm keep-alive connections to the origin on both proxies.
    await Promise.all(Array.from({ length: 8 }, (_, i) => call(i)));
  }, 90_000);

  it("SIGKILL: calls it never read get their approvals back, calls it sent stay spent, none twice; it returns within 3 s", async () => {
    const t = await newTenant("kill");
    // Wave 1 reaches the origin and waits there; wave 2 is sent once the proxy is stopped, so the
    // calls routed to it sit unread in its socket until the SIGKILL.
    const wave1 = await approveOnce(t, "w1", 12, 2_500, 5_000);
    const wave2 = await approveOnce(t, "w2", 8, 0, 3_000);
    const victim = proxies.get("e4")!;
    const onVictimBefore = await answered(e4.ip);
    const first = wave1.map((c, i) => runOnce(t, c, i));
    await waitFor("wave 1 at the origin", () => wave1.every((c) => onceArrivals(c.tag) === 1), 20_000);
    victim.process.child.kill("SIGSTOP");
    const second = wave2.map((c, i) => runOnce(t, c, i));
    await sleep(700);
    victim.process.child.kill("SIGKILL");
    const killedAt = Date.now();
    await waitFor("e4 out of the rotation", () => everyPlaneSees(1, false), 10_000);
    const ejectedMs = Date.now() - killedAt;
    const results = [...(await Promise.all(first)), ...(await Promise.all(second))];
    await expectNoApprovalLost(results);

    const kept = results.filter((r) => !r.ok && r.answer?.approval === "kept");
    const spent = results.filter((r) => !r.ok && r.answer?.approval === "spent");
    // Some calls of each wave were on the killed proxy (round robin): the ones it sent stay spent
    // (they reached the origin); the ones it never read were fenced and kept.
    expect(spent.length).toBeGreaterThan(0);
    expect(kept.length).toBeGreaterThan(0);
    for (const r of kept) expect(r.answer?.hint).toContain("your approval is kept");
    const audit = await auditActions(t.item);
    expect(audit.call_not_sent).toBe(kept.length);
    expect(audit.call_outcome_unknown).toBe(spent.length);
    // A kept approval works: the same call, asked again, goes out once on its approval.
    const again = await Promise.all(kept.map((r, i) => runOnce(t, r.c, i)));
    expect(again.filter((r) => !r.ok).map((r) => r.answer ?? r.error)).toEqual([]);
    for (const r of again) expect(onceArrivals(r.c.tag)).toBe(1);
    expect(onVictimBefore).toBeGreaterThan(0);

    // Down for a while (grpc-js' reconnect backoff would have grown to several seconds uncapped),
    // then back on the same address.
    await sleep(6_000);
    proxies.delete("e4");
    await startProxy(e4);
    const back = await timeToReturn(e4.ip);
    figures.push(
      `SIGKILL of a proxy with 20 one-call approvals in flight: ${spent.length} spent (reached the origin, fence lost), ` +
        `${kept.length} kept (never read, fence won) and answered on retry, 0 spent without reaching the origin, 0 twice; ` +
        `out of the rotation ${ejectedMs} ms after the kill; back 6 s later: in the rotation ${back.rotationMs} ms, ` +
        `first call ${back.firstCallMs} ms after its health check answered`,
    );
    expect(back.rotationMs).toBeLessThanOrEqual(3_000);
    expect(back.firstCallMs).toBeLessThanOrEqual(3_000);
    for (const agent of t.agents) await agent.close().catch(() => {});
  }, 120_000);

  it("SIGSTOP (a silent link): ejected within 5 s, stalled calls end within timeout_ms + 2 s, nothing fenced is sent after the wake-up", async () => {
    const t = await newTenant("stall");
    const wave1 = await approveOnce(t, "w1", 12, 2_000, 4_000);
    const wave2 = await approveOnce(t, "w2", 8, 0, 2_000);
    const victim = proxies.get("e5")!;
    const replayedBefore = await proxyMetric(e5.ip, "latch_egress_ticket_refusals_total", "ticket_replayed");
    const first = wave1.map((c, i) => runOnce(t, c, i));
    await waitFor("wave 1 at the origin", () => wave1.every((c) => onceArrivals(c.tag) === 1), 20_000);
    victim.process.child.kill("SIGSTOP");
    const stoppedAt = Date.now();
    const second = wave2.map((c, i) => runOnce(t, c, i));
    await waitFor("e5 out of the rotation", () => everyPlaneSees(1, false), 20_000);
    const ejectedMs = Date.now() - stoppedAt;
    // Out of the rotation: calls go to the other proxy.
    const meanwhile = await Promise.all(Array.from({ length: 6 }, (_, i) => call(i)));
    expect(meanwhile.filter((r) => !r.ok).map((r) => r.answer ?? String(r.error))).toEqual([]);
    const stalled = await Promise.all(second);
    const results = [...(await Promise.all(first)), ...stalled];
    await expectNoApprovalLost(results);
    const slowest = Math.max(...stalled.filter((r) => !r.ok).map((r) => r.ms));
    const kept = results.filter((r) => !r.ok && r.answer?.approval === "kept");
    const spent = results.filter((r) => !r.ok && r.answer?.approval === "spent");
    expect(kept.length).toBeGreaterThan(0);

    // The proxy wakes up with the fenced Executes still in its socket: it reads them, finds them
    // spent by the fence, and sends nothing.
    victim.process.child.kill("SIGCONT");
    const back = await timeToReturn(e5.ip);
    await waitFor(
      "the woken proxy refusing the fenced tickets",
      async () =>
        (await proxyMetric(e5.ip, "latch_egress_ticket_refusals_total", "ticket_replayed")) -
          replayedBefore >=
        kept.filter((r) => wave2.includes(r.c)).length,
      10_000,
    );
    await sleep(1_000);
    for (const r of kept) expect(onceArrivals(r.c.tag)).toBe(0);
    await expectNoApprovalLost(results);
    const audit = await auditActions(t.item);
    expect(audit.call_not_sent).toBe(kept.length);
    expect(audit.call_outcome_unknown ?? 0).toBe(spent.length);
    figures.push(
      `SIGSTOP of a proxy with 20 one-call approvals in flight: out of the rotation after ${ejectedMs} ms; ` +
        `${kept.length} kept (fenced), ${spent.length} spent (had reached the origin), 0 spent without reaching it, 0 twice; ` +
        `slowest stalled call (timeout_ms 2000) ended after ${slowest} ms; after SIGCONT it sent none of the fenced calls, ` +
        `was in the rotation ${back.rotationMs} ms and had its first call ${back.firstCallMs} ms after its health check answered`,
    );
    expect(ejectedMs).toBeLessThanOrEqual(5_000);
    expect(slowest).toBeLessThanOrEqual(2_000 + 2_000);
    expect(back.rotationMs).toBeLessThanOrEqual(3_000);
    expect(back.firstCallMs).toBeLessThanOrEqual(3_000);
    for (const agent of t.agents) await agent.close().catch(() => {});
  }, 120_000);
});
