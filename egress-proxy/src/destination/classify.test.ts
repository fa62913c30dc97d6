// Table-driven tests of the public-address rule, one row per special-purpose block at least.
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import {
  type AddressVerdict,
  classifyAddress,
  type DenyReason,
  isInCidrs,
  parseCidrList,
} from "./classify.ts";

type Expected = "allowed" | DenyReason;

function outcome(verdict: AddressVerdict): Expected {
  return verdict.allowed ? "allowed" : verdict.reason;
}

describe("classifyAddress: IPv4 special-purpose blocks", () => {
  const rows: [string, Expected][] = [
    ["0.0.0.0", "reserved_range"],
    ["0.1.2.3", "reserved_range"],
    ["10.0.0.1", "private_range"],
    ["10.255.255.255", "private_range"],
    ["100.64.0.1", "private_range"],
    ["100.127.255.254", "private_range"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["169.254.169.254", "link_local"],
    ["169.254.0.1", "link_local"],
    ["172.16.0.1", "private_range"],
    ["172.31.255.255", "private_range"],
    ["192.0.0.1", "reserved_range"],
    ["192.0.0.170", "reserved_range"],
    ["192.0.2.1", "reserved_range"],
    ["192.31.196.1", "reserved_range"],
    ["192.52.193.1", "reserved_range"],
    ["192.88.99.1", "reserved_range"],
    ["192.168.1.1", "private_range"],
    ["192.175.48.1", "reserved_range"],
    ["198.18.0.1", "reserved_range"],
    ["198.19.255.255", "reserved_range"],
    ["198.51.100.7", "reserved_range"],
    ["203.0.113.9", "reserved_range"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["240.0.0.1", "reserved_range"],
    ["255.255.255.254", "reserved_range"],
    ["255.255.255.255", "reserved_range"],
  ];
  it.each(rows)("%s -> %s", (address, expected) => {
    expect(outcome(classifyAddress(address))).toBe(expected);
  });
});

describe("classifyAddress: public IPv4 next to the blocks passes", () => {
  const rows: [string, Expected][] = [
    ["8.8.8.8", "allowed"],
    ["1.1.1.1", "allowed"],
    ["9.255.255.255", "allowed"],
    ["11.0.0.0", "allowed"],
    ["100.63.255.255", "allowed"],
    ["100.128.0.0", "allowed"],
    ["126.255.255.255", "allowed"],
    ["128.0.0.0", "allowed"],
    ["169.253.255.255", "allowed"],
    ["172.15.255.255", "allowed"],
    ["172.32.0.0", "allowed"],
    ["192.0.1.1", "allowed"],
    ["192.167.255.255", "allowed"],
    ["198.17.255.255", "allowed"],
    ["198.20.0.0", "allowed"],
    ["223.255.255.255", "allowed"],
  ];
  it.each(rows)("%s -> %s", (address, expected) => {
    expect(outcome(classifyAddress(address))).toBe(expected);
  });
});

describe("classifyAddress: IPv6", () => {
  const rows: [string, Expected][] = [
    ["2606:4700:4700::1111", "allowed"],
    ["2a00:1450::1", "allowed"],
    ["2001:4860:4860::8888", "allowed"],
    ["2001:200::1", "allowed"], // just past 2001::/23
    ["2620:4f:8001::1", "allowed"], // next to the AS112 /48
    ["3ffe::1", "allowed"],
    ["::1", "loopback"],
    ["::", "reserved_range"],
    ["fe80::1", "link_local"],
    ["febf:ffff::1", "link_local"],
    ["fc00::1", "private_range"],
    ["fd00:ec2::254", "private_range"],
    ["fec0::1", "private_range"],
    ["ff02::1", "multicast"],
    ["ff05::1:3", "multicast"],
    ["100::1", "reserved_range"],
    ["100:0:0:1::1", "reserved_range"],
    ["5f00::1", "reserved_range"],
    ["2001:2::1", "reserved_range"],
    ["2001:3::1", "reserved_range"],
    ["2001:4:112::1", "reserved_range"],
    ["2001:10::1", "reserved_range"],
    ["2001:20::1", "reserved_range"],
    ["2001:30::1", "reserved_range"],
    ["2001:1::1", "reserved_range"],
    ["2001:db8::1", "reserved_range"],
    ["3fff::1", "reserved_range"],
    ["2620:4f:8000::1", "reserved_range"],
    ["4000::1", "not_global_unicast"],
    ["1234::1", "not_global_unicast"],
    ["e000::1", "not_global_unicast"],
    ["2606:4700:4700:0:0:0:0:1111", "allowed"],
    ["2606:4700:4700::1111".toUpperCase(), "allowed"],
  ];
  it.each(rows)("%s -> %s", (address, expected) => {
    expect(outcome(classifyAddress(address))).toBe(expected);
  });
});

describe("classifyAddress: IPv4 embedded in IPv6 is refused whatever the inner address", () => {
  // [address, decoded inner IPv4 expected in the range text]
  const rows: [string, string][] = [
    ["::ffff:127.0.0.1", "127.0.0.1 (loopback)"],
    ["::ffff:7f00:1", "127.0.0.1 (loopback)"],
    ["::ffff:169.254.169.254", "169.254.169.254 (link_local)"],
    ["::ffff:8.8.8.8", "8.8.8.8 (public)"],
    ["::127.0.0.1", "127.0.0.1 (loopback)"],
    ["::a00:1", "10.0.0.1 (private_range)"],
    ["::ffff:0:a00:1", "10.0.0.1 (private_range)"],
    ["64:ff9b::10.0.0.1", "10.0.0.1 (private_range)"],
    ["64:ff9b::a9fe:a9fe", "169.254.169.254 (link_local)"],
    ["64:ff9b::808:808", "8.8.8.8 (public)"],
    ["64:ff9b:1::a00:1", "10.0.0.1 (private_range)"],
    ["2002:0a00:0001::", "10.0.0.1 (private_range)"],
    ["2002:7f00:1::1", "127.0.0.1 (loopback)"],
    ["2002:808:808::1", "8.8.8.8 (public)"],
    // Teredo: server 65.54.227.120, client 192.168.1.1 stored inverted as 3f57:fefe.
    ["2001:0:4136:e378:8000:63bf:3f57:fefe", "192.168.1.1 (private_range)"],
    // Teredo client 127.0.0.1 inverted: 80ff:fffe.
    ["2001::80ff:fffe", "127.0.0.1 (loopback)"],
  ];
  it.each(rows)("%s carries %s", (address, inner) => {
    const verdict = classifyAddress(address);
    expect(verdict).toMatchObject({ allowed: false, reason: "ipv6_embedding" });
    expect(verdict.allowed ? "" : verdict.range).toContain(`IPv4 ${inner}`);
  });
});

describe("classifyAddress: the range text names the block", () => {
  const rows: [string, string][] = [
    ["169.254.169.254", "169.254.0.0/16"],
    ["10.1.1.1", "10.0.0.0/8 (private-use, RFC 1918)"],
    ["100.64.1.1", "100.64.0.0/10"],
    ["255.255.255.255", "255.255.255.255/32 (limited broadcast"],
    ["2001:db8::1", "2001:db8::/32 (documentation"],
    ["2001:2::5", "2001:2::/48 (benchmarking"],
    ["::ffff:10.0.0.1", "::ffff:0:0/96 (IPv4-mapped"],
    ["2001::1", "2001::/32 (Teredo"],
    ["4000::1", "2000::/3"],
  ];
  it.each(rows)("%s names %s", (address, range) => {
    const verdict = classifyAddress(address);
    expect(verdict.allowed ? "" : verdict.range).toContain(range);
  });
});

describe("classifyAddress: malformed or non-canonical text fails closed", () => {
  const rows: [string, Expected][] = [
    ["", "reserved_range"],
    ["localhost", "reserved_range"],
    ["example.com", "reserved_range"],
    ["0177.0.0.1", "reserved_range"],
    ["010.0.0.1", "reserved_range"],
    ["8.8.8.08", "reserved_range"],
    ["127.1", "reserved_range"],
    ["0x7f.0.0.1", "reserved_range"],
    ["2130706433", "reserved_range"],
    ["8.8.8.8 ", "reserved_range"],
    [" 8.8.8.8", "reserved_range"],
    ["8.8.8.8.", "reserved_range"],
    ["256.1.1.1", "reserved_range"],
    ["1.2.3", "reserved_range"],
    ["[2606:4700:4700::1111]", "reserved_range"],
    ["2606:4700:4700::1111%eth0", "reserved_range"],
    ["fe80::1%25eth0", "reserved_range"],
    ["2606:4700::4700::1111", "reserved_range"],
    ["1:2:3:4:5:6:7:8:9", "reserved_range"],
    ["::ffff:0x7f.1", "reserved_range"],
    ["::ffff:127.1", "reserved_range"],
    ["２６０６:4700:4700::1111", "reserved_range"],
    ["８.８.８.８", "reserved_range"],
    ["8.8.8.8\n", "reserved_range"],
  ];
  it.each(rows)("%j -> %s", (address, expected) => {
    expect(outcome(classifyAddress(address))).toBe(expected);
  });

  it("refuses a non-string without throwing", () => {
    expect(outcome(classifyAddress(undefined as unknown as string))).toBe("reserved_range");
  });
});

describe("classifyAddress: the verdict names the address and the reason", () => {
  const rows: [string, AddressVerdict][] = [
    ["8.8.8.8", { allowed: true, reason: "public_unicast", address: "8.8.8.8" }],
    ["2606:4700:4700::1111", { allowed: true, reason: "public_unicast", address: "2606:4700:4700::1111" }],
    [
      "127.0.0.1",
      { allowed: false, reason: "loopback", address: "127.0.0.1", range: "127.0.0.0/8 (loopback, RFC 1122)" },
    ],
    [
      "fd00:ec2::254",
      {
        allowed: false,
        reason: "private_range",
        address: "fd00:ec2::254",
        range: "fc00::/7 (unique local, RFC 4193)",
      },
    ],
    [
      "0177.0.0.1",
      {
        allowed: false,
        reason: "reserved_range",
        address: "0177.0.0.1",
        range: "not a canonical IP address",
      },
    ],
  ];
  it.each(rows)("%s", (address, verdict) => {
    expect(classifyAddress(address)).toEqual(verdict);
  });
});

describe("classifyAddress with a development allow list", () => {
  const allow = parseCidrList("127.0.0.1/32,10.20.0.0/16");
  const rows: [string, Expected | "allow_listed"][] = [
    ["127.0.0.1", "allow_listed"],
    ["10.20.1.1", "allow_listed"],
    // Only what the list names: neighbours keep their refusal.
    ["127.0.0.2", "loopback"],
    ["10.21.0.1", "private_range"],
    // Families never cross-match, so the mapped form of an allowed address stays refused.
    ["::ffff:127.0.0.1", "ipv6_embedding"],
    // Non-canonical text is never in a list.
    ["127.1", "reserved_range"],
    ["8.8.8.8", "allowed"],
  ];
  it.each(rows)("%s -> %s", (address, expected) => {
    const verdict = classifyAddress(address, allow);
    const got = verdict.allowed
      ? verdict.reason === "allow_listed"
        ? "allow_listed"
        : "allowed"
      : verdict.reason;
    expect(got).toBe(expected);
    expect(verdict.address).toBe(address);
  });
});

describe("parseCidrList and isInCidrs", () => {
  const cidrs = parseCidrList("127.0.0.1/32, ::1/128,10.20.0.0/16,fd00::/8,192.0.2.7");

  it("keeps the canonical text of every entry", () => {
    expect(cidrs.map((c) => c.text)).toEqual([
      "127.0.0.1/32",
      "::1/128",
      "10.20.0.0/16",
      "fd00::/8",
      "192.0.2.7/32",
    ]);
  });

  const rows: [string, boolean][] = [
    ["127.0.0.1", true],
    ["127.0.0.2", false],
    ["::1", true],
    ["::2", false],
    ["10.20.255.1", true],
    ["10.21.0.1", false],
    ["fd12:3456::1", true],
    ["fe80::1", false],
    ["192.0.2.7", true],
    ["192.0.2.8", false],
    // Families never cross-match: the mapped form of an allowed IPv4 is not allowed.
    ["::ffff:127.0.0.1", false],
    // Non-canonical text is never in a list.
    ["127.1", false],
    ["0177.0.0.1", false],
    ["", false],
  ];
  it.each(rows)("%s in the list -> %s", (address, expected) => {
    expect(isInCidrs(address, cidrs)).toBe(expected);
  });

  it("an empty list or blank text matches nothing", () => {
    expect(parseCidrList("")).toEqual([]);
    expect(parseCidrList(" , ")).toEqual([]);
    expect(isInCidrs("127.0.0.1", [])).toBe(false);
  });

  it("0.0.0.0/0 matches every IPv4 and no IPv6", () => {
    const all = parseCidrList("0.0.0.0/0");
    expect(isInCidrs("8.8.8.8", all)).toBe(true);
    expect(isInCidrs("2606:4700:4700::1111", all)).toBe(false);
  });

  const badRows: [string, string][] = [
    ["10.0.0.1/8", "10.0.0.1/8"],
    ["127.0.0.1/33", "127.0.0.1/33"],
    ["::1/129", "::1/129"],
    ["10.0.0.0/", "10.0.0.0/"],
    ["10.0.0.0/08", "10.0.0.0/08"],
    ["10.0.0.0/-1", "10.0.0.0/-1"],
    ["127.1/32", "127.1/32"],
    ["localhost/32", "localhost/32"],
    ["127.0.0.1/32,not-an-address", "not-an-address"],
    ["fe80::1%eth0/128", "fe80::1%eth0/128"],
  ];
  it.each(badRows)("refuses %j naming the bad entry", (text, entry) => {
    let thrown: unknown;
    try {
      parseCidrList(text);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(AppError);
    expect((thrown as AppError).code).toBe("invalid_request");
    expect((thrown as AppError).message).toContain(JSON.stringify(entry));
  });
});
