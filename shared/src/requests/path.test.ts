// Table-driven tests of rule 1 (path tricks) and rule 2 (full-URL targets, port 443 only).
import { describe, expect, it } from "vitest";
import { MAX_PATH_LENGTH, normalisePathForMatch, parseRequestTarget, validateRequestPath } from "./path.ts";

/** The accepted path, or "invalid_path". */
function pathOutcome(raw: string): string {
  const check = validateRequestPath(raw);
  return check.ok ? check.path : check.code;
}

describe("validateRequestPath: accepted paths come back byte for byte", () => {
  const rows: [string, string][] = [
    ["/", "/"],
    ["/v1/items", "/v1/items"],
    ["/v1/items/", "/v1/items/"],
    ["/v1/items?limit=10&cursor=abc", "/v1/items?limit=10&cursor=abc"],
    ["/v1/a%20b", "/v1/a%20b"],
    ["/v1/%E2%82%AC", "/v1/%E2%82%AC"],
    ["/v1/file.json", "/v1/file.json"],
    ["/v1/.well-known/x", "/v1/.well-known/x"],
    ["/v1/a..b", "/v1/a..b"],
    ["/v1/users/me:batch", "/v1/users/me:batch"],
    ["/v1/a;b=c/d", "/v1/a;b=c/d"],
    ["/v1/~user/@handle/!$&'()*+,=", "/v1/~user/@handle/!$&'()*+,="],
    ["/a//b", "/a//b"],
    ["/search?q=a%2Fb%2e%5c", "/search?q=a%2Fb%2e%5c"], // encoded data is fine in the query
    ["/search?q=%0d%0a", "/search?q=%0d%0a"],
    ["/search?q=../../etc", "/search?q=../../etc"],
    ["/v1/charges?expand[]=customer", "/v1/charges?expand[]=customer"],
    ['/x?a={"b":1}|^`<>', '/x?a={"b":1}|^`<>'],
    ["/x?a=1?b=2/c", "/x?a=1?b=2/c"],
    ["/x?", "/x?"],
    ["/Mixed/CASE%2a", "/Mixed/CASE%2a"],
  ];
  it.each(rows)("%j -> %j", (raw, expected) => {
    expect(pathOutcome(raw)).toBe(expected);
  });
});

describe("validateRequestPath: path tricks are invalid_path", () => {
  const rows: [string, string][] = [
    ["", "invalid_path"],
    ["v1/items", "invalid_path"],
    [" /v1/items", "invalid_path"],
    ["//evil.example/x", "invalid_path"],
    ["//", "invalid_path"],
    // dot segments
    ["/a/../b", "invalid_path"],
    ["/a/./b", "invalid_path"],
    ["/..", "invalid_path"],
    ["/.", "invalid_path"],
    ["/a/..", "invalid_path"],
    ["/a/../", "invalid_path"],
    ["/a/..;/b", "invalid_path"], // Tomcat/Spring read "..;" as ".."
    ["/a/.;x=1/b", "invalid_path"],
    ["/a/.../b", "invalid_path"], // Windows servers trim trailing dots
    ["/a/..%20/b", "invalid_path"], // ... and trailing spaces
    ["/a/.%20./b", "invalid_path"],
    ["/public/..%20%20/admin", "invalid_path"],
    ["/a/.%20;x/b", "invalid_path"],
    // encoded dot and slash inside a segment
    ["/a/%2e%2e/b", "invalid_path"],
    ["/a/%2E%2E/b", "invalid_path"],
    ["/a/.%2e/b", "invalid_path"],
    ["/a/%2e/b", "invalid_path"],
    ["/v1/file%2Ejson", "invalid_path"],
    ["/a%2fb", "invalid_path"],
    ["/a%2Fb", "invalid_path"],
    ["/a/%252e%252e/b", "invalid_path"], // double-encoded
    ["/a%252fb", "invalid_path"],
    // backslashes
    ["\\", "invalid_path"],
    ["\\\\evil.example\\x", "invalid_path"],
    ["/a\\b", "invalid_path"],
    ["/%5c", "invalid_path"],
    ["/a%5Cb", "invalid_path"],
    ["/x?q=a\\b", "invalid_path"], // raw backslash is refused in the query too
    // CR/LF: raw is request splitting; encoded in the path is header-injection bait
    ["/a\r\nHost: evil.example", "invalid_path"],
    ["/a\nb", "invalid_path"],
    ["/a%0d%0aSet-Cookie:x", "invalid_path"],
    ["/a%0A", "invalid_path"],
    ["/a%00.json", "invalid_path"],
    ["/a%7f", "invalid_path"],
    ["/a%250d%250a", "invalid_path"],
    ["/x?q=a\r\nb", "invalid_path"],
    ["/x?q=\u0000", "invalid_path"],
    ["/a\tb", "invalid_path"],
    ["/a\u007fb", "invalid_path"],
    // spaces, non-ASCII, fragments
    ["/a b", "invalid_path"],
    ["/x?q=a b", "invalid_path"],
    ["/café", "invalid_path"],
    ["/x?q=café", "invalid_path"],
    ["/a\u202eb", "invalid_path"],
    ["/a#frag", "invalid_path"],
    ["/a?b=1#frag", "invalid_path"],
    // malformed escapes, anywhere
    ["/a%zz", "invalid_path"],
    ["/a%4", "invalid_path"],
    ["/a%", "invalid_path"],
    ["/x?q=%zz", "invalid_path"],
    ["/x?q=%", "invalid_path"],
    // characters that must be percent-encoded in the path
    ["/v1/users/{id}", "invalid_path"],
    ["/a<b>", "invalid_path"],
    ['/a"b', "invalid_path"],
    ["/a|b", "invalid_path"],
    ["/a^b", "invalid_path"],
    ["/a`b", "invalid_path"],
    ["/a[0]", "invalid_path"],
  ];
  it.each(rows)("%j -> %s", (raw, expected) => {
    expect(pathOutcome(raw)).toBe(expected);
  });

  it("accepts 8 KiB exactly and refuses one byte more", () => {
    const exact = `/${"a".repeat(MAX_PATH_LENGTH - 1)}`;
    expect(pathOutcome(exact)).toBe(exact);
    expect(pathOutcome(`${exact}a`)).toBe("invalid_path");
    expect(MAX_PATH_LENGTH).toBe(8192);
  });

  it("never echoes the query, which may hold a token", () => {
    const check = validateRequestPath("/x?token=sk_live_secret123&q=%zz");
    expect(check.ok).toBe(false);
    expect(check.ok ? "" : check.message).not.toContain("sk_live_secret123");
  });

  it("names what was wrong", () => {
    const check = validateRequestPath("/a/%2e%2e/b");
    expect(check.ok ? "" : check.message).toContain("%2e");
  });
});

