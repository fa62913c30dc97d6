// A hostile DNS server against the resolver's memory: an answer of thousands of records (sent
// over TCP after a truncated UDP answer), a new answer on every query, names asked once. The
// answer is refused past 32 addresses a family and both caches stay bounded in count and size.
import { AppError } from "@latch/shared/errors";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type DnsAnswer, type RunningDnsServer, startDnsServer } from "../../test/dns-server.ts";
import { type RunningOrigin, readTestCa, startOrigin } from "../../test/origin.ts";
import { createUpstream, type Upstream } from "../upstream/call.ts";
import { parseCidrList } from "./classify.ts";
import { parseConnectTo } from "./connect-to.ts";
import {
  type CachingDestinationResolver,
  createDestinationResolver,
  type ResolverOptions,
} from "./resolve.ts";

const HOST = "api.latch.test";

let origin: RunningOrigin;
let upstream: Upstream;
let dns: RunningDnsServer | undefined;

beforeEach(async () => {
  origin = await startOrigin((_req, res) => res.end("reached"));
  upstream = createUpstream({ extraCa: readTestCa() });
});

afterEach(async () => {
  await upstream.close();
  await origin.close();
  await dns?.close();
  dns = undefined;
});

/** Real DNS over UDP and TCP; the connect-to rule keeps DNS and moves HOST to the origin's port. */
async function resolverFor(
  answers: Record<string, DnsAnswer>,
  overrides: Partial<ResolverOptions> = {},
): Promise<CachingDestinationResolver> {
  dns = await startDnsServer(answers, undefined, { isTcpServed: true });
  return createDestinationResolver({
    dnsServers: [dns.server],
    connectTo: parseConnectTo(`${HOST}:443::${origin.port}`),
    allowCidrs: parseCidrList("127.0.0.0/24"),
    ...overrides,
  });
}

/** What the proxy does per call: resolve once, then dial only the returned address. */
async function callThrough(resolver: CachingDestinationResolver, host = HOST): Promise<string> {
  const destination = await resolver.resolve(host, AbortSignal.timeout(5_000));
  const response = await upstream.call({
    destination,
    method: "GET",
    path: "/",
    headers: [],
    timeoutMs: 5_000,
  });
  return response.body.toString();
}

async function failure(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  }
  throw new Error("expected a refusal");
}

/** `count` loopback addresses 127.0.0.1..., all inside the test's allow range. */
function loopbacks(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `127.0.0.${i + 1}`);
}

/** `count` distinct public addresses of the longest text form, varied by `salt`. */
function longAnswer(salt: number, count: number): DnsAnswer {
  return {
    A: Array.from(
      { length: count },
      (_, i) => `198.${100 + (salt % 100)}.${Math.floor(salt / 100)}.${i + 100}`,
    ),
    AAAA: Array.from(
      { length: count },
      (_, i) => `2606:4700:4700:1111:2222:3333:${(salt + 4096).toString(16)}:${(i + 4096).toString(16)}`,
    ),
    ttl: 30,
  };
}

describe("an answer with too many addresses", () => {
  it("reads 32 addresses a family and reaches the origin on the first", async () => {
    const resolver = await resolverFor({ [HOST]: { A: loopbacks(32) } });
    expect(await callThrough(resolver)).toBe("reached");
  });

  it("refuses 33 IPv4 addresses with dns_failure, dialling nothing", async () => {
    const resolver = await resolverFor({ [HOST]: { A: loopbacks(33) } });
    const error = await failure(callThrough(resolver));
    expect(error.code).toBe("dns_failure");
    expect(error.message).toBe(`${HOST} answers more than 32 IPv4 addresses, which Latch does not read`);
    expect(origin.connections).toBe(0);
  });

  it("refuses 33 IPv6 addresses beside a good IPv4 one", async () => {
    const AAAA = Array.from({ length: 33 }, (_, i) => `2606:4700::${i + 1}`);
    const resolver = await resolverFor({ [HOST]: { A: ["127.0.0.1"], AAAA } });
    expect((await failure(callThrough(resolver))).code).toBe("dns_failure");
    expect(origin.connections).toBe(0);
  });

  it("refuses thousands of records sent over TCP after a truncated UDP answer, keeping nothing", async () => {
    // 2,000 A and 1,000 AAAA records, the rest of an attack that sends them on every query.
    const A = Array.from({ length: 2_000 }, (_, i) => `127.0.${Math.floor(i / 250)}.${(i % 250) + 1}`);
    const AAAA = Array.from({ length: 1_000 }, (_, i) => `2606:4700::${(i + 1).toString(16)}`);
    const resolver = await resolverFor({ [HOST]: { A, AAAA, ttl: 30 } });
    for (let i = 0; i < 3; i++) {
      expect((await failure(callThrough(resolver))).code).toBe("dns_failure");
    }
    expect(origin.connections).toBe(0);
    expect(resolver.cacheSizes()).toEqual({ answers: 0, decisions: 0, decisionKeyChars: 0 });
  });
});

describe("the caches stay bounded", () => {
  it("keeps the decisions' keys under their size bound when every name answers a long new answer", async () => {
    const NAMES = 400;
    const answers = Object.fromEntries(
      Array.from({ length: NAMES }, (_, i) => [`h${i}.attacker.test`, longAnswer(i, 32)]),
    );
    const resolver = await resolverFor(answers, { allowCidrs: [] });
    for (let i = 0; i < NAMES; i++) {
      expect((await resolver.resolve(`h${i}.attacker.test`, 5_000)).family).toBe(4);
    }
    const sizes = resolver.cacheSizes();
    // Each key is about 1,700 characters: the 512 KiB bound keeps about 300 of the 400.
    expect(sizes.decisionKeyChars).toBeLessThanOrEqual(512 * 1024);
    expect(sizes.decisions).toBeLessThan(NAMES);
    expect(sizes.decisions).toBeGreaterThan(250);
    expect(sizes.answers).toBe(NAMES);
    // The last answer is still decided from the cache: its name asks DNS no more.
    const asked = dns?.queries.length;
    await resolver.resolve(`h${NAMES - 1}.attacker.test`, 5_000);
    expect(dns?.queries.length).toBe(asked);
  });

  it("sweeps expired answers, even when no new answer is kept", async () => {
    let clock = 1_000_000;
    const NAMES = 50;
    const answers = Object.fromEntries(
      Array.from({ length: NAMES }, (_, i) => [`h${i}.latch.test`, { A: ["127.0.0.1"], ttl: 10 }]),
    );
    const resolver = await resolverFor(answers, { now: () => clock });
    for (let i = 0; i < NAMES; i++) await resolver.resolve(`h${i}.latch.test`, 5_000);
    expect(resolver.cacheSizes().answers).toBe(NAMES);

    // Within the sweep's period nothing moves; past it, a call that keeps nothing (an unknown
    // name) still drops every expired answer.
    clock += 10_000;
    expect((await failure(resolver.resolve("missing.latch.test", 5_000))).code).toBe("dns_no_address");
    expect(resolver.cacheSizes().answers).toBe(NAMES);
    clock += 21_000;
    expect((await failure(resolver.resolve("missing.latch.test", 5_000))).code).toBe("dns_no_address");
    expect(resolver.cacheSizes().answers).toBe(0);
  });
});
