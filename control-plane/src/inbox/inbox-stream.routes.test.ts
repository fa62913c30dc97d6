// A live inbox stream whose browser goes away while the stream is still opening (the ledger read
// is slow): its place is given back, so a loop of open-and-close cannot use up a session's eight
// streams or the process's, and nothing of it stays subscribed or ticking.
import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import Fastify from "fastify";
import { afterEach, describe, expect, it } from "vitest";
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