describe("validateRequestPath: encodings that decode outside the approved prefix", () => {
  // Each row passes a plain path-prefix check ("/a/" covers it) yet an origin that decodes leniently,
  // folds Unicode (NFKC) or transliterates reads a "/", ".", "\" or ";" the operator never saw.
  const refused: [string, string][] = [
    // encoded ";": "..%3b" decodes to "..;", which Tomcat and Spring read as ".."
    ["/a/..%3b/b", "%3b"],
    ["/a/..%3B/b", "%3B"],
    ["/a/%3b", "%3b"],
    ["/a/x%3Bjsessionid=1", "%3B"],
    // overlong UTF-8 for "/", "." and "\"
    ["/a/%c0%af../admin", "not valid UTF-8"],
    ["/a/%C0%AF", "not valid UTF-8"],
    ["/a/%c0%ae%c0%ae/b", "not valid UTF-8"],
    ["/a/%c1%9c", "not valid UTF-8"],
    ["/a/%e0%80%af", "not valid UTF-8"],
    ["/a/%f0%80%80%af", "not valid UTF-8"],
    ["/a/%f8%80%80%80%af", "not valid UTF-8"],
    ["/a/%fc%80%80%80%80%af", "not valid UTF-8"],
    // surrogates encoded as UTF-8, code points over U+10FFFF, bytes UTF-8 never uses
    ["/a/%ed%a0%80", "not valid UTF-8"],
    ["/a/%ED%BF%BF", "not valid UTF-8"],
    ["/a/%f4%90%80%80", "not valid UTF-8"],
    ["/a/%f5%80%80%80", "not valid UTF-8"],
    ["/a/%fe", "not valid UTF-8"],
    ["/a/%ff", "not valid UTF-8"],
    // cut-short sequences and lone continuation bytes
    ["/a/%e2%82", "not valid UTF-8"],
    ["/a/%e2%82/b", "not valid UTF-8"],
    ["/a/%e2%82x", "not valid UTF-8"],
    ["/a/x%c3", "not valid UTF-8"],
    ["/a/%c3(", "not valid UTF-8"],
    ["/a/%80", "not valid UTF-8"],
    ["/a/%bf%bf", "not valid UTF-8"],
    ["/a/%e2%82%ac%82", "not valid UTF-8"],
    // fullwidth and other NFKC look-alikes of "/", ".", "\", ";" and "%"
    ["/a/%ef%bc%8f", "U+FF0F"],
    ["/a/%EF%BC%8F..%EF%BC%8Fadmin", "U+FF0F"],
    ["/a/%ef%bc%8e%ef%bc%8e/b", "U+FF0E"],
    ["/a/%ef%bc%bc", "U+FF3C"],
    ["/a/%ef%b9%92", "U+FE52"],
    ["/a/%ef%b9%a8", "U+FE68"],
    ["/a/%e2%80%a4%e2%80%a4", "U+2024"],
    ["/a/%e2%80%a5", "U+2025"],
    ["/a/%e2%80%a6", "U+2026"],
    ["/a/..%ef%bc%9b/b", "U+FF1B"],
    ["/a/..%cd%be/b", "U+037E"],
    ["/a/%ef%bc%852e", "U+FF05"],
    ["/a/%e4%b8%ad%ef%bc%8f", "U+FF0F"],
    // slashes NFKC keeps but transliteration turns into "/" or "\"
    ["/a/%e2%88%95", "U+2215"],
    ["/a/%e2%81%84", "U+2044"],
    ["/a/%e2%a7%b8", "U+29F8"],
    ["/a/%e2%88%96", "U+2216"],
    // typed raw: refused as non-ASCII, and the message says why
    ["/a/\uff0f", "U+FF0F"],
    ["/a/\uff0e\uff0e/b", "U+FF0E"],
    ["/a/\uff3c", "U+FF3C"],
    ["/a/\u2215", "U+2215"],
  ];
  it.each(refused)("%j is invalid_path naming %s", (raw, named) => {
    const check = validateRequestPath(raw);
    expect(check.ok).toBe(false);
    expect(check.ok ? undefined : check.code).toBe("invalid_path");
    expect(check.ok ? "" : check.message).toContain(named);
  });

  // Look-alikes that must keep working: valid UTF-8 text, a literal ";", and anything in the query.
  const accepted: string[] = [
    "/v1/%E2%82%AC",
    "/v1/%e2%82%ac%e2%82%ac",
    "/v1/a;b",
    "/v1/a;b=c/d",
    "/v1/caf%C3%A9",
    "/v1/%F0%9F%98%80",
    "/v1/%f4%8f%bf%bf",
    "/v1/%ef%bf%bd",
    "/v1/%ee%80%80",
    "/v1/%e4%b8%ad%e6%96%87/x",
    "/v1/%ef%bc%a1", // fullwidth "A" folds to a letter, not to structure
    "/v1/%e3%80%82", // ideographic full stop: NFKC keeps it
    "/v1/%ef%bd%a1", // halfwidth ideographic full stop folds to U+3002, not "."
    "/v1/l%c2%b7l", // Catalan middle dot
    "/v1/%3a%40%2b%2C",
    "/search?q=a%3bb",
    "/search?q=%c0%af%ff%e2%82",
    "/search?q=%ef%bc%8f%ef%bc%8e",
    "/search?q=..%3b",
  ];
  it.each(accepted)("%j stays accepted byte for byte", (raw) => {
    expect(pathOutcome(raw)).toBe(raw);
  });

  it("parseRequestTarget applies the same checks to a full URL", () => {
    expect(targetOutcome({ path: "https://api.example.com/a/..%3b/admin" })).toEqual({
      code: "invalid_path",
    });
    expect(targetOutcome({ path: "https://api.example.com/a/%c0%af" })).toEqual({ code: "invalid_path" });
    expect(targetOutcome({ path: "https://api.example.com/v1/%E2%82%AC" })).toEqual({
      host: "api.example.com",
      path: "/v1/%E2%82%AC",
    });
  });
});

