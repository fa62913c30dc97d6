// GET /mcp from a client that goes away while its bearer is still being checked (a flaky network,
// a client that timed out, a load balancer's probe): its socket's `close` fired before the route
// ran, so that event never reaches the stream, and a stream opened anyway would hold its place
// (and its two timers, one asking the database each minute) until the process ends. Eight of them
// would lock the bearer out of GET /mcp with a 429 for good. The route gives the place back.
// Real sockets and database, through the hosted app: the client's row is held by a transaction
// so that the bearer check waits while the client leaves.
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, operatorWithClient, startHosted } from "./hosted.ts";

let h: HostedHarness;
let url: URL;
let token: string;
let clientId: string;

beforeAll(async () => {
  h = await startHosted();
  url = new URL(await h.app.listen({ host: "127.0.0.1", port: 0 }));
  ({ token, clientId } = await operatorWithClient(h, {
    secret: "sk_live_abandoned_stream_canary_51c2",
    items: [{ name: "API_KEY" }],
    clientName: "abandoning agent",
  }));
}, 60_000);
afterAll(async () => {
  await h?.close();
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Sends GET /mcp on a raw socket while the client's row is held (the bearer check marks a use a
 * minute after the last, so it writes that row and waits), resets the connection, then lets the
 * check go on: the route runs for a client already gone.
 */
async function abandonStream(): Promise<void> {
  h.clock.advance(61_000);
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let isHeld!: () => void;
  const held = new Promise<void>((resolve) => {
    isHeld = resolve;
  });
  const holding = h.plane.database.db.transaction().execute(async (tx) => {
    await tx.selectFrom("clients").select("id").where("id", "=", clientId).forUpdate().execute();
    isHeld();
    await released;
  });
  await held;
  const closed = new Promise<void>((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => {
      socket.write(
        `GET /mcp HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`,
      );
      // The request reaches the bearer check, which waits on the row; then a reset, not an
      // orderly close: the server learns at once that nobody is there.
      setTimeout(() => socket.resetAndDestroy(), 150);
    });
    socket.once("close", () => resolve());
    socket.once("error", reject);
  });
  await closed;
  await pause(150);
  release();
  await holding;
  // The route has run for the request that was left.
  await pause(150);
}

describe("GET /mcp from a client that left while its bearer was checked", () => {
  it("gives its place back: the bearer's next stream opens, not a 429", async () => {
    // One more than the per-bearer cap of 8: each would hold a place for ever if none were given back.
    for (let i = 0; i < 9; i++) await abandonStream();
    const aborted = new AbortController();
    const response = await fetch(new URL("/mcp", url), {
      headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" },
      signal: aborted.signal,
    });
    const status = response.status;
    aborted.abort();
    expect(status).toBe(200);
  }, 60_000);
});
