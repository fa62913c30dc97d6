// Table-driven tests of the raw hostname check: IP literals in every notation, IDN, LDH, limits.
import { describe, expect, it } from "vitest";
import { checkHostname } from "./host.ts";

type Expected = string | "invalid_host" | "ip_literal";

/** The accepted host, or the refusal code. */
function outcome(raw: string): Expected {
  const check = checkHostname(raw);
  return check.ok ? check.host : check.code;
}

describe("checkHostname: IP literals in every notation are ip_literal", () => {
  const rows: [string, Expected][] = [
    ["127.0.0.1", "ip_literal"],
    ["8.8.8.8", "ip_literal"],
    ["0177.0.0.1", "ip_literal"], // octal
    ["0x7f000001", "ip_literal"], // hex integer
    ["0x7f.1", "ip_literal"], // hex, short
    ["0x7F.0.0.1", "ip_literal"],
    ["127.1", "ip_literal"], // short form
    ["127.0.1", "ip_literal"],
    ["2130706433", "ip_literal"], // one decimal integer
    ["017700000001", "ip_literal"], // one octal integer
    ["0x7f.0x0.0x0.0x1", "ip_literal"],
    ["127.0x0.1", "ip_literal"], // mixed
    ["0", "ip_literal"],
    ["0x", "ip_literal"], // the WHATWG parser reads a bare 0x as 0
    ["127.0.0.1.", "ip_literal"], // trailing dot
    ["127.0.0.1..", "ip_literal"],
    ["１２７.０.０.１", "ip_literal"], // fullwidth digits
    ["127。0。0。1", "ip_literal"], // ideographic full stops
    ["127．0．0．1", "ip_literal"], // fullwidth full stops
    ["０ｘ７ｆ.１", "ip_literal"],
    ["127.0.0.1\ufe0f", "ip_literal"], // a variation selector IDNA drops
    ["1.2.3.4%25eth0", "ip_literal"], // zone id, URL-encoded
    ["1.2.3.4%eth0", "ip_literal"],
    ["[::1]", "ip_literal"],
    ["::1", "ip_literal"],
    ["[::ffff:127.0.0.1]", "ip_literal"],
    ["::ffff:127.0.0.1", "ip_literal"],
    ["::ffff:7f00:1", "ip_literal"],
    ["2606:4700:4700::1111", "ip_literal"],
    ["[2606:4700:4700::1111]:443", "ip_literal"],
    ["fe80::1%25eth0", "ip_literal"],
    ["[fe80::1%25eth0]", "ip_literal"],
    ["FE80::1", "ip_literal"],
    ["127.0.0.1:443", "ip_literal"],
    // A name whose last label is numeric is IPv4 to the WHATWG parser (or a failure), never a name.
    ["api.example.123", "ip_literal"],
    ["api.example.0x1f", "ip_literal"],
    ["foo.0x", "ip_literal"],
    ["foo.09", "ip_literal"],
  ];
  it.each(rows)("%j -> %s", (raw, expected) => {
    expect(outcome(raw)).toBe(expected);
  });
});

describe("checkHostname: names that look numeric but are not IPv4 pass", () => {
  const rows: [string, Expected][] = [
    ["123.example.com", "123.example.com"],
    ["1e100.net", "1e100.net"],
    ["api.0x.example", "api.0x.example"],
    ["example.com1", "example.com1"],
    ["0xdeadbeef.example", "0xdeadbeef.example"],
    ["api.example.x1", "api.example.x1"],
  ];
  it.each(rows)("%j -> %s", (raw, expected) => {
    expect(outcome(raw)).toBe(expected);
  });
});

describe("checkHostname: case, trailing dot, LDH, lengths", () => {
  const label63 = "a".repeat(63);
  const name253 = `${"a".repeat(61)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(63)}`;
  const rows: [string, Expected][] = [
    ["api.example.com", "api.example.com"],
    ["API.Example.COM", "api.example.com"],
    ["api.example.com.", "api.example.com"],
    ["API.EXAMPLE.COM.", "api.example.com"],
    ["api.example.com..", "invalid_host"],
    [".api.example.com", "invalid_host"],
    ["api..example.com", "invalid_host"],
    [".", "invalid_host"],
    ["", "invalid_host"],
    ["a-b.example.com", "a-b.example.com"],
    ["r3---sn-abc.googlevideo.com", "r3---sn-abc.googlevideo.com"],
    ["-api.example.com", "invalid_host"],
    ["api-.example.com", "invalid_host"],
    ["api_v2.example.com", "invalid_host"],
    ["api.example.com/v1", "invalid_host"],
    ["api.example.com?x", "invalid_host"],
    ["api.example.com#x", "invalid_host"],
    ["api.example.com\\x", "invalid_host"],
    ["api.exa*mple.com", "invalid_host"],
    [`${label63}.example.com`, `${label63}.example.com`],
    [`${label63}a.example.com`, "invalid_host"],
    [name253, name253],
    [`${name253}.`, name253],
    [`a${name253}`, "invalid_host"],
    ["a".repeat(5000), "invalid_host"],
    ["api", "invalid_host"], // single label: the resolver's search list would complete it
    ["localhost", "invalid_host"],
    ["app.localhost", "invalid_host"],
    ["printer.local", "invalid_host"],
    ["db.internal", "invalid_host"],
    ["router.home.arpa", "invalid_host"],
    ["api.latch.test", "api.latch.test"],
    ["evil.example", "evil.example"],
    ["localhost.example.com", "localhost.example.com"],
  ];
  it.each(rows)("%j -> %s", (raw, expected) => {
    expect(outcome(raw)).toBe(expected);
  });
});

