// Table tests of the destination decision, apart from DNS: what one answer decides, and which
// verdict a refusal names.
import { describe, expect, it } from "vitest";
import { parseCidrList } from "./classify.ts";
import { type DnsAnswer, decideDestination } from "./decide.ts";

const NO_ALLOW = parseCidrList("");
const LOOPBACK_ALLOWED = parseCidrList("127.0.0.1/32,::1/128");

type Row = [label: string, answer: DnsAnswer, expected: string];

/** "dial <address>/<family>" or "refuse <reason> <address>". */
function summary(answer: DnsAnswer, allow = NO_ALLOW): string {
  const decision = decideDestination(answer, allow);
  return decision.allowed
    ? `dial ${decision.address}/${decision.family}`
    : `refuse ${decision.refused.reason} ${decision.refused.address}`;
}

describe("decideDestination: one answer, one decision", () => {
  const rows: Row[] = [
    ["one public IPv4", { v4: ["93.184.216.34"], v6: [] }, "dial 93.184.216.34/4"],
    ["IPv4 preferred over IPv6", { v4: ["93.184.216.34"], v6: ["2606:4700::1"] }, "dial 93.184.216.34/4"],
    ["the first IPv4 of several", { v4: ["1.1.1.1", "8.8.8.8"], v6: [] }, "dial 1.1.1.1/4"],
    ["IPv6 only", { v4: [], v6: ["2606:4700:4700::1111"] }, "dial 2606:4700:4700::1111/6"],
    // Rebinding with a mixed answer: a public decoy first, the metadata service second.
    [
      "public then link-local",
      { v4: ["93.184.216.34", "169.254.169.254"], v6: [] },
      "refuse link_local 169.254.169.254",
    ],
    ["private first", { v4: ["10.0.0.1", "93.184.216.34"], v6: [] }, "refuse private_range 10.0.0.1"],
    ["a refused IPv6 beside a public IPv4", { v4: ["1.1.1.1"], v6: ["::1"] }, "refuse loopback ::1"],
    [
      "an IPv4-mapped IPv6 beside a public IPv4",
      { v4: ["1.1.1.1"], v6: ["::ffff:127.0.0.1"] },
      "refuse ipv6_embedding ::ffff:127.0.0.1",
    ],
    [
      "the first refusal is the one named",
      { v4: ["127.0.0.1", "10.0.0.1"], v6: [] },
      "refuse loopback 127.0.0.1",
    ],
    ["malformed text fails closed", { v4: ["127.1"], v6: [] }, "refuse reserved_range 127.1"],
    ["an empty answer fails closed", { v4: [], v6: [] }, "refuse reserved_range "],
  ];
  it.each(rows)("%s -> %s", (_label, answer, expected) => {
    expect(summary(answer)).toBe(expected);
  });
});

describe("decideDestination: the development allow list", () => {
  const rows: Row[] = [
    ["an allowed loopback", { v4: ["127.0.0.1"], v6: [] }, "dial 127.0.0.1/4"],
    ["an allowed IPv6 loopback", { v4: [], v6: ["::1"] }, "dial ::1/6"],
    // The list opens exactly what it names: its neighbour and the mapped form stay refused.
    ["a loopback outside the list", { v4: ["127.0.0.2"], v6: [] }, "refuse loopback 127.0.0.2"],
    [
      "the mapped form of an allowed address",
      { v4: [], v6: ["::ffff:127.0.0.1"] },
      "refuse ipv6_embedding ::ffff:127.0.0.1",
    ],
    ["allowed beside refused", { v4: ["127.0.0.1", "10.0.0.1"], v6: [] }, "refuse private_range 10.0.0.1"],
  ];
  it.each(rows)("%s -> %s", (_label, answer, expected) => {
    expect(summary(answer, LOOPBACK_ALLOWED)).toBe(expected);
  });
});

describe("decideDestination: what the decision keeps", () => {
  // The resolver keeps up to a thousand decisions: each holds what a later call needs (the address
  // and family, or the one refusal), never a verdict per address of a long answer.
  it("keeps the chosen address and family alone, however long the answer", () => {
    const v4 = Array.from({ length: 32 }, (_, i) => `8.8.${i}.8`);
    const v6 = Array.from({ length: 32 }, (_, i) => `2606:4700::${i + 1}`);
    expect(decideDestination({ v4, v6 }, NO_ALLOW)).toEqual({ allowed: true, address: "8.8.0.8", family: 4 });
  });

  it("keeps the first refusal alone", () => {
    const decision = decideDestination({ v4: ["127.0.0.1", "8.8.8.8"], v6: ["fe80::1"] }, LOOPBACK_ALLOWED);
    expect(decision).toEqual({
      allowed: false,
      refused: {
        allowed: false,
        reason: "link_local",
        address: "fe80::1",
        range: "fe80::/10 (link-local, RFC 4291)",
      },
    });
  });

  it("names the refused block in the refusal", () => {
    const decision = decideDestination({ v4: ["169.254.169.254"], v6: [] }, NO_ALLOW);
    expect(decision).toMatchObject({
      allowed: false,
      refused: { reason: "link_local", address: "169.254.169.254" },
    });
    expect(decision.allowed ? "" : decision.refused.range).toContain("169.254.0.0/16");
  });
});
