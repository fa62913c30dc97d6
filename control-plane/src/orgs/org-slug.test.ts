import { describe, expect, it } from "vitest";
import { slugOf, uniqueSlug } from "./org-slug.ts";

describe("slugOf", () => {
  it.each([
    ["Acme", "acme"],
    ["Acme Café, Ltd.", "acme-cafe-ltd"],
    ["  --Ops__Team--  ", "ops-team"],
    ["alice@example.com's organisation", "alice-example-com-s-organisation"],
    ["日本語", "org"],
    ["!!!", "org"],
    ["Ｆｕｌｌｗｉｄｔｈ", "fullwidth"],
    ["a".repeat(80), "a".repeat(40)],
    [`${"a".repeat(39)} b`, "a".repeat(39)],
  ])("%j -> %j", (name, slug) => {
    expect(slugOf(name)).toBe(slug);
    expect(slug).toMatch(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/);
  });
});

describe("uniqueSlug", () => {
  it("keeps a free slug and numbers a taken one", () => {
    expect(uniqueSlug("acme", [])).toBe("acme");
    expect(uniqueSlug("acme", ["acme"])).toBe("acme-2");
    expect(uniqueSlug("acme", ["acme", "acme-2", "acme-3"])).toBe("acme-4");
  });

  it("never gives the single sign-on's own return address, /sso/callback", () => {
    expect(uniqueSlug(slugOf("Callback"), [])).toBe("callback-2");
  });
});
