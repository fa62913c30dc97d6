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
});
