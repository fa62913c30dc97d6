import { AppError } from "@latch/shared/errors";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type DnsAnswerPlan, type RunningDnsServer, startDnsServer } from "../../test/dns-server.ts";
import { type RunningOrigin, readTestCa, startOrigin } from "../../test/origin.ts";
import { createUpstream, type Upstream } from "../upstream/call.ts";
import { parseCidrList } from "./classify.ts";
import { parseConnectTo } from "./connect-to.ts";
import {
  AddressRefused,
  createDestinationResolver,
  type DestinationResolver,
  type ResolverOptions,
} from "./resolve.ts";

const HOST = "api.latch.test";

let origin: RunningOrigin;
let upstream: Upstream;
const dnsServers: RunningDnsServer[] = [];

beforeEach(async () => {
  origin = await startOrigin((_req, res) => res.end("reached"));
  upstream = createUpstream({ extraCa: readTestCa() });
});

afterEach(async () => {
  await upstream.close();
  await origin.close();
  await Promise.all(dnsServers.splice(0).map((d) => d.close()));
});

async function dns(plan: Record<string, DnsAnswerPlan>): Promise<RunningDnsServer> {
  const server = await startDnsServer(plan);
  dnsServers.push(server);
  return server;
}

/** Real DNS through the test server; the connect-to rule keeps DNS and only moves the port. */
function resolverFor(
  server: RunningDnsServer,
  overrides: Partial<ResolverOptions> = {},
): DestinationResolver {
  return createDestinationResolver({
    dnsServers: [server.server],
    connectTo: parseConnectTo(`${HOST}:443::${origin.port}`),
    allowCidrs: parseCidrList("127.0.0.1/32"),
    ...overrides,
  });
}