type TargetOutcome = { host: string | undefined; path: string } | { code: string; hint?: string };

function targetOutcome(input: { path: string; host?: string }): TargetOutcome {
  const check = parseRequestTarget(input);
  if (check.ok) return { host: check.host, path: check.path };
  return check.hint === undefined ? { code: check.code } : { code: check.code, hint: check.hint };
}

describe("parseRequestTarget: full https:// URLs", () => {
  const rows: [{ path: string; host?: string }, TargetOutcome][] = [
    [{ path: "https://api.example.com/v1/items" }, { host: "api.example.com", path: "/v1/items" }],
    [{ path: "HTTPS://API.Example.com/v1/Items" }, { host: "api.example.com", path: "/v1/Items" }],
    [{ path: "https://api.example.com" }, { host: "api.example.com", path: "/" }],
    [{ path: "https://api.example.com?x=1" }, { host: "api.example.com", path: "/?x=1" }],
    [{ path: "https://api.example.com./v1" }, { host: "api.example.com", path: "/v1" }],
    [{ path: "https://api.example.com:443/v1" }, { host: "api.example.com", path: "/v1" }],
    [{ path: "https://api.example.com/v1?q=a%2Fb" }, { host: "api.example.com", path: "/v1?q=a%2Fb" }],
    [{ path: "https://xn--bcher-kva.example/" }, { host: "xn--bcher-kva.example", path: "/" }],
    // ports: only 443
    [
      { path: "https://api.example.com:8443/v1" },
      { code: "invalid_port", hint: "Latch connects to port 443 only; drop the port from the URL" },
    ],
    [
      { path: "https://api.example.com:0/v1" },
      { code: "invalid_port", hint: "Latch connects to port 443 only; drop the port from the URL" },
    ],
    [
      { path: "https://api.example.com:/v1" },
      { code: "invalid_port", hint: "Latch connects to port 443 only; drop the port from the URL" },
    ],
    [
      { path: "https://api.example.com:0443/v1" },
      { code: "invalid_port", hint: "Latch connects to port 443 only; drop the port from the URL" },
    ],
    [
      { path: "https://api.example.com:80" },
      { code: "invalid_port", hint: "Latch connects to port 443 only; drop the port from the URL" },
    ],
    [
      { path: "https://api.example.com:https/v1" },
      { code: "invalid_port", hint: "Latch connects to port 443 only; drop the port from the URL" },
    ],
    // schemes
    [
      { path: "http://api.example.com/v1" },
      { code: "invalid_path", hint: expect.stringContaining("https://") },
    ],
    [
      { path: "HTTP://api.example.com/v1" },
      { code: "invalid_path", hint: expect.stringContaining("https://") },
    ],
    [
      { path: "ftp://api.example.com/v1" },
      { code: "invalid_path", hint: expect.stringContaining("https://") },
    ],
    [{ path: "file:///etc/passwd" }, { code: "invalid_path", hint: expect.stringContaining("https://") }],
    [{ path: "javascript:alert(1)" }, { code: "invalid_path", hint: expect.stringContaining("https://") }],
    [
      { path: "https:api.example.com/v1" },
      { code: "invalid_path", hint: expect.stringContaining("https://") },
    ],
    [
      { path: "https:/api.example.com/v1" },
      { code: "invalid_path", hint: expect.stringContaining("https://") },
    ],
    [{ path: "//api.example.com/v1" }, { code: "invalid_path" }],
    // userinfo
    [{ path: "https://user:pass@api.example.com/v1" }, { code: "invalid_host", hint: expect.any(String) }],
    [{ path: "https://api.example.com@evil.example/v1" }, { code: "invalid_host", hint: expect.any(String) }],
    [{ path: "https://@api.example.com/v1" }, { code: "invalid_host", hint: expect.any(String) }],
    // hosts in the URL go through checkHostname
    [{ path: "https://127.0.0.1/v1" }, { code: "ip_literal", hint: expect.any(String) }],
    [{ path: "https://0x7f.1/v1" }, { code: "ip_literal", hint: expect.any(String) }],
    [{ path: "https://2130706433/v1" }, { code: "ip_literal", hint: expect.any(String) }],
    [{ path: "https://[::1]/v1" }, { code: "ip_literal", hint: expect.any(String) }],
    [{ path: "https://[::1]:8443/v1" }, { code: "ip_literal", hint: expect.any(String) }],
    [{ path: "https://[::ffff:127.0.0.1]:443/" }, { code: "ip_literal", hint: expect.any(String) }],
    [{ path: "https://::1/v1" }, { code: "ip_literal", hint: expect.any(String) }],
    [{ path: "https://１２７.０.０.１/v1" }, { code: "ip_literal", hint: expect.any(String) }],
    [{ path: "https://%31%32%37.0.0.1/v1" }, { code: "ip_literal", hint: expect.any(String) }],
    [{ path: "https://api%2eexample.com/v1" }, { code: "invalid_host", hint: expect.any(String) }],
    [{ path: "https:///v1" }, { code: "invalid_host", hint: expect.any(String) }],
    [{ path: "https://" }, { code: "invalid_host", hint: expect.any(String) }],
    [{ path: "https://bücher.example/v1" }, { code: "invalid_host", hint: expect.any(String) }],
    [{ path: "https://api.exa\nmple.com/v1" }, { code: "invalid_host", hint: expect.any(String) }],
    // the path part of a URL gets rule 1
    [{ path: "https://api.example.com/a/../admin" }, { code: "invalid_path" }],
    [{ path: "https://api.example.com/a%2fb" }, { code: "invalid_path" }],
    [{ path: "https://api.example.com//evil.example" }, { code: "invalid_path" }],
    [{ path: "https://api.example.com#frag" }, { code: "invalid_path" }],
    [{ path: "https://api.example.com\\@evil.example/" }, { code: "invalid_path" }],
    [{ path: "https://api.example.com/a b" }, { code: "invalid_path" }],
  ];
  it.each(rows)("%j -> %j", (input, expected) => {
    expect(targetOutcome(input)).toEqual(expected);
  });
});

