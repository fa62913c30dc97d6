import { describe, expect, it } from "vitest";
import { AppError } from "../errors.ts";
import { formatInjectMode, type InjectMode, parseInjectMode, SUPPORTED_INJECT_MODES } from "./inject-mode.ts";

function refusalOf(raw: string): AppError {
  try {
    parseInjectMode(raw);
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error(`accepted ${JSON.stringify(raw)}`);
}

describe("parseInjectMode", () => {
  it.each<[string, InjectMode]>([
    ["bearer", { kind: "bearer" }],
    ["basic", { kind: "basic" }],
    ["header:X-Api-Key", { kind: "header", name: "X-Api-Key" }],
    ["header:Authorization", { kind: "header", name: "Authorization" }],
    ["header:x-goog-api-key", { kind: "header", name: "x-goog-api-key" }],
    ["header:!#$%&'*+-.^_`|~9", { kind: "header", name: "!#$%&'*+-.^_`|~9" }],
    ["query:api_key", { kind: "query", param: "api_key" }],
    ["query:a.b~c-d_E9", { kind: "query", param: "a.b~c-d_E9" }],
    [`query:${"p".repeat(128)}`, { kind: "query", param: "p".repeat(128) }],
    ["cookie:session", { kind: "cookie", name: "session" }],
    ["cookie:__Host-sid", { kind: "cookie", name: "__Host-sid" }],
    ["sigv4", { kind: "sigv4" }],
    ["client_credentials", { kind: "client_credentials" }],
    ["refresh", { kind: "refresh" }],
    ["hmac:stripe_sig", { kind: "hmac", provider: "stripe" }],
    ["hmac:slack_sig", { kind: "hmac", provider: "slack" }],
    ["hmac:github_sig", { kind: "hmac", provider: "github" }],
  ])("accepts %s", (raw, expected) => {
    expect(parseInjectMode(raw)).toEqual(expected);
    // formatInjectMode is the exact inverse, so a stored mode reads back as it was written.
    expect(formatInjectMode(parseInjectMode(raw))).toBe(raw);
  });

  it.each([
    ["", "required"],
    ["Bearer", "unknown inject mode"],
    [" bearer", "unknown inject mode"],
    ["bearer ", "unknown inject mode"],
    ["bearer:x", "unknown inject mode"],
    ["oauth", "unknown inject mode"],
    ["header", "needs a header name"],
    ["header:", "needs a header name"],
    ["header:X Api", "RFC 9110 token"],
    ["header:X:Api", "RFC 9110 token"],
    ["header:X-Api\r\nHost", "RFC 9110 token"],
    ["header:Clé", "RFC 9110 token"],
    ["header:Host", "header:host cannot carry a credential"],
    ["header:HOST", "header:host cannot carry a credential"],
    ["header:Transfer-Encoding", "header:transfer-encoding cannot carry"],
    ["header:Content-Length", "header:content-length cannot carry"],
    ["header:Connection", "header:connection cannot carry"],
    ["header:Keep-Alive", "header:keep-alive cannot carry"],
    ["header:TE", "header:te cannot carry"],
    ["header:Trailer", "header:trailer cannot carry"],
    ["header:Upgrade", "header:upgrade cannot carry"],
    ["header:Expect", "header:expect cannot carry"],
    ["header:Proxy-Connection", "header:proxy-connection cannot carry"],
    ["header:Proxy-Authorization", "header:proxy-authorization cannot carry"],
    ["header:Proxy-Authenticate", "header:proxy-authenticate cannot carry"],
    ["header:Cookie", "use cookie:<name> instead"],
    ["header:cookie", "use cookie:<name> instead"],
    ["query", "1 to 128 characters"],
    ["query:", "1 to 128 characters"],
    ["query:a b", "1 to 128 characters"],
    ["query:a&b", "1 to 128 characters"],
    ["query:a=b", "1 to 128 characters"],
    ["query:a%20b", "1 to 128 characters"],
    [`query:${"p".repeat(129)}`, "1 to 128 characters"],
    ["cookie", "needs a cookie name"],
    ["cookie:", "needs a cookie name"],
    ["cookie:a=b", "RFC 6265 token"],
    ["cookie:a;b", "RFC 6265 token"],
    ["cookie:a b", "RFC 6265 token"],
    ["hmac:paypal_sig", "unknown hmac signing scheme"],
    ["hmac:stripe", "unknown hmac signing scheme"],
    ["hmac:STRIPE_SIG", "unknown hmac signing scheme"],
    [`header:${"h".repeat(300)}`, "longer than"],
  ])("refuses %j", (raw, fragment) => {
    const error = refusalOf(raw);
    expect(error.code).toBe("invalid_inject");
    expect(error.status).toBe(400);
    expect(error.message).toContain(fragment);
  });

  it("lists the supported modes when the mode is unknown", () => {
    const error = refusalOf("digest");
    for (const mode of SUPPORTED_INJECT_MODES) expect(error.message).toContain(mode);
  });

  // An operator who pastes the secret into the inject field must not find it in an error or log.
  it.each([
    "sk_live_51HxSecretValue",
    "header:sk live 51HxSecretValue",
    "header:51HxSecretValue\r\n",
    "query:51HxSecretValue&x",
    "cookie:51HxSecretValue;",
    "hmac:51HxSecretValue",
    `header:${"51HxSecretValue".repeat(30)}`,
  ])("never repeats refused input back (%j)", (raw) => {
    expect(refusalOf(raw).message).not.toContain("51HxSecretValue");
  });

  it("refuses values that are not strings", () => {
    expect(() => parseInjectMode(undefined as unknown as string)).toThrow(AppError);
    expect(() => parseInjectMode(42 as unknown as string)).toThrow(AppError);
  });
});

describe("SUPPORTED_INJECT_MODES", () => {
  it("lists this version's modes and cannot be changed", () => {
    expect(SUPPORTED_INJECT_MODES).toEqual([
      "bearer",
      "basic",
      "header:<name>",
      "query:<param>",
      "cookie:<name>",
      "client_credentials",
      "refresh",
      "sigv4",
      "hmac:stripe_sig",
      "hmac:slack_sig",
      "hmac:github_sig",
    ]);
    expect(Object.isFrozen(SUPPORTED_INJECT_MODES)).toBe(true);
  });
});

describe("formatInjectMode", () => {
  it.each<[InjectMode, string]>([
    [{ kind: "bearer" }, "bearer"],
    [{ kind: "basic" }, "basic"],
    [{ kind: "header", name: "X-Api-Key" }, "header:X-Api-Key"],
    [{ kind: "query", param: "key" }, "query:key"],
    [{ kind: "cookie", name: "sid" }, "cookie:sid"],
    [{ kind: "sigv4" }, "sigv4"],
    [{ kind: "hmac", provider: "slack" }, "hmac:slack_sig"],
  ])("formats %o as %s", (mode, text) => {
    expect(formatInjectMode(mode)).toBe(text);
    expect(parseInjectMode(text)).toEqual(mode);
  });
});
