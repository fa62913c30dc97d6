// /ready follows the database alone (spec 4.3, DECISIONS "Faults and isolation"): with every egress
// proxy down the console and approvals still work, so the load balancer must keep the plane; the
// proxies' state is said in the body (and the latch_egress_replicas metric), never as a 503.
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { buildApp } from "../app.ts";
import { READY_PING_REUSE_MS } from "./health.routes.ts";

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

async function readyWith(database: boolean, egress: boolean) {
  const app = await buildApp({
    logger: pino({ level: "silent" }),
    isDatabaseReady: async () => database,
    isEgressServing: () => egress,
  });
  close = () => app.close();
  const response = await app.inject({ method: "GET", url: "/ready" });
  return { status: response.statusCode, body: response.json() };
}

describe("GET /ready", () => {
  it("is 200 with every egress proxy down, and says so", async () => {
    expect(await readyWith(true, false)).toEqual({
      status: 200,
      body: { ok: true, checks: { database: "ok", egress: "unavailable" } },
    });
  });

  it("is 503 when the database ping fails", async () => {
    expect((await readyWith(false, true)).status).toBe(503);
  });

  it("is 200 when both answer", async () => {
    expect(await readyWith(true, true)).toEqual({
      status: 200,
      body: { ok: true, checks: { database: "ok", egress: "ok" } },
    });
  });
});

describe("GET /ready under a flood", () => {
  it("asks the database once for many callers at once, and again only after a while", async () => {
    let pings = 0;
    let isUp = true;
    const app = await buildApp({
      logger: pino({ level: "silent" }),
      isDatabaseReady: async () => {
        pings += 1;
        await new Promise((resolve) => setTimeout(resolve, 20));
        return isUp;
      },
      isEgressServing: () => true,
    });
    close = () => app.close();
    // /ready is public: each caller's own ping took a pooled connection, so a flood starved the
    // plane's queries and timed its own pings out (503 on a healthy database).
    const flood = await Promise.all(
      Array.from({ length: 200 }, () => app.inject({ method: "GET", url: "/ready" })),
    );
    expect(flood.map((answer) => answer.statusCode)).toEqual(Array(200).fill(200));
    expect(pings).toBe(1);
    expect((await app.inject({ method: "GET", url: "/ready" })).statusCode).toBe(200);
    expect(pings).toBe(1);

    isUp = false;
    await new Promise((resolve) => setTimeout(resolve, READY_PING_REUSE_MS + 50));
    expect((await app.inject({ method: "GET", url: "/ready" })).statusCode).toBe(503);
    expect(pings).toBe(2);
  });

  it("answers 503, not 500, when the ping itself throws", async () => {
    const app = await buildApp({
      logger: pino({ level: "silent" }),
      isDatabaseReady: () => Promise.reject(new Error("connection refused")),
      isEgressServing: () => true,
    });
    close = () => app.close();
    const answer = await app.inject({ method: "GET", url: "/ready" });
    expect(answer.statusCode).toBe(503);
    expect(answer.json()).toEqual({ ok: false, checks: { database: "unavailable", egress: "ok" } });
  });
});
