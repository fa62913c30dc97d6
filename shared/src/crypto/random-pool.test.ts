import { describe, expect, it } from "vitest";
import { pooledRandomBytes } from "./random-pool.ts";

describe("pooledRandomBytes", () => {
  it("hands out distinct bytes of the length asked, across many refills of the pool", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 3000; i++) {
      const bytes = pooledRandomBytes(i % 2 === 0 ? 8 : 16);
      expect(bytes.length).toBe(i % 2 === 0 ? 8 : 16);
      seen.add(bytes.toString("hex"));
    }
    expect(seen.size).toBe(3000);
  });

  it("gives copies: changing one changes no later one", () => {
    const first = pooledRandomBytes(16);
    first.fill(0xff);
    expect(pooledRandomBytes(16).equals(Buffer.alloc(16, 0xff))).toBe(false);
  });

  it("draws a request larger than the pool on its own", () => {
    expect(pooledRandomBytes(10_000).length).toBe(10_000);
  });
});
