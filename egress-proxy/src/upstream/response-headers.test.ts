import { describe, expect, it } from "vitest";
import {
  filterResponseHeaders,
  isAllowedResponseHeader,
  MAX_KEPT_VALUES,
  MAX_VALUES_PER_NAME,
} from "./response-headers.ts";

describe("filterResponseHeaders", () => {
  it("keeps only the allow-list, lowercased, one entry per value", () => {
    const kept = filterResponseHeaders({
      "Content-Type": "application/json",
      link: [
        '<https://api.example.com/?page=2>; rel="next"',
        '<https://api.example.com/?page=9>; rel="last"',
      ],
      "retry-after": "30",
      "x-ratelimit-remaining": "41",
      "X-RateLimit-Reset": "1700000000",
      "x-request-id": "req_123",
      "set-cookie": ["session=abc"],
      location: "https://evil.example/",
      "x-secret": "s3cr3t",
      "x-ratelimit-": "empty suffix",
      server: "nginx",
    });
    expect(kept).toEqual([
      { name: "content-type", value: "application/json" },
      { name: "link", value: '<https://api.example.com/?page=2>; rel="next"' },
      { name: "link", value: '<https://api.example.com/?page=9>; rel="last"' },
      { name: "retry-after", value: "30" },
      { name: "x-ratelimit-remaining", value: "41" },
      { name: "x-ratelimit-reset", value: "1700000000" },
      { name: "x-request-id", value: "req_123" },
    ]);
  });

  it("drops values over 4 KiB or with control characters", () => {
    const kept = filterResponseHeaders({
      "x-request-id": "a".repeat(4097),
      "x-ratelimit-limit": "a".repeat(4096),
      "retry-after": "1\r\nset-cookie: x=y",
      "content-type": "text/plain\u0000",
      link: "tab\there",
    });
    expect(kept).toEqual([{ name: "x-ratelimit-limit", value: "a".repeat(4096) }]);
  });

  it("ignores undefined values", () => {
    expect(filterResponseHeaders({ "content-type": undefined })).toEqual([]);
  });

  it("answers the allow-list question case-insensitively", () => {
    expect(isAllowedResponseHeader("X-Ratelimit-Used")).toBe(true);
    expect(isAllowedResponseHeader("Location")).toBe(false);
    expect(isAllowedResponseHeader("x-ratelimit")).toBe(false);
  });

  it("keeps x-ratelimit-* names of a rate limit's shape only, never one that could carry a token", () => {
    for (const name of [
      "x-ratelimit-limit",
      "x-ratelimit-resource",
      "x-ratelimit-reset-after",
      "x-ratelimit-limit-requests",
      "x-ratelimit-remaining-tokens",
    ]) {
      expect(isAllowedResponseHeader(name), name).toBe(true);
    }
    for (const name of [
      "x-ratelimit-sk_live_4eC39HqLyjWDarjtT1zdp7dc",
      "x-ratelimit-4ec39hqlyjwdarjtt1zdp7dc",
      "x-ratelimit-12345678901234567890",
      "x-ratelimit-abcdefghijklmnopqrstuvwxyz",
      "x-ratelimit-a-b-c-d-e",
      "x-ratelimit--limit",
      "x-ratelimit-limit-",
    ]) {
      expect(isAllowedResponseHeader(name), name).toBe(false);
    }
  });
});

describe("filterResponseHeaders against an origin repeating allowed headers", () => {
  it("keeps a few values of one name out of thousands", () => {
    const kept = filterResponseHeaders({
      link: Array.from({ length: 3_500 }, () => "s"),
      "x-request-id": "r",
    });
    expect(kept.filter((h) => h.name === "link")).toHaveLength(MAX_VALUES_PER_NAME);
    expect(kept.at(-1)).toEqual({ name: "x-request-id", value: "r" });
  });

  it("keeps a bounded number of values in all, over many names", () => {
    const words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"];
    const headers: Record<string, string[]> = {};
    for (const a of words) for (const b of words) headers[`x-ratelimit-${a}-${b}`] = ["1", "2"];
    const kept = filterResponseHeaders(headers);
    expect(kept).toHaveLength(MAX_KEPT_VALUES);
  });
});
