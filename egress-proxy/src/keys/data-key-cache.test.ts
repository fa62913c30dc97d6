import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createDataKeyCache, DATA_KEY_TTL_MS } from "./data-key-cache.ts";

const sealedKey = () => randomBytes(80);
const dataKey = () => randomBytes(32);

describe("data key cache (DECISIONS: at most 10 minutes, bounded, wiped on rotation)", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("gives back the key kept for exactly that sealed data key and key id", () => {
    const cache = createDataKeyCache({ capacity: 4 });
    const sealed = sealedKey();
    const key = dataKey();
    cache.set("sk_a", sealed, key);
    expect(Buffer.from(cache.get("sk_a", sealed)!)).toEqual(key);
    expect(cache.get("sk_b", sealed)).toBeUndefined();
    const other = Buffer.from(sealed);
    other[79] = (other[79] ?? 0) ^ 1;
    expect(cache.get("sk_a", other)).toBeUndefined();
    cache.close();
  });

  it("forgets a key at 10 minutes after it was opened, and zeroes its memory", () => {
    let now = 1_000_000;
    const cache = createDataKeyCache({ capacity: 4, now: () => now });
    const sealed = sealedKey();
    cache.set("sk_a", sealed, dataKey());
    now += DATA_KEY_TTL_MS - 1;
    expect(cache.get("sk_a", sealed)).toBeDefined();
    now += 1;
    expect(cache.get("sk_a", sealed)).toBeUndefined();
    expect(cache.size).toBe(0);
    expect(cache.inspectMemory().every((byte) => byte === 0)).toBe(true);
    cache.close();
  });

  it("forgets an expired key with no lookup: its timer sweeps it at 10 minutes", () => {
    vi.useFakeTimers();
    const cache = createDataKeyCache({ capacity: 4 });
    cache.set("sk_a", sealedKey(), dataKey());
    vi.advanceTimersByTime(DATA_KEY_TTL_MS / 2);
    cache.set("sk_a", sealedKey(), dataKey());
    vi.advanceTimersByTime(DATA_KEY_TTL_MS / 2);
    expect(cache.size).toBe(1);
    vi.advanceTimersByTime(DATA_KEY_TTL_MS / 2);
    expect(cache.size).toBe(0);
    expect(cache.inspectMemory().every((byte) => byte === 0)).toBe(true);
    cache.close();
  });

  it("never keeps a key longer than 10 minutes, whatever it is told", () => {
    let now = 0;
    const cache = createDataKeyCache({ capacity: 1, now: () => now, ttlMs: 60 * 60_000 });
    const sealed = sealedKey();
    cache.set("sk_a", sealed, dataKey());
    now = DATA_KEY_TTL_MS;
    expect(cache.get("sk_a", sealed)).toBeUndefined();
    cache.close();
  });

  it("holds at most its bound: the oldest key goes first and its slot is zeroed", () => {
    const cache = createDataKeyCache({ capacity: 2 });
    const [a, b, c] = [sealedKey(), sealedKey(), sealedKey()];
    const keyA = dataKey();
    cache.set("sk_a", a, keyA);
    cache.set("sk_a", b, dataKey());
    cache.set("sk_a", c, dataKey());
    expect(cache.size).toBe(2);
    expect(cache.get("sk_a", a)).toBeUndefined();
    expect(cache.get("sk_a", b)).toBeDefined();
    expect(cache.get("sk_a", c)).toBeDefined();
    expect(cache.inspectMemory().includes(keyA)).toBe(false);
    cache.close();
  });

  it("wipes every key at once (a rotation) and zeroes the whole buffer", () => {
    const cache = createDataKeyCache({ capacity: 8 });
    const sealed = [sealedKey(), sealedKey(), sealedKey()];
    for (const s of sealed) cache.set("sk_a", s, dataKey());
    cache.wipe();
    expect(cache.size).toBe(0);
    for (const s of sealed) expect(cache.get("sk_a", s)).toBeUndefined();
    expect(cache.inspectMemory().every((byte) => byte === 0)).toBe(true);
    cache.close();
  });

  it("keeps nothing with a bound of 0, and nothing after close", () => {
    const off = createDataKeyCache({ capacity: 0 });
    const sealed = sealedKey();
    off.set("sk_a", sealed, dataKey());
    expect(off.get("sk_a", sealed)).toBeUndefined();
    off.close();
    const closed = createDataKeyCache({ capacity: 2 });
    closed.close();
    closed.set("sk_a", sealed, dataKey());
    expect(closed.get("sk_a", sealed)).toBeUndefined();
  });
});
