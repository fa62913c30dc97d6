// Spec 8's per-address limits count an address, not its spelling (issue 21 item 2): behind
// TRUST_PROXY, an IPv4-mapped IPv6 address (::ffff:198.51.100.77) is its IPv4 address, and every
// address of one IPv6 /64 (what one home or one cloud instance is given) is one address. The same
// key serves registrations, device code attempts and client metadata document fetches.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, startHosted } from "../hosted.ts";
import { forgetDocumentFetches, pkcePair, RESOURCE } from "./oauth-flow.ts";

/** The load balancer TRUST_PROXY names; what it puts in X-Forwarded-For is the caller. */
const BALANCER = "10.200.0.1";
const DOCS = "addresses.latch.test";
let h: HostedHarness;

beforeAll(async () => {
  h = await startHosted({ trustProxy: BALANCER, providerHosts: [DOCS] });
  await forgetDocumentFetches(DOCS);
  h.egress.setHandler((req, res) => {
    const url = `https://${req.headers.host}${req.url}`;
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ client_id: url, client_name: "Counted", redirect_uris: [REDIRECT] }));
  });
});
afterAll(async () => {
  await h?.close();
});

const REDIRECT = "https://agent.example/callback";

/** A random address of 198.18.0.0/15 (benchmarking), new per test: on PostgreSQL the counts outlive a run. */
function ipv4(): string {
  const [a, b, c] = randomBytes(3);
  return `198.${18 + (a! % 2)}.${b}.${1 + (c! % 254)}`;
}
/** A /64 of the documentation range 2001:db8::/32 (2001:db8:XXXX:YYYY), new per test. */
function ipv6Prefix(): string {
  const [a, b] = [randomBytes(2).toString("hex"), randomBytes(2).toString("hex")];
  return `2001:db8:${a}:${b}`;
}

/** A request through the load balancer on behalf of `caller`. */
function viaBalancer(caller: string) {
  return { remoteAddress: BALANCER, headers: { "x-forwarded-for": caller } };
}

async function registerAs(caller: string) {
  const via = viaBalancer(caller);
  return h.app.inject({
    method: "POST",
    url: "/oauth/register",
    remoteAddress: via.remoteAddress,
    headers: { ...via.headers, "content-type": "application/json" },
    payload: JSON.stringify({ client_name: "Counted", redirect_uris: [REDIRECT] }),
  });
}

describe("POST /oauth/register (20 per hour per address)", () => {
  it("counts an IPv4 address and its IPv4-mapped IPv6 spelling as one", async () => {
    const ip = ipv4();
    const spellings = [ip, `::ffff:${ip}`, `::FFFF:${ip}`];
    for (let i = 0; i < 20; i++) {
      const answer = await registerAs(spellings[i % spellings.length]!);
      expect(answer.statusCode, `registration ${i + 1}: ${answer.body}`).toBe(201);
    }
    for (const spelling of spellings) {
      const limited = await registerAs(spelling);
      expect(limited.statusCode, spelling).toBe(429);
      expect(limited.json().error).toBe("rate_limited");
    }
    // Another address is its own.
    expect((await registerAs(ipv4())).statusCode).toBe(201);
  });

  it("counts every address of one IPv6 /64 as one", async () => {
    const prefix = ipv6Prefix();
    for (let i = 0; i < 20; i++) {
      const answer = await registerAs(`${prefix}:${(i + 1).toString(16)}:0:0:1`);
      expect(answer.statusCode, `registration ${i + 1}: ${answer.body}`).toBe(201);
    }
    // Any other spelling inside the /64, compressed or not.
    expect((await registerAs(`${prefix}::abcd`)).statusCode).toBe(429);
    expect((await registerAs(`${prefix}:ffff:ffff:ffff:ffff`.toUpperCase())).statusCode).toBe(429);
    // The next /64 is another network.
    expect((await registerAs(`${ipv6Prefix()}::1`)).statusCode).toBe(201);
  });
});

describe("device code attempts (10 per 15 minutes per address)", () => {
  /** The hidden xsrf field of the form oidc-provider renders on /device. */
  const xsrfOf = (html: string) => /name="xsrf" value="([^"]+)"/.exec(html)?.[1] ?? "";

  it("count the spellings of one address together", async () => {
    const ip = ipv4();
    const spellings = [ip, `::ffff:${ip}`];
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      // A fresh browser each time: only the per-address count can refuse.
      const via = viaBalancer(spellings[i % 2]!);
      const page = await h.app.inject({ method: "GET", url: "/device", ...via });
      const cookie = (page.cookies as { name: string; value: string }[])
        .map((c) => `${c.name}=${c.value}`)
        .join("; ");
      const attempt = await h.app.inject({
        method: "POST",
        url: "/device",
        remoteAddress: via.remoteAddress,
        headers: { ...via.headers, cookie, "content-type": "application/x-www-form-urlencoded" },
        payload: new URLSearchParams({ xsrf: xsrfOf(page.body), user_code: "ZZZZ-ZZZZ" }).toString(),
      });
      statuses.push(attempt.statusCode);
    }
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(200));
    expect(statuses[10]).toBe(429);
  });
});

describe("client metadata document fetches (10 per hour per requesting address)", () => {
  it("count the addresses of one /64 and the spellings of one address together", async () => {
    for (const spellings of [
      (() => {
        const ip = ipv4();
        return [ip, `::ffff:${ip}`];
      })(),
      (() => {
        const prefix = ipv6Prefix();
        return [`${prefix}::1`, `${prefix}:1:2:3:4`];
      })(),
    ]) {
      const statuses: number[] = [];
      for (let i = 0; i < 11; i++) {
        const clientId = `https://${DOCS}/clients/${randomBytes(6).toString("hex")}.json`;
        const query = new URLSearchParams({
          client_id: clientId,
          redirect_uri: REDIRECT,
          response_type: "code",
          code_challenge: pkcePair().challenge,
          code_challenge_method: "S256",
          resource: RESOURCE,
          scope: "mcp",
        });
        const answer = await h.app.inject({
          method: "GET",
          url: `/oauth/authorize?${query}`,
          ...viaBalancer(spellings[i % 2]!),
        });
        statuses.push(answer.statusCode);
      }
      expect(statuses.slice(0, 10), spellings.join(" ")).toEqual(Array(10).fill(303));
      expect(statuses[10], spellings.join(" ")).toBe(429);
    }
  });
});
