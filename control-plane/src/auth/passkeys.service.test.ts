import { describe, expect, it } from "vitest";
import { knownTransports, passkeyFailureCause } from "./passkeys.service.ts";

describe("passkeyFailureCause", () => {
  it("keeps the library's words and drops the challenge it quotes", () => {
    const challenge = "c2VjcmV0LWNoYWxsZW5nZS1zdGlsbC1saXZl";
    const cause = passkeyFailureCause(
      new Error(
        `Custom challenge verifier returned false for registration response challenge "${challenge}"`,
      ),
    );
    expect(cause.message).toBe(
      'Custom challenge verifier returned false for registration response challenge "…"',
    );
    expect(cause.message).not.toContain(challenge);
    expect(passkeyFailureCause("Unexpected 'abc' and `def`").message).toBe('Unexpected "…" and "…"');
  });
});

describe("knownTransports", () => {
  it("keeps WebAuthn's transports, each once, and nothing else a browser sends", () => {
    expect(knownTransports(["usb", "internal", "usb", "hybrid"])).toEqual(["usb", "internal", "hybrid"]);
    expect(knownTransports(["usb", "x".repeat(10_000), ["nested"], 7, null, "USB", "bluetooth"])).toEqual([
      "usb",
    ]);
    expect(knownTransports("usb")).toEqual([]);
    expect(knownTransports(undefined)).toEqual([]);
  });
});
