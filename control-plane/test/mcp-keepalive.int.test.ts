// GET /mcp, the SSE keep-alive stream itself (spec 4.1, 6; issue 21 item 13): a model client's
// bearer opens a text/event-stream that carries only keep-alive comments, one at once and one every
// 25 seconds; it names no secret and no event; it ends when the client goes away (its timer with
// it) and when the server closes; a full process makes room for a smaller organisation at the
// expense of the largest. The interval is the only timer faked; the socket is real.
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { buildApp } from "../src/app.ts";
import type { StreamLimits } from "../src/http/keepalive-streams.ts";
import { registerMcpRoutes } from "../src/mcp/mcp.routes.ts";
import { type HostedHarness, operatorWithClient, startHosted } from "./hosted.ts";

let h: HostedHarness;
let url: string;
let token: string;
let isClosed = false;

beforeAll(async () => {
  h = await startHosted();
  url = await h.app.listen({ host: "127.0.0.1", port: 0 });
  ({ token } = await operatorWithClient(h, {
    secret: "sk_live_keepalive_canary_5c1d",
    items: [{ name: "API_KEY" }],
    clientName: "stream agent",
  }));
}, 60_000);

afterEach(() => {
  vi.useRealTimers();
});
afterAll(async () => {
  if (!isClosed) await h?.close();
});

