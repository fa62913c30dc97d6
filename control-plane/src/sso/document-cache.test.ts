// The relying party's caches of discovery documents and key sets: any owner may name any issuer,
// so they are bounded, the oldest entry leaving first and a fresh write counting as new.
import { expect, it } from "vitest";
import { MAX_CACHED_DOCUMENTS, remember } from "./oidc-relying-party.ts";

it("keeps at most MAX_CACHED_DOCUMENTS entries, dropping the oldest", () => {
  const cache = new Map<string, number>();
  for (let i = 0; i < MAX_CACHED_DOCUMENTS * 4; i++) remember(cache, `https://issuer-${i}.example`, i);
  expect(cache.size).toBe(MAX_CACHED_DOCUMENTS);
  expect(cache.has("https://issuer-0.example")).toBe(false);
  expect(cache.get(`https://issuer-${MAX_CACHED_DOCUMENTS * 4 - 1}.example`)).toBe(
    MAX_CACHED_DOCUMENTS * 4 - 1,
  );
});

it("counts an entry written again as the newest", () => {
  const cache = new Map<string, number>();
  for (let i = 0; i < MAX_CACHED_DOCUMENTS; i++) remember(cache, `k${i}`, i);
  remember(cache, "k0", 100);
  remember(cache, "new", 1);
  expect(cache.has("k0")).toBe(true);
  expect(cache.has("k1")).toBe(false);
});
