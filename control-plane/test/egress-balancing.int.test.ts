// Calls spread over real proxy processes behind one service name (round_robin over DNS, health
// through grpc.health.v1), a drained replica finishes its calls and takes no new ones, a killed one
// stops getting calls, a call is never executed twice, and a new replica is found by re-resolving.
import "./grpc-test-dns.ts";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { credentials, Metadata, type ServiceError, status } from "@grpc/grpc-js";
import { EgressProxyClient } from "@latch/proto/egress";
import { HealthCheckResponse_ServingStatus, HealthClient } from "@latch/proto/health";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTicketFence } from "../src/egress/ticket-fence.ts";
import { type ProxyFleet, type ProxyProcess, SERVICE_NAME, startProxyFleet } from "./proxy-fleet.ts";

let fleet: ProxyFleet;
let a: ProxyProcess;
let b: ProxyProcess;

beforeAll(async () => {
  fleet = await startProxyFleet();
  fleet.publish(["127.0.0.1", "127.0.0.2"]);
  a = await fleet.start("127.0.0.1");
  b = await fleet.start("127.0.0.2");
  await fleet.waitForServing(2);
  fleet.setHandler((req, res) => {
    const delay = Number(new URL(req.url ?? "/", "https://x").searchParams.get("delay") ?? 0);
    setTimeout(() => res.end(`ok ${req.url}`), delay);
  });
}, 60_000);
/** The figures the README quotes, printed once at the end. */
const figures: string[] = [];
afterAll(async () => {
  process.stdout.write(`egress balancing figures:\n  ${figures.join("\n  ")}\n`);
  await fleet?.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let serial = 0;

/** One call through the fleet, tagged so the origin's record shows how often it arrived. */
async function call(options: { delay?: number; requestId?: string } = {}) {
  const tag = `c${++serial}`;
  const spec = await fleet.callSpec(`/v1/echo?tag=${tag}&delay=${options.delay ?? 0}`);
  try {
    const response = await fleet.client.execute(fleet.minter.mintCallTicket(spec), 10_000, {
      requestId: options.requestId,
    });
    return { tag, ok: response.originStatus === 200 && !response.error, response };
  } catch (error) {
    return { tag, ok: false, error };
  }
}

function arrivals(tag: string): number {
  return fleet.origin.requests.filter((r) => r.url.includes(`tag=${tag}&`)).length;
}

function tlsCredentials() {
  const dir = fleet.certDir;
  return credentials.createSsl(
    readFileSync(join(dir, "ca.pem")),
    readFileSync(join(dir, "control-plane-key.pem")),
    readFileSync(join(dir, "control-plane.pem")),
  );
}

/** A health client of one replica, by address, checking the certificate against the service name. */
function healthOf(ip: string) {
  return new HealthClient(`ipv4:${ip}:${fleet.port}`, tlsCredentials(), {
    "grpc.ssl_target_name_override": SERVICE_NAME,
  });
}

function check(client: HealthClient, service = ""): Promise<HealthCheckResponse_ServingStatus | string> {
  return new Promise((resolve) =>
    client.check({ service }, new Metadata(), { deadline: Date.now() + 2_000 }, (error, response) =>
      resolve(error ? `error ${error.code}` : response.status),
    ),
  );
}

describe("the control plane balances over every proxy replica", () => {
  it("spreads calls over both replicas, each call arriving once", async () => {
    const [beforeA, beforeB] = [await a.answeredCalls(), await b.answeredCalls()];
    const results = [];
    for (let i = 0; i < 20; i++) results.push(await call());
    expect(results.every((r) => r.ok)).toBe(true);
    for (const r of results) expect(arrivals(r.tag)).toBe(1);
    const [onA, onB] = [(await a.answeredCalls()) - beforeA, (await b.answeredCalls()) - beforeB];
    expect(onA + onB).toBe(20);
    figures.push(`20 sequential calls over 2 replicas: ${onA} / ${onB}`);
    // round_robin: every replica takes its turn.
    expect(onA).toBeGreaterThanOrEqual(8);
    expect(onB).toBeGreaterThanOrEqual(8);
  });

  it("serves grpc.health.v1: SERVING for the server and the egress service, NOT_FOUND for others", async () => {
    const health = healthOf("127.0.0.1");
    expect(await check(health)).toBe(HealthCheckResponse_ServingStatus.SERVING);
    expect(await check(health, "latch.egress.v1.EgressProxy")).toBe(
      HealthCheckResponse_ServingStatus.SERVING,
    );
    expect(await check(health, "something.Else")).toBe("error 5");
    health.close();
  });

  it("asks GetInfo of each replica by its address, with the call channel's certificate check", async () => {
    const replicas = fleet.client.replicas?.() ?? [];
    expect(replicas.map((r) => r.address).sort()).toEqual([
      `127.0.0.1:${fleet.port}`,
      `127.0.0.2:${fleet.port}`,
    ]);
    const idsOf = async () =>
      Promise.all(replicas.map(async (r) => (await fleet.client.getInfoOf!(r.address)).replicaId));
    const first = await idsOf();
    // Two replicas, two ids, and the same replica each time it is asked (not round robin's pick).
    expect(new Set(first).size).toBe(2);
    expect(await idsOf()).toEqual(first);
    // An address with no replica behind it does not answer.
    await expect(fleet.client.getInfoOf!(`127.0.0.9:${fleet.port}`)).rejects.toMatchObject({
      code: "egress_unavailable",
    });
  });

  it("fences nothing in a table while the replicas keep spent ids in their own memory", async () => {
    // Two real replicas, each on its memory store: each is asked by address, neither reports the
    // table, so an unanswered call's fence concludes nothing (one may have run the ticket).
    let inserts = 0;
    const fence = createTicketFence({
      egress: fleet.client,
      spentTickets: {
        findStoreId: async () => "store:balancing",
        insertFence: async () => {
          inserts += 1;
          return true;
        },
      },
    });
    const ticket = fleet.minter.mintCallTicket(await fleet.callSpec("/v1/echo?tag=fence&delay=0"));
    expect(await fence.fence(ticket, () => {})).toBe("unknown");
    expect(await fence.isStoreShared()).toBe(false);
    expect(inserts).toBe(0);
  });

  it("carries the request id to the replica's log lines", async () => {
    const result = await call({ requestId: "req-balance-7f3a" });
    expect(result.ok).toBe(true);
    // The replica's line arrives through its stdout pipe, maybe a moment after the answer.
    const logged = () =>
      [...a.lines, ...b.lines].filter((line) => line.includes('"request_id":"req-balance-7f3a"'));
    for (let i = 0; i < 50 && logged().length === 0; i++) await sleep(100);
    expect(logged().length).toBeGreaterThanOrEqual(1);
    // An id that is not a plain token is not copied into a log line.
    await call({ requestId: "bad id\nforged" });
    await sleep(500);
    expect([...a.lines, ...b.lines].some((line) => line.includes("forged"))).toBe(false);
  });

  it("drains on SIGTERM: NOT_SERVING, calls in flight finish, new calls go to the other replica", async () => {
    // Slow calls in flight on both replicas.
    const inFlight = Array.from({ length: 6 }, () => call({ delay: 1_500 }));
    await sleep(400);
    const health = healthOf("127.0.0.1");
    a.child.kill("SIGTERM");
    await sleep(60);
    // A burst right after the signal, before any health probe ran: the calls round_robin hands to
    // the draining replica are refused unread and sent once more to the other one.
    const burst = await Promise.all(Array.from({ length: 10 }, () => call()));
    expect(burst.filter((r) => !r.ok)).toEqual([]);
    figures.push(
      `SIGTERM drain: 10-call burst right after the signal, ${burst.filter((r) => r.ok).length}/10 ok`,
    );
    for (const r of burst) expect(arrivals(r.tag)).toBe(1);
    // NOT_SERVING from the moment the proxy handled the signal (a loaded machine may take a moment).
    let served = await check(health);
    for (let i = 0; i < 30 && served !== HealthCheckResponse_ServingStatus.NOT_SERVING; i++) {
      await sleep(100);
      served = await check(health);
    }
    expect(served).toBe(HealthCheckResponse_ServingStatus.NOT_SERVING);
    // The admin listener's /ready (for probes without a client certificate) says the same.
    expect((await fetch(`${a.adminUrl}/ready`)).status).toBe(503);
    expect((await fetch(`${b.adminUrl}/ready`)).status).toBe(200);
    expect((await fetch(`${a.adminUrl}/health`)).status).toBe(200);
    // A call sent straight to the draining replica is refused before its ticket is read, with the
    // trailer that makes it safe to send elsewhere; the same ticket then works on the other one.
    const ticket = fleet.minter.mintCallTicket(await fleet.callSpec("/v1/echo?tag=direct&delay=0"));
    const direct = new EgressProxyClient(`ipv4:127.0.0.1:${fleet.port}`, tlsCredentials(), {
      "grpc.ssl_target_name_override": SERVICE_NAME,
    });
    const refusal = await new Promise<ServiceError | null>((resolve) =>
      direct.execute({ ticket }, new Metadata(), { deadline: Date.now() + 2_000 }, (error) => resolve(error)),
    );
    expect(refusal?.code).toBe(status.UNAVAILABLE);
    expect(refusal?.metadata.get("latch-call-not-started")).toEqual(["1"]);
    expect(arrivals("direct")).toBe(0);
    const elsewhere = await fleet.client.execute(ticket, 10_000);
    expect(elsewhere.originStatus).toBe(200);
    expect(arrivals("direct")).toBe(1);
    // While it drains, calls through the balanced client all succeed.
    const during = [];
    for (let i = 0; i < 10; i++) during.push(await call());
    expect(during.filter((r) => !r.ok)).toEqual([]);
    for (const r of during) expect(arrivals(r.tag)).toBe(1);
    const finished = await Promise.all(inFlight);
    expect(finished.filter((r) => !r.ok)).toEqual([]);
    for (const r of finished) expect(arrivals(r.tag)).toBe(1);
    expect(await a.exited).toBe(0);
    expect(a.lines.some((line) => line.includes("draining"))).toBe(true);
    direct.close();
    health.close();
  });

  it("finds a replica added behind the name, and stops sending to a replica killed with SIGKILL", async () => {
    // The drained replica comes back (a rolling update's new pod) and a third one is added.
    a = await fleet.start("127.0.0.1");
    const c = await fleet.start("127.0.0.3");
    fleet.publish(["127.0.0.1", "127.0.0.2", "127.0.0.3"]);
    const started = Date.now();
    let seenOnC = 0;
    while (Date.now() - started < 20_000) {
      const result = await call();
      expect(result.ok).toBe(true);
      seenOnC = await c.answeredCalls();
      if (seenOnC > 0) break;
      await sleep(200);
    }
    expect(seenOnC).toBeGreaterThan(0);
    figures.push(`a third replica added to DNS took its first call after ${Date.now() - started} ms`);

    // SIGKILL one replica under load: calls in flight on it may fail (they may have reached the
    // origin, so they are not retried), no call arrives twice, and the others carry on.
    const load = Array.from({ length: 9 }, () => call({ delay: 800 }));
    await sleep(300);
    b.child.kill("SIGKILL");
    const killedAt = Date.now();
    const underLoad = await Promise.all(load);
    figures.push(
      `SIGKILL under load: ${underLoad.filter((r) => !r.ok).length}/9 calls in flight failed (not retried), ` +
        `${underLoad.filter((r) => arrivals(r.tag) > 1).length} executed twice`,
    );
    for (const r of underLoad) expect(arrivals(r.tag)).toBeLessThanOrEqual(1);
    let firstOkAfterKill: number | undefined;
    const after = [];
    for (let i = 0; i < 12; i++) {
      const r = await call();
      after.push(r);
      if (r.ok && firstOkAfterKill === undefined) firstOkAfterKill = Date.now();
    }
    expect(after.filter((r) => !r.ok)).toEqual([]);
    for (const r of after) expect(arrivals(r.tag)).toBe(1);
    expect(firstOkAfterKill! - killedAt).toBeLessThan(5_000);
    figures.push(
      `after SIGKILL: 12/12 later calls ok, first ok ${firstOkAfterKill! - killedAt} ms after the kill`,
    );
    fleet.publish(["127.0.0.1", "127.0.0.3"]);
  }, 60_000);
});
