import { afterEach, describe, expect, it, vi } from "vitest";
import type { Destination } from "../destination/resolve.ts";
import { createPoolSet } from "./pool.ts";

function destination(host: string, address = "192.0.2.10"): Destination {
  return { host, address, family: 4, port: 443 };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("createPoolSet", () => {
  it("reuses one pool per (host, address, port) and separates the rest", async () => {
    const pools = createPoolSet();
    const a = pools.poolFor("org-a", destination("a.example"));
    expect(pools.poolFor("org-a", destination("a.example"))).toBe(a);
    expect(pools.poolFor("org-a", destination("a.example", "192.0.2.11"))).not.toBe(a);
    expect(pools.poolFor("org-a", { ...destination("a.example"), port: 8443 })).not.toBe(a);
    expect(pools.poolFor("org-a", destination("b.example"))).not.toBe(a);
    expect(pools.size()).toBe(4);
    await pools.close();
    expect(pools.size()).toBe(0);
    expect(a.closed).toBe(true);
  });

  it("keeps each organisation's pool for an origin apart; tickets of none share one", async () => {
    const pools = createPoolSet();
    const a = pools.poolFor("org-a", destination("api.example"));
    const b = pools.poolFor("org-b", destination("api.example"));
    expect(b).not.toBe(a);
    expect(pools.poolFor("org-a", destination("api.example"))).toBe(a);
    const none = pools.poolFor("", destination("api.example"));
    expect(none).not.toBe(a);
    expect(pools.poolFor("", destination("api.example"))).toBe(none);
    expect(pools.size()).toBe(3);
    await pools.close();
  });

  it("closes the least recently used idle pool beyond the bound, whatever its organisation", async () => {
    const pools = createPoolSet({ maxPools: 2 });
    const a = pools.poolFor("org-a", destination("api.example"));
    const b = pools.poolFor("org-b", destination("api.example"));
    pools.poolFor("org-a", destination("api.example")); // a is now the most recent
    pools.poolFor("org-c", destination("api.example"));
    expect(pools.size()).toBe(2);
    expect(b.closed).toBe(true);
    expect(a.closed).toBe(false);
    await pools.close();
  });

  it("keeps a new pool's bound check short while many pools have calls in flight", async () => {
    const pools = createPoolSet({ maxPools: 4 });
    let reads = 0;
    /** A pool with a call in it, counting how often anyone asks whether it has one. */
    const holdBusy = (pool: ReturnType<typeof pools.poolFor>) =>
      Object.defineProperty(pool, "stats", {
        get: () => {
          reads++;
          return { size: 1 };
        },
      });
    // One organisation's calls to a host whose DNS answers a new address each time: a busy pool each.
    for (let i = 0; i < 400; i++)
      holdBusy(pools.poolFor("org-a", destination("ttl0.example", `10.0.${i >> 8}.${i & 255}`)));
    reads = 0;
    for (let i = 0; i < 400; i++)
      holdBusy(pools.poolFor("org-a", destination("ttl0.example", `10.1.${i >> 8}.${i & 255}`)));
    // Each new pool looks at a few pools, not at every busy one (400 × 600 reads before).
    expect(reads).toBeLessThanOrEqual(400 * 32);
    expect(pools.size()).toBe(800);
    await pools.close();
  });

  it("closes pools left idle", async () => {
    vi.useFakeTimers();
    const pools = createPoolSet({ idleMs: 2_000 });
    const idle = pools.poolFor("org-a", destination("idle.example"));
    vi.advanceTimersByTime(1_500);
    const busy = pools.poolFor("org-a", destination("busy.example"));
    vi.advanceTimersByTime(1_000);
    expect(idle.closed).toBe(true);
    expect(busy.closed).toBe(false);
    expect(pools.size()).toBe(1);
    await pools.close();
  });
});