/** Reads from `reader` until `text` holds `count` keep-alive comments. */
async function readKeepalives(reader: ReadableStreamDefaultReader<Uint8Array>, count: number, text = "") {
  const decoder = new TextDecoder();
  let seen = text;
  while ((seen.match(/: latch keepalive\n\n/g) ?? []).length < count) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended after ${JSON.stringify(seen)}`);
    seen += decoder.decode(value, { stream: true });
  }
  return seen;
}

/**
 * One more replica on the harness's database and services, serving the hosted MCP routes as
 * control-plane.ts wires them but with small stream caps: a full process without 2,000 sockets.
 */
async function startReplica(limits: StreamLimits): Promise<{ app: FastifyInstance; url: string }> {
  const { services } = h.plane;
  const baseUrl = "http://localhost:8787";
  const app = await buildApp({
    logger: pino({ level: "silent" }),
    isDatabaseReady: async () => true,
    isEgressServing: () => true,
    sessions: {
      sessions: services.sessions,
      baseUrl,
      now: () => h.clock.now,
      authenticateBearer: services.clients.authenticate,
      hasAuthenticator: services.hasSecondFactor,
    },
    routes: [
      (app) =>
        registerMcpRoutes(
          app,
          {
            baseUrl,
            tools: services.tools,
            logError: () => {},
            isBearerLive: services.clients.isBearerLive,
            authenticateBearer: services.clients.authenticate,
          },
          limits,
        ),
    ],
  });
  return { app, url: await app.listen({ host: "127.0.0.1", port: 0 }) };
}

/** Opens a keep-alive stream on `base` with `bearer`; a 200 has read its first comment. */
async function openStream(base: string, bearer: string) {
  const aborted = new AbortController();
  const response = await fetch(`${base}/mcp`, {
    headers: { authorization: `Bearer ${bearer}` },
    signal: aborted.signal,
  });
  const reader = response.status === 200 ? response.body!.getReader() : undefined;
  if (reader) await readKeepalives(reader, 1);
  return { status: response.status, response, reader, aborted };
}

/** Reads `reader` to its end: true once the stream has ended (a stream left open times the test out). */
async function hasEnded(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<boolean> {
  let rest = await reader.read();
  while (!rest.done) rest = await reader.read();
  return true;
}

describe("GET /mcp", () => {
  it("is an event stream of keep-alive comments only, one at once and one every 25 seconds", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const aborted = new AbortController();
    const response = await fetch(`${url}/mcp`, {
      headers: {
        authorization: `Bearer ${token}`,
        accept: "text/event-stream",
        origin: "https://agent.example",
      },
      signal: aborted.signal,
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    expect(response.headers.get("cache-control")).toBe("no-store");
    expect(response.headers.get("access-control-allow-origin")).toBe("https://agent.example");
    const reader = response.body!.getReader();
    let seen = await readKeepalives(reader, 1);
    expect(seen).toBe(": latch keepalive\n\n");
    // One comment each 25 s after the first.
    vi.advanceTimersByTime(25_000);
    seen = await readKeepalives(reader, 2, seen);
    vi.advanceTimersByTime(25_000);
    seen = await readKeepalives(reader, 3, seen);
    // Comments only: no event, no data line, nothing an agent could read a value from.
    expect(seen).toBe(": latch keepalive\n\n".repeat(3));
    // The client goes away: the server forgets the stream and its timers (keep-alive, re-check).
    expect(vi.getTimerCount()).toBe(2);
    aborted.abort();
    await vi.waitFor(() => expect(vi.getTimerCount()).toBe(0));
  });

  it("needs a model client's bearer: none is 401 with the challenge, an invalid one 401", async () => {
    const none = await fetch(`${url}/mcp`, { headers: { accept: "text/event-stream" } });
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toContain("resource_metadata=");
    const invalid = await fetch(`${url}/mcp`, {
      headers: { authorization: "Bearer avm_not-a-real-token-at-all-000000", accept: "text/event-stream" },
    });
    expect(invalid.status).toBe(401);
  });

  it("holds at most 8 streams for one client: the ninth is 429 rate_limited until one closes", async () => {
    const open = async () => {
      const aborted = new AbortController();
      const response = await fetch(`${url}/mcp`, {
        headers: { authorization: `Bearer ${token}` },
        signal: aborted.signal,
      });
      return { response, aborted };
    };
    const streams = [];
    for (let i = 0; i < 8; i++) streams.push(await open());
    expect(streams.map((s) => s.response.status)).toEqual(Array(8).fill(200));
    const ninth = await open();
    expect(ninth.response.status).toBe(429);
    expect(await ninth.response.json()).toMatchObject({ error: { code: "rate_limited" } });
    streams[0]!.aborted.abort();
    await vi.waitFor(async () => {
      const again = await open();
      expect(again.response.status).toBe(200);
      streams.push(again);
    });
    for (const s of streams.slice(1)) s.aborted.abort();
  });

  it("at a full process, ends the largest organisation's oldest stream for a smaller one's", async () => {
    // Caps of 4 per process and 4 per organisation: one organisation can fill the process.
    const replica = await startReplica({ perHolder: 8, perOrganisation: 4, total: 4 });
    const a = await operatorWithClient(h, {
      secret: "sk_live_keepalive_full_a_7e21",
      items: [{ name: "API_KEY" }],
      clientName: "flooding agent",
    });
    const b = await operatorWithClient(h, {
      secret: "sk_live_keepalive_full_b_3f90",
      items: [{ name: "API_KEY" }],
      clientName: "small agent",
    });
    const opened = [];
    try {
      const aStreams = [];
      for (let i = 0; i < 4; i++) aStreams.push(await openStream(replica.url, a.token));
      opened.push(...aStreams);
      expect(aStreams.map((s) => s.status)).toEqual([200, 200, 200, 200]);

      // B holds none, A the most: B's first stream is admitted and A's oldest ends cleanly.
      const bFirst = await openStream(replica.url, b.token);
      opened.push(bFirst);
      expect(bFirst.status).toBe(200);
      expect(await hasEnded(aStreams[0]!.reader!)).toBe(true);

      // A holds 3 of the full process's 4, the most: its next stream waits, as before (and the
      // ended stream, forgotten when it was ended, was not counted down again when it closed).
      const aAgain = await openStream(replica.url, a.token);
      opened.push(aAgain);
      expect(aAgain.status).toBe(429);
      expect(await aAgain.response.json()).toMatchObject({
        error: { code: "rate_limited", retry_after: 30 },
      });
      // A's other streams are still open.
      for (const s of aStreams.slice(1)) {
        await expect(Promise.race([s.reader!.read(), Promise.resolve("open")])).resolves.toBe("open");
      }

      // B's stream closes: the process holds A's 3; A takes the free place, then B's new stream is
      // admitted again at A's expense.
      bFirst.aborted.abort();
      await vi.waitFor(async () => {
        const aFourth = await openStream(replica.url, a.token);
        opened.push(aFourth);
        expect(aFourth.status).toBe(200);
      });
      const aFifth = await openStream(replica.url, a.token);
      opened.push(aFifth);
      expect(aFifth.status).toBe(429);
      const bAgain = await openStream(replica.url, b.token);
      opened.push(bAgain);
      expect(bAgain.status).toBe(200);
      expect(await hasEnded(aStreams[1]!.reader!)).toBe(true);
    } finally {
      for (const s of opened) s.aborted.abort();
      await replica.app.close();
    }
  });

  it("ends within a minute of its client being revoked", async () => {
    const other = await operatorWithClient(h, {
      secret: "sk_live_keepalive_revoked_91ab",
      items: [{ name: "API_KEY" }],
      clientName: "revoked stream agent",
    });
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const response = await fetch(`${url}/mcp`, { headers: { authorization: `Bearer ${other.token}` } });
    const reader = response.body!.getReader();
    const seen = await readKeepalives(reader, 1);
    // Still live: a minute passes and the stream stays.
    vi.advanceTimersByTime(60_000);
    await readKeepalives(reader, 3, seen);
    const revoked = await other.op.request("POST", `/api/clients/${other.clientId}/revoke`, {});
    expect(revoked.statusCode, revoked.body).toBe(200);
    vi.advanceTimersByTime(60_000);
    let rest = await reader.read();
    while (!rest.done) rest = await reader.read();
    expect(rest.done).toBe(true);
  });

  it("ends when the server closes, so a shutdown is not held open by a client", async () => {
    // The streams an earlier test aborted may still be closing on the server: retried until open.
    const reader = await vi.waitFor(async () => {
      const opened = await openStream(url, token);
      expect(opened.status).toBe(200);
      return opened.reader!;
    });
    isClosed = true;
    await h.close();
    const rest = await reader.read();
    expect(rest.done).toBe(true);
  });
});
