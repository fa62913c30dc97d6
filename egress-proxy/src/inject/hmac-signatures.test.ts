import { describe, expect, it } from "vitest";
import { signLikeWebhook } from "./hmac-signatures.ts";

const header = (headers: { name: string; value: string }[], name: string) =>
  headers.find((h) => h.name === name)?.value;

describe("signLikeWebhook", () => {
  // GitHub's own example ("Validating webhook deliveries": secret and payload with their signature).
  it("github: the example GitHub publishes", () => {
    const headers = signLikeWebhook(
      "github",
      "It's a Secret to Everybody",
      [],
      Buffer.from("Hello, World!"),
      0,
    );
    expect(header(headers, "x-hub-signature-256")).toBe(
      "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
    );
  });

  it("stripe: t=<unix>,v1=<hex> over '<t>.<body>'", () => {
    const headers = signLikeWebhook(
      "stripe",
      "whsec_test",
      [],
      Buffer.from('{"id":"evt_1"}'),
      1_700_000_000_999,
    );
    const value = header(headers, "stripe-signature") ?? "";
    expect(value).toMatch(/^t=1700000000,v1=[0-9a-f]{64}$/);
  });

  it("slack: a timestamp header and v0=<hex> over 'v0:<t>:<body>'", () => {
    const headers = signLikeWebhook("slack", "slack-secret", [], Buffer.from("a=1"), 1_531_420_618_000);
    expect(header(headers, "x-slack-request-timestamp")).toBe("1531420618");
    expect(header(headers, "x-slack-signature")).toMatch(/^v0=[0-9a-f]{64}$/);
  });

  it("drops the caller's own signature headers, in any case, and keeps the rest", () => {
    const headers = signLikeWebhook(
      "slack",
      "slack-secret",
      [
        { name: "X-Slack-Signature", value: "v0=forged" },
        { name: "x-slack-request-timestamp", value: "1" },
        { name: "x-hub-signature", value: "sha1=forged" },
        { name: "accept", value: "application/json" },
      ],
      undefined,
      1_000,
    );
    expect(headers.map((h) => h.name)).toEqual(["accept", "x-slack-request-timestamp", "x-slack-signature"]);
    expect(JSON.stringify(headers)).not.toContain("forged");
  });

  it("signs the bytes, not a re-encoding: a UTF-8 body and its bytes sign alike", () => {
    const text = '{"name":"Zoë ✓"}';
    const a = signLikeWebhook("github", "k", [], Buffer.from(text, "utf8"), 0);
    const b = signLikeWebhook("github", "k", [], new TextEncoder().encode(text), 0);
    expect(a).toEqual(b);
  });

  it("never puts the secret in a header", () => {
    for (const provider of ["stripe", "slack", "github"] as const) {
      const headers = signLikeWebhook(provider, "sk_canary_value_1234", [], Buffer.from("x"), 0);
      expect(JSON.stringify(headers)).not.toContain("sk_canary_value_1234");
    }
  });
});
