// /ready follows the database alone (spec 4.3, DECISIONS "Faults and isolation"): with every egress
// proxy down the console and approvals still work, so the load balancer must keep the plane; the
// proxies' state is said in the body (and the latch_egress_replicas metric), never as a 503.
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { buildApp } from "../app.ts";

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
