// The live inbox stream's places: one whose browser goes away while the stream is still opening
// (the ledger read is slow) gives its place back, so a loop of open-and-close cannot use up a
// session's eight streams or the process's, and nothing of it stays subscribed or ticking; and a
// full process makes room for another organisation at the expense of the one holding the most
// (http/keepalive-streams.ts, as GET /mcp's streams do), each place given back exactly once.
import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import Fastify from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { registerErrorHandling } from "../http/errors.ts";
import type { StreamLimits } from "../http/keepalive-streams.ts";
import { createInboxHub } from "./inbox-hub.ts";
import { registerInboxStreamRoutes } from "./inbox-stream.routes.ts";

let closeApp: (() => Promise<void>) | undefined;
afterEach(async () => {
  await closeApp?.();
  closeApp = undefined;
});

/** A ledger whose head read waits until `open()` is called. */
function slowLedger() {
  let open: () => void = () => {};
  let gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  return {
    audit: {
      async findHeadSeqs(ids: readonly string[]) {
        await gate;
        return new Map(ids.map((id) => [id, 0]));
      },
      async findRowsAfter() {
        return [];
      },
    },
    release() {
      open();
      gate = Promise.resolve();
    },
  };
}

async function startStreamApp() {
  const ledger = slowLedger();
  const hub = createInboxHub({ audit: ledger.audit, pollMs: 60_000, logger: { warn: () => {} } });
  const app = Fastify();
  registerInboxStreamRoutes(app, {
    hub,
    audit: ledger.audit,
    access: {
      callerOf: async () => ({ organisationId: "org_1", sessionId: "ses_1" }),
      isStillAllowed: async () => true,
    },
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  closeApp = () => app.close();
  const port = (app.server.address() as AddressInfo).port;
  return { ledger, hub, port };
}

/** Sends the stream's request on a raw socket, waits `ms`, and closes the socket unanswered. */
async function openAndDrop(port: number, ms: number): Promise<void> {
  const socket = connect(port, "127.0.0.1");
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  socket.write("GET /api/inbox/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n");
  await new Promise((resolve) => setTimeout(resolve, ms));
  socket.destroy();
}

describe("GET /api/inbox/stream when the browser leaves while it opens", () => {
  it("gives the place back: no subscriber stays, and the session can still open its eight", async () => {
    const { ledger, hub, port } = await startStreamApp();
    for (let i = 0; i < 8; i++) await openAndDrop(port, 20);
    await new Promise((resolve) => setTimeout(resolve, 50));
    ledger.release();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(hub.size).toBe(0);

    const streams = [];
    for (let i = 0; i < 8; i++) {
      const aborted = new AbortController();
      const response = await fetch(`http://127.0.0.1:${port}/api/inbox/stream`, { signal: aborted.signal });
      expect(response.status).toBe(200);
      streams.push(aborted);
    }
    expect(hub.size).toBe(8);
    for (const aborted of streams) aborted.abort();
    await expect.poll(() => hub.size).toBe(0);
  });
});

/**
 * The app with small caps; the caller's organisation and session are the x-org and x-session
 * headers. The ledger read of an organisation in `held` waits until `let` is called.
 */
async function startCappedApp(limits: StreamLimits) {
  const held = new Map<string, Promise<void>>();
  const releases: (() => void)[] = [];
  const hold = (organisationId: string) =>
    held.set(organisationId, new Promise<void>((resolve) => releases.push(resolve)));
  const letThrough = () => {
    held.clear();
    for (const resolve of releases) resolve();
  };
  /** Ledger reads begun: each of an admitted stream. */
  let reads = 0;
  const audit = {
    async findHeadSeqs(ids: readonly string[]) {
      reads++;
      await Promise.all(ids.map((id) => held.get(id)));
      return new Map(ids.map((id) => [id, 0]));
    },
    async findRowsAfter() {
      return [];
    },
  };
  const hub = createInboxHub({ audit, pollMs: 60_000, logger: { warn: () => {} } });
  // Closing, the server drops the kept-alive sockets of the 429s at once rather than wait for them.
  const app = Fastify({ forceCloseConnections: true });
  registerErrorHandling(app);
  registerInboxStreamRoutes(app, {
    hub,
    audit,
    access: {
      callerOf: async (request) => ({
        organisationId: String(request.headers["x-org"]),
        sessionId: String(request.headers["x-session"]),
      }),
      isStillAllowed: async () => true,
    },
    limits,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  closeApp = () => app.close();
  const port = (app.server.address() as AddressInfo).port;

  /** Opens a stream as `session` of `org`; a 200 has read its first bytes and is read to its end. */
  async function open(org: string, session: string) {
    const aborted = new AbortController();
    const response = await fetch(`http://127.0.0.1:${port}/api/inbox/stream`, {
      headers: { "x-org": org, "x-session": session },
      signal: aborted.signal,
    });
    const stream = { status: response.status, isEnded: false, body: "", close: () => aborted.abort() };
    if (response.status !== 200) {
      stream.body = await response.text();
      return stream;
    }
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    stream.body = new TextDecoder().decode(first.value);
    void (async () => {
      try {
        while (!(await reader.read()).done);
      } catch {
        // Aborted by the test.
      }
      stream.isEnded = true;
    })();
    return stream;
  }
  return { hub, open, hold, letThrough, reads: () => reads };
}

describe("GET /api/inbox/stream at a full process", () => {
  const limits = { perHolder: 2, perOrganisation: 4, total: 4 };

  it("admits another organisation's session by ending the oldest stream of the one holding the most", async () => {
    const { hub, open } = await startCappedApp(limits);
    const first = [
      await open("A", "a1"),
      await open("A", "a1"),
      await open("A", "a2"),
      await open("A", "a2"),
    ];
    expect(first.map((s) => s.status)).toEqual([200, 200, 200, 200]);
    // A third stream of one session is refused (its cap), whatever the process holds.
    const third = await open("A", "a1");
    expect(third.status).toBe(429);
    expect(third.body).toContain("rate_limited");

    const other = await open("B", "b1");
    expect(other.status).toBe(200);
    expect(other.body).toContain("retry:");
    // A's oldest ended cleanly (its EventSource reconnects after `retry`); the rest stay open.
    await expect.poll(() => first.map((s) => s.isEnded)).toEqual([true, false, false, false]);
    await expect.poll(() => hub.size).toBe(4);

    // A holds 3, B 1: A's reconnect does not take B's place back (it is 429, with retry_after).
    const again = await open("A", "a1");
    expect(again.status).toBe(429);
    expect(JSON.parse(again.body)).toMatchObject({ error: { code: "rate_limited", retry_after: 30 } });
    expect(other.isEnded).toBe(false);
    for (const stream of [...first, other]) stream.close();
    await expect.poll(() => hub.size).toBe(0);
  });

  it("never leaks a place: after many opens, evictions and closes, the cap admits exactly as many", async () => {
    const { hub, open } = await startCappedApp(limits);
    for (let round = 0; round < 10; round++) {
      const streams = [
        await open("A", "a1"),
        await open("A", "a1"),
        await open("A", "a2"),
        await open("A", "a2"),
      ];
      const other = await open("B", `b${round}`);
      expect([...streams, other].map((s) => s.status)).toEqual([200, 200, 200, 200, 200]);
      for (const stream of [...streams, other]) stream.close();
      await expect.poll(() => hub.size).toBe(0);
    }

    // Four places, as at the start: one organisation fills them, a fifth of its own is refused.
    const full = [await open("A", "a1"), await open("A", "a2"), await open("A", "a3"), await open("A", "a4")];
    expect(full.map((s) => s.status)).toEqual([200, 200, 200, 200]);
    expect((await open("A", "a5")).status).toBe(429);
    expect(full.some((s) => s.isEnded)).toBe(false);
    for (const stream of full) stream.close();
    await expect.poll(() => hub.size).toBe(0);
  });

  it("a stream whose place is taken while it still opens is a 429, its place counted once", async () => {
    const { hub, open, hold, letThrough, reads } = await startCappedApp(limits);
    hold("A");
    const opening = [open("A", "a1"), open("A", "a1"), open("A", "a2"), open("A", "a2")];
    // All four hold their places (taken before the ledger read) and wait for the ledger.
    await expect.poll(reads).toBe(4);
    expect((await open("A", "a3")).status).toBe(429);
    const other = await open("B", "b1");
    expect(other.status).toBe(200);
    letThrough();
    const first = await Promise.all(opening);
    expect(first.map((s) => s.status).sort()).toEqual([200, 200, 200, 429]);
    expect(hub.size).toBe(4);
    for (const stream of [...first, other]) stream.close();
    await expect.poll(() => hub.size).toBe(0);

    const again = [
      await open("A", "a1"),
      await open("A", "a2"),
      await open("A", "a3"),
      await open("A", "a4"),
    ];
    expect(again.map((s) => s.status)).toEqual([200, 200, 200, 200]);
    expect((await open("A", "a5")).status).toBe(429);
    for (const stream of again) stream.close();
    await expect.poll(() => hub.size).toBe(0);
  });
});