/** What the proxy does per call: resolve once, then dial only the returned address. */
async function callThrough(resolver: DestinationResolver, host = HOST): Promise<string> {
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

describe("destination resolution over real DNS", () => {
  it("resolves A and AAAA once each and reaches the origin on the pinned address", async () => {
    const server = await dns({ [HOST]: { A: ["127.0.0.1"] } });
    const resolver = resolverFor(server);
    expect(await resolver.resolve(HOST)).toEqual({
      host: HOST,
      address: "127.0.0.1",
      family: 4,
      port: origin.port,
    });
    expect(server.queries).toEqual(
      expect.arrayContaining([
        { name: HOST, type: "A" },
        { name: HOST, type: "AAAA" },
      ]),
    );
    expect(server.queries).toHaveLength(2);
    expect(await callThrough(resolver)).toBe("reached");
    expect(origin.requests).toHaveLength(1);
  });

  it("normalises the host (case, trailing dot) for DNS, rules, SNI and Host", async () => {
    const server = await dns({ [HOST]: { A: ["127.0.0.1"] } });
    const destination = await resolverFor(server).resolve("API.Latch.Test.");
    expect(destination.host).toBe(HOST);
    expect(destination.port).toBe(origin.port);
  });

  it("refuses a private answer and the origin receives nothing", async () => {
    const server = await dns({ [HOST]: { A: ["10.0.0.5"] } });
    const error = await failure(callThrough(resolverFor(server)));
    expect(error.code).toBe("private_range");
    expect(error.message).toContain("10.0.0.0/8");
    expect(origin.requests).toHaveLength(0);
    expect(origin.connections).toBe(0);
  });

  it("refuses a mixed answer whole, even when an allowed address comes first", async () => {
    const server = await dns({ [HOST]: { A: ["127.0.0.1", "10.0.0.1"] } });
    const error = await failure(callThrough(resolverFor(server)));
    expect(error.code).toBe("private_range");
    expect(origin.requests).toHaveLength(0);
  });

  it("names the refused answer in the refusal's verdict (address and block), for the log line", async () => {
    const server = await dns({ [HOST]: { A: ["127.0.0.1", "10.0.0.1"] } });
    const error = await failure(callThrough(resolverFor(server)));
    expect(error).toBeInstanceOf(AddressRefused);
    expect((error as AddressRefused).verdict).toEqual({
      allowed: false,
      reason: "private_range",
      address: "10.0.0.1",
      range: "10.0.0.0/8 (private-use, RFC 1918)",
    });
  });

  it("refuses a mixed answer across families", async () => {
    const server = await dns({ [HOST]: { A: ["127.0.0.1"], AAAA: ["fd00::1"] } });
    expect((await failure(callThrough(resolverFor(server)))).code).toBe("private_range");
    expect(origin.requests).toHaveLength(0);
  });

  it("defeats rebinding: one resolution per call, and the call goes where that answer said", async () => {
    const server = await dns({ [HOST]: { sequence: [{ A: ["127.0.0.1"] }, { A: ["10.0.0.1"] }] } });
    const resolver = resolverFor(server);
    expect(await callThrough(resolver)).toBe("reached");
    // The dial used the checked answer: no second lookup, which would have seen 10.0.0.1.
    expect(server.queries.filter((q) => q.type === "A")).toHaveLength(1);
    expect(origin.requests).toHaveLength(1);

    const error = await failure(callThrough(resolver));
    expect(error.code).toBe("private_range");
    expect(server.queries.filter((q) => q.type === "A")).toHaveLength(2);
    expect(origin.requests).toHaveLength(1);
  });

  it("reuses an answer within its TTL (at most 30 s), deciding on it again for every call", async () => {
    let clock = 1_000_000;
    const server = await dns({
      [HOST]: { A: ["127.0.0.1"], ttl: 3600 },
      "private.latch.test": { A: ["10.0.0.7"], ttl: 3600 },
    });
    const resolver = resolverFor(server, { now: () => clock });
    expect(await callThrough(resolver)).toBe("reached");
    clock += 29_000;
    expect(await callThrough(resolver)).toBe("reached");
    expect(server.queries.filter((q) => q.name === HOST)).toHaveLength(2);
    // Past 30 s the hour-long TTL does not stretch: DNS is asked again.
    clock += 2_000;
    expect(await callThrough(resolver)).toBe("reached");
    expect(server.queries.filter((q) => q.name === HOST)).toHaveLength(4);
    expect(origin.requests).toHaveLength(3);

    // A reused answer is refused like a fresh one, every time.
    for (let i = 0; i < 2; i++) {
      const error = await failure(resolver.resolve("private.latch.test", 5_000));
      expect(error.code).toBe("private_range");
    }
    expect(server.queries.filter((q) => q.name === "private.latch.test")).toHaveLength(2);
  });

  it("reuses no answer whose TTL is 0, nor one with a family failing", async () => {
    const server = await dns({
      [HOST]: { A: ["127.0.0.1"] },
      "half.latch.test": { A: ["127.0.0.1"], ttl: 600, aaaaRcode: "SERVFAIL" },
    });
    const resolver = resolverFor(server);
    await resolver.resolve(HOST, 5_000);
    await resolver.resolve(HOST, 5_000);
    expect(server.queries.filter((q) => q.name === HOST)).toHaveLength(4);
    // AAAA answers SERVFAIL: the A answer serves each call, and each asks again.
    expect((await resolver.resolve("half.latch.test", 5_000)).address).toBe("127.0.0.1");
    expect((await resolver.resolve("half.latch.test", 5_000)).address).toBe("127.0.0.1");
    expect(server.queries.filter((q) => q.name === "half.latch.test" && q.type === "A")).toHaveLength(2);
  });

  it("refuses an IPv4-mapped IPv6 answer as ipv6_embedding", async () => {
    const server = await dns({ [HOST]: { AAAA: ["::ffff:10.0.0.1"] } });
    const error = await failure(callThrough(resolverFor(server)));
    expect(error.code).toBe("ipv6_embedding");
    expect(origin.requests).toHaveLength(0);
  });

  it("refuses ::ffff:127.0.0.1 even though 127.0.0.1 is allowed (families never cross-match)", async () => {
    const server = await dns({ [HOST]: { AAAA: ["::ffff:127.0.0.1"] } });
    expect((await failure(resolverFor(server).resolve(HOST))).code).toBe("ipv6_embedding");
  });

  it("prefers IPv4 and falls back to IPv6 when only AAAA exists", async () => {
    const server = await dns({
      [HOST]: { A: ["127.0.0.1"], AAAA: ["::1"] },
      "v6.latch.test": { AAAA: ["::1"] },
    });
    const resolver = resolverFor(server, { allowCidrs: parseCidrList("127.0.0.1/32,::1/128") });
    expect((await resolver.resolve(HOST)).address).toBe("127.0.0.1");
    expect(await resolver.resolve("v6.latch.test")).toEqual({
      host: "v6.latch.test",
      address: "::1",
      family: 6,
      port: 443,
    });
  });

  it("answers NXDOMAIN with dns_no_address", async () => {
    const server = await dns({});
    const error = await failure(callThrough(resolverFor(server), "missing.latch.test"));
    expect(error.code).toBe("dns_no_address");
  });

  it("answers a name with no records with dns_no_address", async () => {
    const server = await dns({ [HOST]: {} });
    expect((await failure(resolverFor(server).resolve(HOST))).code).toBe("dns_no_address");
  });

  it("never consults /etc/hosts: localhost unknown to the resolver has no address", async () => {
    const server = await dns({});
    expect((await failure(resolverFor(server).resolve("localhost"))).code).toBe("dns_no_address");
  });

  it("maps SERVFAIL to dns_failure", async () => {
    const server = await dns({ [HOST]: { rcode: "SERVFAIL" } });
    expect((await failure(resolverFor(server).resolve(HOST))).code).toBe("dns_failure");
  });

  it("maps a silent resolver to dns_failure within the DNS budget", async () => {
    const server = await dns({ [HOST]: { isSilent: true } });
    const started = performance.now();
    const error = await failure(resolverFor(server, { timeoutMs: 600 }).resolve(HOST));
    expect(error.code).toBe("dns_failure");
    expect(performance.now() - started).toBeLessThan(3_000);
  });

  it("maps the caller's deadline passing during DNS to timeout", async () => {
    const server = await dns({ [HOST]: { isSilent: true } });
    const error = await failure(
      resolverFor(server, { timeoutMs: 5_000 }).resolve(HOST, AbortSignal.timeout(300)),
    );
    expect(error.code).toBe("timeout");
  });
});

describe("connect-to with a target address", () => {
  it("replaces DNS but still applies the address policy", async () => {
    const server = await dns({});
    const refused = createDestinationResolver({
      dnsServers: [server.server],
      connectTo: parseConnectTo(`${HOST}:443:10.0.0.7:443`),
      allowCidrs: parseCidrList("127.0.0.1/32"),
    });
    expect((await failure(refused.resolve(HOST))).code).toBe("private_range");

    const allowed = createDestinationResolver({
      dnsServers: [server.server],
      connectTo: parseConnectTo(`${HOST}:443:127.0.0.1:${origin.port}`),
      allowCidrs: parseCidrList("127.0.0.1/32"),
    });
    expect(await callThrough(allowed)).toBe("reached");
    expect(server.queries).toHaveLength(0);
  });

  it("refuses loopback without an allow range", async () => {
    const resolver = createDestinationResolver({
      connectTo: parseConnectTo(`${HOST}:443:127.0.0.1:1`),
      allowCidrs: [],
    });
    expect((await failure(resolver.resolve(HOST))).code).toBe("loopback");
  });
});

describe("input checks", () => {
  it("refuses an IP literal host", async () => {
    const resolver = createDestinationResolver({ connectTo: [], allowCidrs: [] });
    expect((await failure(resolver.resolve("127.0.0.1"))).code).toBe("ip_literal");
    expect((await failure(resolver.resolve("::1"))).code).toBe("ip_literal");
  });

  it("refuses malformed DNS server entries at construction", () => {
    expect(() =>
      createDestinationResolver({ dnsServers: ["not-an-ip"], connectTo: [], allowCidrs: [] }),
    ).toThrow(expect.objectContaining({ code: "invalid_request" }));
  });
});