describe("parseRequestTarget: host argument with a path or a URL", () => {
  const rows: [{ path: string; host?: string }, TargetOutcome][] = [
    [{ path: "/v1/items" }, { host: undefined, path: "/v1/items" }],
    [
      { path: "/v1/items", host: "api.example.com" },
      { host: "api.example.com", path: "/v1/items" },
    ],
    [
      { path: "/v1/items", host: "API.example.com." },
      { host: "api.example.com", path: "/v1/items" },
    ],
    [
      { path: "https://api.example.com/v1", host: "api.example.com" },
      { host: "api.example.com", path: "/v1" },
    ],
    [
      { path: "https://API.example.com/v1", host: "api.example.com." },
      { host: "api.example.com", path: "/v1" },
    ],
    [
      { path: "https://api.example.com/v1", host: "evil.example" },
      { code: "invalid_host", hint: expect.any(String) },
    ],
    [
      { path: "https://evil.example/v1", host: "api.example.com" },
      { code: "invalid_host", hint: expect.any(String) },
    ],
    [
      { path: "/v1", host: "127.0.0.1" },
      { code: "ip_literal", hint: expect.any(String) },
    ],
    [
      { path: "/v1", host: "api.example.com:8443" },
      { code: "invalid_host", hint: expect.any(String) },
    ],
    [
      { path: "/v1", host: "" },
      { code: "invalid_host", hint: expect.any(String) },
    ],
    [{ path: "/a/../b", host: "api.example.com" }, { code: "invalid_path" }],
    [
      { path: "v1/items", host: "api.example.com" },
      { code: "invalid_path", hint: expect.stringContaining("https://") },
    ],
    [{ path: "api.example.com/v1" }, { code: "invalid_path", hint: expect.stringContaining("https://") }],
    [{ path: "" }, { code: "invalid_path", hint: expect.any(String) }],
  ];
  it.each(rows)("%j -> %j", (input, expected) => {
    expect(targetOutcome(input)).toEqual(expected);
  });

  it("never echoes userinfo from a URL", () => {
    const check = parseRequestTarget({ path: "https://admin:hunter2@api.example.com/" });
    expect(check.ok ? "" : check.message).not.toContain("hunter2");
  });

  it("names both hosts when they disagree", () => {
    const check = parseRequestTarget({ path: "https://api.example.com/v1", host: "evil.example" });
    const message = check.ok ? "" : check.message;
    expect(message).toContain("api.example.com");
    expect(message).toContain("evil.example");
  });
});

