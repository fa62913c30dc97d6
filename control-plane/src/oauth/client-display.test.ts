import { describe, expect, it } from "vitest";
import { clientDisplayName, publisherOf, redirectTarget } from "./client-display.ts";

describe("redirectTarget (what the consent and device pages say the browser returns to)", () => {
  it.each([
    ["https://claude.ai/api/mcp/auth_callback", "claude.ai"],
    ["https://xn--80ak6aa92e.com/cb", "xn--80ak6aa92e.com"],
    ["https://аррӏе.com/cb", "xn--80ak6aa92e.com"],
    ["cursor://anysphere.cursor-mcp/oauth/callback", "cursor://anysphere.cursor-mcp/oauth/callback"],
    ["com.example.app:/cb", "com.example.app:/cb"],
    ["http://127.0.0.1:33418/callback", "http://127.0.0.1:33418/callback"],
    ["com.example.app:/\u202Eevil", "com.example.app:/%E2%80%AEevil"],
  ])("%s is shown as %s", (uri, shown) => {
    expect(redirectTarget(uri)).toBe(shown);
  });

  it("cuts a long target and answers null without one", () => {
    expect(redirectTarget(`com.example.app:/${"a".repeat(300)}`)).toHaveLength(203);
    expect(redirectTarget(undefined)).toBeNull();
  });
});

describe("publisherOf and clientDisplayName", () => {
  it("names the host of an https client_id only", () => {
    expect(publisherOf("https://claude.ai/oauth/client.json")).toBe("claude.ai");
    expect(publisherOf("oac_123")).toBeNull();
  });

  it("keeps a chosen name to one safe line of 80 characters", () => {
    expect(clientDisplayName("Claude\u0000Code", "x")).toBe("Claude\uFFFDCode");
    expect(clientDisplayName("  ", "fallback")).toBe("fallback");
    expect(clientDisplayName("n".repeat(100), "x")).toHaveLength(80);
  });

  it.each([
    ["an unterminated right-to-left override", "Probe\u202Eevil", "Probe\uFFFDevil"],
    ["an embedding and its pop", "A\u202Bb\u202Cc", "A\uFFFDb\uFFFDc"],
    ["the isolates", "\u2066a\u2067b\u2068c\u2069", "\uFFFDa\uFFFDb\uFFFDc\uFFFD"],
    ["the direction marks", "L\u200Er\u200Fa\u061C", "L\uFFFDr\uFFFDa\uFFFD"],
    ["zero-width characters", "Cl\u200Bau\u200Cd\u200De\u2060\uFEFF", "Cl\uFFFDau\uFFFDd\uFFFDe\uFFFD\uFFFD"],
    ["line and paragraph separators", "one\u2028two\u2029", "one\uFFFDtwo\uFFFD"],
  ])("shows %s as U+FFFD, never as an invisible character", (_what, raw, shown) => {
    expect(clientDisplayName(raw, "x")).toBe(shown);
    expect(clientDisplayName(raw, "x")).not.toMatch(/\p{Cf}/u);
  });

  it("keeps letters of any script, and never cuts an emoji in half", () => {
    expect(clientDisplayName("Ассистент 助手 مساعد", "x")).toBe("Ассистент 助手 مساعد");
    const cut = clientDisplayName(`${"n".repeat(79)}\u{1F600}\u{1F600}`, "x");
    expect(cut).toBe(`${"n".repeat(79)}\u{1F600}`);
  });
});
