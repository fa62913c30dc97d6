// Spec 8's limits on the OAuth endpoints, held across two control-plane replicas behind one load
// balancer (issue 11 "Done when"): POST /oauth/register 20 per hour per IP; client ID metadata
// document fetches 10 per hour per requesting IP and 30 per hour per document host, each fetch
// counted once whatever its outcome; at most 4 fetches in flight per server (a fifth is a limit
// answer too, spec 7: 429, never a 400) and 3 seconds per fetch. A full window is 429 rate_limited
// with retry_after; the window reopens an hour later.
//
// Each test asks from addresses of its own (fromAddress) and moves the shared clock past the last
// test's window, so the counts start from zero. oidc-provider caches a fetched document (at least
// 300 s, per replica), so every fetch here uses a document URL of its own.
import { randomBytes } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { type HostedHarness, startHosted } from "../hosted.ts";
import {
  forgetDocumentFetches,
  fromAddress,
  pathOf,
  pkcePair,
  RESOURCE,
  register,
  testAddress,
} from "./oauth-flow.ts";

let a: HostedHarness;
let b: HostedHarness;
/** Every document URL the test origin was asked for. */
const fetched: string[] = [];
const REDIRECT = "https://agent.example/callback";
/** The document host the count tests use (the real-client tests use docs.latch.test). */
const HOST = "api.latch.test";