describe("normalisePathForMatch: a valid path as an origin reads it, for comparisons only", () => {
  const rows: [string, string][] = [
    ["/v1/items", "/v1/items"],
    ["/v1/items?limit=10", "/v1/items"],
    ["/v1/items/", "/v1/items/"],
    ["/", "/"],
    ["/v1/%6De", "/v1/me"],
    ["/v1/%6de", "/v1/me"],
    ["/%75ser", "/user"],
    ["/api/%74oken", "/api/token"],
    ["/v1//me", "/v1/me"],
    ["/a///b//", "/a/b/"],
    ["/%41%7a%30%2D%5F%7E", "/Az0-_~"],
    ["/Mixed/CASE", "/Mixed/CASE"],
    ["/v1/a%20b", "/v1/a%20b"],
    ["/v1/a%2fb", "/v1/a%2Fb"],
    ["/v1/%e2%82%ac", "/v1/%E2%82%AC"],
    ["/v1/a%40b", "/v1/a%40b"],
    ["/x?q=%6D//", "/x"],
  ];
  it.each(rows)("%j -> %j", (raw, expected) => {
    expect(normalisePathForMatch(raw)).toBe(expected);
  });

  it("leaves what is approved and sent alone: the validated path comes back as given", () => {
    expect(validateRequestPath("/v1//%6De")).toEqual({ ok: true, path: "/v1//%6De" });
  });
});