describe("checkHostname: ports, userinfo, brackets, percent, whitespace", () => {
  const rows: [string, Expected][] = [
    ["api.example.com:443", "invalid_host"],
    ["api.example.com:8443", "invalid_host"],
    ["api.example.com:", "invalid_host"],
    ["user@api.example.com", "invalid_host"],
    ["user:secret@api.example.com", "invalid_host"],
    ["api.example.com@evil.example", "invalid_host"],
    ["[api.example.com]", "invalid_host"],
    ["api%2eexample.com", "invalid_host"],
    ["%61pi.example.com", "invalid_host"],
    [" api.example.com", "invalid_host"],
    ["api.example.com ", "invalid_host"],
    ["api.example.com\n", "invalid_host"],
    ["api.example.com\r\nX-Evil: 1", "invalid_host"],
    ["api\t.example.com", "invalid_host"],
    ["api\u0000.example.com", "invalid_host"],
    ["ex\u00adample.com", "invalid_host"], // soft hyphen, which IDNA would silently drop
    ["ex\u200bample.com", "invalid_host"], // zero-width space
    ["api.example.com\u202e", "invalid_host"], // bidi override
    ["api\u3000example.com", "invalid_host"], // ideographic space
  ];
  it.each(rows)("%j -> %s", (raw, expected) => {
    expect(outcome(raw)).toBe(expected);
  });
});

describe("checkHostname: IDN is ASCII only", () => {
  const rows: [string, Expected][] = [
    ["xn--bcher-kva.example", "xn--bcher-kva.example"],
    ["XN--BCHER-KVA.example", "xn--bcher-kva.example"],
    ["xn--ls8h.example", "xn--ls8h.example"],
    ["bücher.example", "invalid_host"],
    ["ｅｘａｍｐｌｅ.com", "invalid_host"], // fullwidth letters: refused, not silently folded
    ["аpple.com", "invalid_host"], // Cyrillic a: a homograph
    ["xn--zz.example", "invalid_host"], // not valid punycode
    ["xn--abc-.example", "invalid_host"], // decodes to plain ASCII: a fake A-label
    ["xn--8g7ccp.example", "invalid_host"], // decodes to fullwidth digits, not a valid U-label
    ["xn--.example", "invalid_host"],
  ];
  it.each(rows)("%j -> %s", (raw, expected) => {
    expect(outcome(raw)).toBe(expected);
  });

  it("asks for the punycode form of a Unicode name, naming it", () => {
    const check = checkHostname("bücher.example");
    expect(check).toMatchObject({ ok: false, code: "invalid_host" });
    expect(check.ok ? "" : check.message).toContain("xn--bcher-kva.example");
  });
});

describe("checkHostname: messages", () => {
  it("never echo userinfo, which may be a password", () => {
    const check = checkHostname("admin:hunter2@api.example.com");
    expect(check.ok ? "" : check.message).not.toContain("hunter2");
  });

  it("are one line and length-limited even for hostile input", () => {
    const check = checkHostname(`${"a".repeat(300)}\r\nX-Evil: 1`);
    const message = check.ok ? "" : check.message;
    expect(message).not.toMatch(/[\r\n]/);
    expect(message.length).toBeLessThan(200);
  });

  it("escape control and invisible characters they echo", () => {
    const check = checkHostname("api.example.com\u202e\n");
    const message = check.ok ? "" : check.message;
    expect(message).toContain("\\u202e");
    expect(message).not.toMatch(/[\u202e\n]/);
  });

  it("say an IP literal is refused because it is an address", () => {
    const check = checkHostname("0x7f.1");
    expect(check.ok ? "" : check.message).toMatch(/IP address/);
  });
});

describe("checkHostname: a URL pasted as a host", () => {
  it("says it is a URL and names the host it holds, never a port", () => {
    for (const [raw, host] of [
      ["https://api.github.com", "api.github.com"],
      ["https://api.github.com/repos/acme?x=1", "api.github.com"],
      ["https://api.github.com:443/", "api.github.com"],
      ["HTTP://Example.com#top", "example.com"],
    ] as const) {
      const check = checkHostname(raw);
      expect(check.ok).toBe(false);
      const message = check.ok ? "" : check.message;
      expect(message, raw).toMatch(
        new RegExp(`is a URL; give the host name only: ${host.replace(/\./g, "\\.")}\\.$`),
      );
      expect(message).not.toMatch(/port/);
    }
    const odd = checkHostname("https://10.0.0.1/x");
    expect(odd.ok ? "" : odd.message).toMatch(
      /is a URL; give the host name only, such as api\.example\.com\.$/,
    );
    // A port other than 443 in the URL is not offered as a host.
    expect(checkHostname("https://api.github.com:8443").ok).toBe(false);
  });
});