beforeAll(async () => {
  a = await startHosted();
  b = await startHosted({ replicaOf: a });
  await forgetDocumentFetches(HOST);
  // Any path on the origin is a valid client ID metadata document for its own URL.
  a.egress.setHandler((req, res) => {
    const url = `https://${req.headers.host}${req.url}`;
    fetched.push(url);
    // Paths that make a fetch fail in each way a document can: no answer, 404, not JSON, refused.
    if (req.url?.startsWith("/stall/")) return;
    if (req.url?.startsWith("/missing/")) {
      res.statusCode = 404;
      res.end("not found");
      return;
    }
    if (req.url?.startsWith("/not-json/")) {
      res.end("<html>not a document</html>");
      return;
    }
    res.setHeader("content-type", "application/json");
    if (req.url?.startsWith("/bad-redirect/")) {
      res.end(JSON.stringify({ client_id: url, client_name: "Bad", redirect_uris: ["x-evil://a.b/cb"] }));
      return;
    }
    // A client's document says how long it may be kept (a day here, as a popular client's would).
    res.setHeader("cache-control", "public, max-age=86400");
    res.end(JSON.stringify({ client_id: url, client_name: "Counted", redirect_uris: [REDIRECT] }));
  });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

const HOUR_MS = 3_600_000;
/** Moves the replicas' shared clock past every window an earlier test filled. */
const nextWindow = () => a.clock.advance(HOUR_MS + 60_000);

const documentUrl = (host = HOST, folder = "clients") =>
  `https://${host}/${folder}/${randomBytes(6).toString("hex")}.json`;

/** The browser opening /oauth/authorize for a client ID metadata document (one fetch when new). */
async function authorizeWith(app: FastifyInstance, clientId: string) {
  return authorizeWithHeaders(app, clientId, {});
}

async function authorizeWithHeaders(app: FastifyInstance, clientId: string, headers: Record<string, string>) {
  const query = new URLSearchParams({
    client_id: clientId,
    redirect_uri: REDIRECT,
    response_type: "code",
    code_challenge: pkcePair().challenge,
    code_challenge_method: "S256",
    state: "s",
    resource: RESOURCE,
    scope: "mcp",
  });
  return app.inject({ method: "GET", url: `/oauth/authorize?${query}`, headers });
}

/** The document was fetched and the browser went on to consent. */
async function expectFetched(app: FastifyInstance, clientId: string) {
  const answer = await authorizeWith(app, clientId);
  expect(answer.statusCode, answer.body.slice(0, 300)).toBe(303);
  expect(pathOf(String(answer.headers.location))).toMatch(/^\/consent\?uid=/);
  expect(fetched).toContain(clientId);
}

/** 429 rate_limited, the page says which limit and when to try again; the document was never asked for. */
async function expectLimited(app: FastifyInstance, clientId: string, what: RegExp) {
  const answer = await authorizeWith(app, clientId);
  expect(answer.statusCode, answer.body.slice(0, 300)).toBe(429);
  expect(answer.headers.location).toBeUndefined();
  expect(answer.body).toContain("(rate_limited)");
  expect(answer.body).toMatch(what);
  expect(answer.body).toMatch(/try again in \d+ seconds/);
  expect(fetched).not.toContain(clientId);
  return answer;
}
const PER_IP = /at most 10 per hour/;
const PER_HOST = /at most 30 per hour/;

describe("POST /oauth/register: 20 per hour per IP, across replicas", () => {
  it("answers the 21st registration from one address 429 on either replica; others still register", async () => {
    nextWindow();
    const ip = testAddress();
    const [onA, onB] = [fromAddress(a.app, ip), fromAddress(b.app, ip)];
    const metadata = { client_name: "Counted", redirect_uris: [REDIRECT] };
    for (let i = 0; i < 20; i++) {
      const answer = await register(i % 2 === 0 ? onA : onB, metadata);
      expect(answer.statusCode, `registration ${i + 1}: ${answer.body}`).toBe(201);
    }
    for (const app of [onA, onB]) {
      const limited = await register(app, metadata);
      expect(limited.statusCode).toBe(429);
      expect(limited.json().error).toBe("rate_limited");
      expect(limited.json().retry_after).toBeGreaterThan(0);
      expect(limited.json().retry_after).toBeLessThanOrEqual(3600);
      expect(Number(limited.headers["retry-after"])).toBe(limited.json().retry_after);
    }
    // Another address is not limited by this one.
    expect((await register(fromAddress(b.app, testAddress()), metadata)).statusCode).toBe(201);
    // An hour later the window has reopened.
    nextWindow();
    expect((await register(onA, metadata)).statusCode).toBe(201);
  });
});

describe("client ID metadata document fetches: 10 per hour per requesting IP, across replicas", () => {
  it("answers the 11th fetch asked for by one address 429 on either replica; others still fetch", async () => {
    nextWindow();
    const ip = testAddress();
    const [onA, onB] = [fromAddress(a.app, ip), fromAddress(b.app, ip)];
    const first = documentUrl();
    await expectFetched(onA, first);
    for (let i = 1; i < 10; i++) await expectFetched(i % 2 === 0 ? onA : onB, documentUrl());
    await expectLimited(onA, documentUrl(), PER_IP);
    await expectLimited(onB, documentUrl(), PER_IP);
    // The limit counts fetches: a document replica A already holds needs none.
    const cached = await authorizeWith(onA, first);
    expect(cached.statusCode).toBe(303);
    expect(fetched.filter((url) => url === first)).toHaveLength(1);
    // Another address may still have documents fetched from the same host.
    await expectFetched(fromAddress(b.app, testAddress()), documentUrl());
    nextWindow();
    await expectFetched(onB, documentUrl());
  });
});

describe("client ID metadata document fetches: 30 per hour per document host, across replicas", () => {
  it("answers the 31st fetch from one host 429 whoever asks; another host is still fetched", async () => {
    nextWindow();
    // Ten per address at most, so the host's limit is the one reached: four addresses, two replicas.
    const askers = [0, 1, 2, 3].map(() => testAddress());
    for (let i = 0; i < 30; i++) {
      const ip = askers[i % askers.length]!;
      await expectFetched(fromAddress(i % 2 === 0 ? a.app : b.app, ip), documentUrl());
    }
    const fresh = testAddress();
    await expectLimited(fromAddress(a.app, fresh), documentUrl(), PER_HOST);
    await expectLimited(fromAddress(b.app, testAddress()), documentUrl(), PER_HOST);
    // The same fresh address may still have a document fetched from another host.
    await expectFetched(fromAddress(a.app, fresh), documentUrl("docs.latch.test"));
    nextWindow();
    await expectFetched(fromAddress(b.app, fresh), documentUrl());
  });
});

describe("one authorization refused for a limit counts once", () => {
  it("a host-limited authorization takes one place of the asking address, not two", async () => {
    nextWindow();
    const asker = fromAddress(a.app, testAddress());
    for (let i = 0; i < 8; i++) await expectFetched(asker, documentUrl());
    // Three other addresses fill the host's remaining 22 places.
    const others = [0, 1, 2].map(() => fromAddress(b.app, testAddress()));
    for (let i = 0; i < 22; i++) await expectFetched(others[i % 3]!, documentUrl());
    // The asker's 9th: refused for the host (oidc-provider resolves the client twice on a refusal).
    await expectLimited(asker, documentUrl(), PER_HOST);
    // Its 10th, on another host, is still within its own ten.
    await expectFetched(asker, documentUrl("docs.latch.test"));
    await expectLimited(asker, documentUrl("docs.latch.test"), PER_IP);
  });
});

describe("a client ID metadata document fetch refused for the limit", () => {
  it("says when to come back in a Retry-After header, like every other 429", async () => {
    nextWindow();
    const onA = fromAddress(a.app, testAddress());
    for (let i = 0; i < 10; i++) await expectFetched(onA, documentUrl());
    const limited = await expectLimited(onA, documentUrl(), PER_IP);
    const retryAfter = Number(limited.headers["retry-after"]);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    expect(limited.body).toContain(`try again in ${retryAfter} seconds`);
  });
});

describe("a popular client's document is kept as long as its Cache-Control says", () => {
  it("is not fetched again after oidc-provider's 300 s minimum when the document allows a day", async () => {
    // One client's document, on every replica, with traffic all day: were it fetched again every
    // 300 s, two replicas would ask its host 24 times an hour for it alone (the host may serve
    // others too), against spec 8's 30 per hour per host.
    nextWindow();
    const onA = fromAddress(a.app, testAddress());
    const url = documentUrl();
    await expectFetched(onA, url);
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now() + 10 * 60_000);
      const again = await authorizeWith(onA, url);
      expect(again.statusCode, again.body.slice(0, 300)).toBe(303);
      expect(fetched.filter((f) => f === url)).toHaveLength(1);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("behind a load balancer (TRUST_PROXY)", () => {
  it("counts the address a trusted balancer forwards, and ignores X-Forwarded-For from anyone else", async () => {
    nextWindow();
    const balancer = testAddress();
    // A range as well as an address; outside 10.0.0.0/8, where testAddress() picks every caller's
    // address (a caller drawn inside a trusted range would pick its own address, and count for none).
    const behind = await startHosted({ replicaOf: a, trustProxy: `${balancer},172.31.0.0/16` });
    try {
      const viaBalancer = fromAddress(behind.app, balancer);
      const metadata = { client_name: "Counted", redirect_uris: [REDIRECT] };
      const [alice, bob] = [testAddress(), testAddress()];
      for (let i = 0; i < 20; i++) {
        const answer = await register(viaBalancer, metadata, { "x-forwarded-for": alice });
        expect(answer.statusCode, `registration ${i + 1}: ${answer.body}`).toBe(201);
      }
      expect((await register(viaBalancer, metadata, { "x-forwarded-for": alice })).statusCode).toBe(429);
      // Another caller behind the same balancer has a window of their own.
      expect((await register(viaBalancer, metadata, { "x-forwarded-for": bob })).statusCode).toBe(201);
      // A document fetch is counted against the forwarded address too (its 10 per hour).
      const carol = testAddress();
      for (let i = 0; i < 10; i++) {
        const answer = await authorizeWithHeaders(viaBalancer, documentUrl(), { "x-forwarded-for": carol });
        expect(answer.statusCode, answer.body.slice(0, 300)).toBe(303);
      }
      const limited = await authorizeWithHeaders(viaBalancer, documentUrl(), { "x-forwarded-for": carol });
      expect(limited.statusCode).toBe(429);
      expect(limited.body).toMatch(PER_IP);
      const dave = await authorizeWithHeaders(viaBalancer, documentUrl(), {
        "x-forwarded-for": testAddress(),
      });
      expect(dave.statusCode, dave.body.slice(0, 300)).toBe(303);

      // A caller that is not a trusted balancer cannot pick its address: a fresh X-Forwarded-For on
      // every registration still counts against its own socket address, on either plane.
      const direct = testAddress();
      for (let i = 0; i < 20; i++) {
        const app = fromAddress(i % 2 === 0 ? a.app : behind.app, direct);
        const answer = await register(app, metadata, { "x-forwarded-for": testAddress() });
        expect(answer.statusCode, `registration ${i + 1}: ${answer.body}`).toBe(201);
      }
      const spoofed = await register(fromAddress(behind.app, direct), metadata, {
        "x-forwarded-for": testAddress(),
      });
      expect(spoofed.statusCode).toBe(429);
    } finally {
      await behind.close();
    }
  });

  it("refuses a TRUST_PROXY that is not addresses or ranges, naming it", () => {
    for (const bad of ["everyone", "10.0.0.0/33", "10.0.0.1/8/1", "::1/129", "10.0.0.1,"]) {
      expect(() => loadConfig({ TRUST_PROXY: bad }), bad).toThrow(/TRUST_PROXY/);
    }
    expect(loadConfig({ TRUST_PROXY: " 10.0.0.1, 10.1.0.0/16 ,::1/128" }).TRUST_PROXY).toEqual([
      "10.0.0.1",
      "10.1.0.0/16",
      "::1/128",
    ]);
    expect(loadConfig({}).TRUST_PROXY).toEqual([]);
  });
});

describe("fetches that fail count once each (issue 21 item 4: spec 8, 10 per hour per address)", () => {
  it("ten fetched documents, failed or not, are ten; the eleventh is refused 429", async () => {
    nextWindow();
    const asker = fromAddress(a.app, testAddress());
    for (const folder of ["missing", "not-json", "bad-redirect", "clients", "missing"]) {
      for (let i = 0; i < 2; i++) {
        const url = documentUrl(HOST, folder);
        const answer = await authorizeWith(asker, url);
        expect(answer.statusCode, `${folder}: ${answer.body.slice(0, 300)}`).toBe(
          folder === "clients" ? 303 : 400,
        );
        expect(fetched.filter((f) => f === url)).toHaveLength(1);
      }
    }
    await expectLimited(asker, documentUrl(), PER_IP);
  });
});

describe("one fetch takes at most 3 seconds (spec 8)", () => {
  it("a document host that never answers is given up after 3 s: 400 invalid_client, no consent", async () => {
    nextWindow();
    const url = documentUrl(HOST, "stall");
    const started = performance.now();
    const answer = await authorizeWith(fromAddress(a.app, testAddress()), url);
    const took = performance.now() - started;
    expect(answer.statusCode, answer.body.slice(0, 300)).toBe(400);
    expect(answer.headers.location).toBeUndefined();
    expect(answer.body).toContain("(invalid_client)");
    expect(answer.body).toContain("timeout");
    expect(fetched).toContain(url);
    expect(took).toBeGreaterThanOrEqual(2_900);
    expect(took).toBeLessThan(6_000);
  });
});

describe("at most 4 fetches in flight on one server (spec 8)", () => {
  it("the fifth at once is a limit answer, 429 with Retry-After, and nothing is fetched for it", async () => {
    nextWindow();
    const stalled = [0, 1, 2, 3].map(() => documentUrl(HOST, "stall"));
    const inFlight = stalled.map((url) => authorizeWith(fromAddress(a.app, testAddress()), url));
    // Wait until all four are at the origin, then ask for a fifth document from another address.
    await vi.waitFor(() => expect(stalled.every((url) => fetched.includes(url))).toBe(true), {
      timeout: 2_500,
    });
    const fifth = documentUrl();
    const refused = await authorizeWith(fromAddress(a.app, testAddress()), fifth);
    expect(refused.statusCode, refused.body.slice(0, 300)).toBe(429);
    expect(refused.body).toContain("(rate_limited)");
    expect(refused.body).toContain("at most 4 at once");
    expect(Number(refused.headers["retry-after"])).toBeGreaterThan(0);
    expect(fetched).not.toContain(fifth);
    // Another replica has its own four.
    await expectFetched(fromAddress(b.app, testAddress()), documentUrl());
    for (const answer of await Promise.all(inFlight)) expect(answer.statusCode).toBe(400);
    // Once they are done, the same document is fetched.
    await expectFetched(fromAddress(a.app, testAddress()), fifth);
  }, 15_000);
});
