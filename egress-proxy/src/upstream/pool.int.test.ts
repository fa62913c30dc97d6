// The bound on kept pools over real TLS: past `maxPools`, the least recently used pools with
// nothing in flight are closed, and a pool with a call in it never is (closing it would let its
// organisation open a second set of connections to the origin beside the one draining).
import { afterEach, describe, expect, it } from "vitest";
import { type RunningOrigin, readTestCa, startOrigin } from "../../test/origin.ts";
import type { Destination } from "../destination/resolve.ts";
import { createPoolSet, type PoolSet } from "./pool.ts";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

function destinationOf(origin: RunningOrigin): Destination {
  return { host: "api.latch.test", address: "127.0.0.1", family: 4, port: origin.port };
}

function track(pools: PoolSet): PoolSet {
  cleanups.push(() => pools.close());
  return pools;
}

describe("the bound on kept pools", () => {
  it("closes idle pools of other organisations first and never one with a call in flight", async () => {
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const origin = await startOrigin((req, res) => {
      if (req.url === "/slow") void released.then(() => res.end("late"));
      else res.end("ok");
    });
    cleanups.push(() => origin.close());
    const destination = destinationOf(origin);
    const pools = track(createPoolSet({ extraCa: readTestCa(), maxPools: 2 }));

    const busy = pools.poolFor("org_busy", destination);
    const held = busy.request({ method: "GET", path: "/slow" });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const idle = pools.poolFor("org_idle", destination);
    expect(await (await idle.request({ method: "GET", path: "/" })).body.text()).toBe("ok");

    // org_busy is the least recently used, but its call is still in flight: org_idle goes.
    const fresh = pools.poolFor("org_new", destination);
    expect(idle.closed).toBe(true);
    expect(busy.closed).toBe(false);
    expect(pools.size()).toBe(2);

    // Past the bound with only busy pools: kept, for as long as their calls last.
    const second = pools.poolFor("org_second", destination);
    const heldToo = second.request({ method: "GET", path: "/slow" });
    await new Promise((resolve) => setTimeout(resolve, 300));
    pools.poolFor("org_third", destination);
    expect(fresh.closed).toBe(true);
    expect(busy.closed).toBe(false);
    expect(second.closed).toBe(false);
    expect(pools.size()).toBe(3);

    release();
    expect(await (await held).body.text()).toBe("late");
    expect(await (await heldToo).body.text()).toBe("late");
    // Once idle, the next pool made brings the number back within the bound.
    await new Promise((resolve) => setImmediate(resolve));
    pools.poolFor("org_fourth", destination);
    expect(pools.size()).toBe(2);
    expect(busy.closed).toBe(true);
  });
});
