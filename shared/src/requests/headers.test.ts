import { describe, expect, it } from "vitest";
import { AppError } from "../errors.ts";
import { type HeaderPair, isHeaderToken, validateCallerHeaders } from "./headers.ts";

function refusalOf(headers: readonly HeaderPair[]): AppError {
  try {
    validateCallerHeaders(headers);
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error(`accepted ${JSON.stringify(headers)}`);
}

describe("validateCallerHeaders", () => {
  it("returns a copy with lowercase names and values trimmed of surrounding spaces and tabs", () => {
    const input = [
      { name: "Accept", value: "application/json" },
      { name: "X-Request-ID", value: " \tabc-123\t " },
      { name: "Idempotency-Key", value: "k1" },
      { name: "x-dup", value: "1" },
      { name: "X-Dup", value: "2" },
    ];
    const output = validateCallerHeaders(input);
    expect(output).toEqual([
      { name: "accept", value: "application/json" },
      { name: "x-request-id", value: "abc-123" },
      { name: "idempotency-key", value: "k1" },
      { name: "x-dup", value: "1" },
      { name: "x-dup", value: "2" },
    ]);
    expect(output[0]).not.toBe(input[0]);
    expect(input[0]?.name).toBe("Accept");
  });

  it("accepts no headers", () => {
    expect(validateCallerHeaders([])).toEqual([]);
  });

  it.each([
    ["User-Agent", "my-agent/1.0 (+https://example.test)"],
    ["Accept-Language", "en-GB,en;q=0.9"],
    ["If-None-Match", '"abc"'],
    ["X-Tab", "a\tb"],
    ["X-Empty", ""],
    ["!#$%&'*+-.^_`|~", "token characters"],
    ["Stripe-Version", "2024-06-20"],
  ])("accepts %s", (name, value) => {
    expect(validateCallerHeaders([{ name, value }])).toHaveLength(1);
  });

  it.each([
    ["Host", "host"],
    ["HOST", "host"],
    ["Transfer-Encoding", "transfer-encoding"],
    ["transfer-encoding", "transfer-encoding"],
    ["Content-Length", "content-length"],
    ["Connection", "connection"],
    ["Keep-Alive", "keep-alive"],
    ["Proxy-Connection", "proxy-connection"],
    ["Proxy-Authorization", "proxy-authorization"],
    ["Proxy-Authenticate", "proxy-authenticate"],
    ["Proxy-Anything-Else", "proxy-anything-else"],
    ["TE", "te"],
    ["Trailer", "trailer"],
    ["Upgrade", "upgrade"],
    ["HTTP2-Settings", "http2-settings"],
    ["Expect", "expect"],
    ["Authorization", "authorization"],
    ["AUTHORIZATION", "authorization"],
    ["Cookie", "cookie"],
    ["Content-Type", "content-type"],
    ["Content-Encoding", "content-encoding"],
    ["Accept-Encoding", "accept-encoding"],
    ["Range", "range"],
    ["If-Range", "if-range"],
    ["X-HTTP-Method-Override", "x-http-method-override"],
    ["X-HTTP-Method", "x-http-method"],
    ["X-Method-Override", "x-method-override"],
    ["X-Original-URL", "x-original-url"],
    ["X-Rewrite-URL", "x-rewrite-url"],
  ])("refuses the caller-owned-by-proxy-or-credential header %s and names it", (name, lower) => {
    const error = refusalOf([
      { name: "Accept", value: "*/*" },
      { name, value: "x" },
    ]);
    expect(error.code).toBe("invalid_header");
    expect(error.status).toBe(400);
    expect(error.message).toContain(`header ${lower} cannot be set by the caller`);
  });

  // Invalid names are referred to by position: they may carry CR/LF into a log line.
  it.each([
    ["X Foo", "not an HTTP token"],
    ["X:Foo", "not an HTTP token"],
    ["Host:", "not an HTTP token"],
    [":authority", "not an HTTP token"],
    ["X-Foo\r\nHost", "not an HTTP token"],
    ["X-Foo\n", "not an HTTP token"],
    ["X-Foo\0", "not an HTTP token"],
    ["X-Naïve", "not an HTTP token"],
    ["Ünïcode", "not an HTTP token"],
    ["X-\u0130", "not an HTTP token"],
    ["x(y)", "not an HTTP token"],
    ['x"y', "not an HTTP token"],
    ["", "empty name"],
    ["x".repeat(257), "longer than 256"],
  ])("refuses the name %j without printing it", (name, fragment) => {
    const error = refusalOf([{ name, value: "v" }]);
    expect(error.code).toBe("invalid_header");
    expect(error.message).toContain("header #1");
    expect(error.message).toContain(fragment);
    if (name.length > 0) expect(error.message).not.toContain(name);
  });

  it("accepts a name of exactly 256 characters", () => {
    expect(validateCallerHeaders([{ name: "x".repeat(256), value: "v" }])).toHaveLength(1);
  });

  it.each([
    ["CRLF then a smuggled header", "tok\r\nHost: evil.test"],
    ["CRLF CRLF then a second request", "tok\r\n\r\nGET /admin HTTP/1.1"],
    ["a bare LF", "tok\nX-Evil: 1"],
    ["a bare CR", "tok\rX-Evil: 1"],
    ["NUL", "tok\0"],
    ["another C0 control", "tok\x01"],
    ["ESC", "tok\x1b[31m"],
    ["DEL", "tok\x7f"],
    ["non-ASCII", "tokén"],
    ["a line separator", "tok\u2028"],
    ["an emoji", "tok😀"],
  ])("refuses a value with %s, naming the header but never the value", (_case, value) => {
    const error = refusalOf([{ name: "X-Trace", value: `SECRETISH${value}` }]);
    expect(error.code).toBe("invalid_header");
    expect(error.message).toContain("x-trace");
    expect(error.message).not.toContain("SECRETISH");
    expect(error.message).not.toContain("evil");
  });

  it("limits a value to 8 KiB", () => {
    expect(validateCallerHeaders([{ name: "x-big", value: "v".repeat(8192) }])).toHaveLength(1);
    const error = refusalOf([{ name: "x-big", value: "v".repeat(8193) }]);
    expect(error.message).toContain("x-big");
    expect(error.message).toContain("longer than 8192");
  });

  it("limits the count to 32 headers", () => {
    const headers = (count: number) =>
      Array.from({ length: count }, (_, i) => ({ name: `x-h${i}`, value: "v" }));
    expect(validateCallerHeaders(headers(32))).toHaveLength(32);
    expect(refusalOf(headers(33)).message).toContain("at most 32 headers");
  });

  it("refuses entries that are not string pairs", () => {
    expect(refusalOf([{ name: "x-a", value: 1 as unknown as string }]).message).toContain("header #1");
    expect(refusalOf([null as unknown as HeaderPair]).message).toContain("header #1");
    expect(refusalOf("x-a: 1" as unknown as HeaderPair[]).code).toBe("invalid_header");
  });
});

describe("isHeaderToken", () => {
  it.each([
    ["X-Api-Key", true],
    ["a", true],
    ["", false],
    ["a b", false],
    ["a:b", false],
    ["a/b", false],
    ["a@b", false],
    ["é", false],
  ])("%j is a token: %s", (name, expected) => {
    expect(isHeaderToken(name)).toBe(expected);
  });
});
