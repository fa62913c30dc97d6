// The public-address rule: classifies one resolved address as allowed or refused with a named reason.
//
// This runs on every address DNS hands back, right before the proxy dials it, so it is the last line
// of defence against server-side request forgery: a hostname the operator approved can still resolve
// (or be re-pointed by its owner, "DNS rebinding") to 169.254.169.254, 127.0.0.1 or a LAN address.
// Anything that is not plainly a public unicast address is refused; malformed text fails closed.
import { AppError } from "@latch/shared/errors";
import ipaddr from "ipaddr.js";

export type DenyReason =
  | "private_range"
  | "loopback"
  | "link_local"
  | "multicast"
  | "reserved_range"
  | "ipv6_embedding"
  | "not_global_unicast";

/** Why an address may be dialled: plainly public, or inside the development allow list. */
export type AllowReason = "public_unicast" | "allow_listed";

/** A refusal: the reason is also the call's error code and its metric label. */
export type DeniedVerdict = { allowed: false; reason: DenyReason; address: string; range: string };

/**
 * The decision on one address, named so that it can be logged and counted: `address` is the text
 * that was judged, `range` (on a refusal) the block it fell in, with its RFC.
 */
export type AddressVerdict = { allowed: true; reason: AllowReason; address: string } | DeniedVerdict;

/** The classification of one block hit, before it is tied to the address text. */
type Classification = { allowed: true } | { allowed: false; reason: DenyReason; range: string };

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** Canonical dotted-quad only: no leading zeros, no short or hex forms that other parsers disagree on. */
const CANONICAL_IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
/** IPv6 text: hex groups and colons, optionally ending in a canonical dotted quad. No zone id. */
const IPV6_TEXT = /^[0-9a-f:]+$|^[0-9a-f:]+:(?:\d{1,3}\.){3}\d{1,3}$/i;

/** One address range, e.g. from `EGRESS_ALLOW_CIDRS`. `text` is the canonical form for logs. */
export type Cidr = { readonly network: Address; readonly prefix: number; readonly text: string };

type Block = { readonly cidr: Cidr; readonly reason: DenyReason; readonly label: string };

/**
 * IANA IPv4 Special-Purpose Address Registry, plus multicast and the reserved class E space. Every
 * entry is refused, even the ones IANA marks "globally reachable" (AS112, AMT, 6to4 relay): no
 * third-party API lives there and each is a way to reach infrastructure rather than a service.
 */
const IPV4_BLOCKS: readonly Block[] = [
  // "This network". Linux treats a connect() to 0.0.0.0 as a connect to the local host, a classic
  // SSRF bypass of filters that only know 127.0.0.0/8.
  block("0.0.0.0/8", "reserved_range", "this network, RFC 791"),
  // RFC 1918 private ranges: DNS rebinding or an attacker-controlled record pointing into the LAN.
  block("10.0.0.0/8", "private_range", "private-use, RFC 1918"),
  block("172.16.0.0/12", "private_range", "private-use, RFC 1918"),
  block("192.168.0.0/16", "private_range", "private-use, RFC 1918"),
  // Carrier-grade NAT shared space: the provider's side of the network, never a public service.
  block("100.64.0.0/10", "private_range", "shared address space (CGNAT), RFC 6598"),
  // Loopback: the proxy host itself (its admin ports, metrics, sidecars).
  block("127.0.0.0/8", "loopback", "loopback, RFC 1122"),
  // Link-local, which holds the cloud metadata service 169.254.169.254 (instance credentials).
  block("169.254.0.0/16", "link_local", "link-local incl. cloud metadata 169.254.169.254, RFC 3927"),
  // IETF protocol assignments: DS-Lite, NAT64 discovery, PCP and TURN anycast; local plumbing.
  block("192.0.0.0/24", "reserved_range", "IETF protocol assignments, RFC 6890"),
  // Documentation ranges: never routed, so an answer here is a misconfiguration or a trick.
  block("192.0.2.0/24", "reserved_range", "documentation TEST-NET-1, RFC 5737"),
  block("198.51.100.0/24", "reserved_range", "documentation TEST-NET-2, RFC 5737"),
  block("203.0.113.0/24", "reserved_range", "documentation TEST-NET-3, RFC 5737"),
  // AS112 sinks and AMT relays: infrastructure anycast, not API origins.
  block("192.31.196.0/24", "reserved_range", "AS112-v4, RFC 7535"),
  block("192.52.193.0/24", "reserved_range", "AMT, RFC 7450"),
  block("192.175.48.0/24", "reserved_range", "direct delegation AS112 service, RFC 7534"),
  // 6to4 relay anycast: traffic sent here is tunnelled on to an address chosen by whoever answers.
  block("192.88.99.0/24", "reserved_range", "6to4 relay anycast, RFC 7526"),
  // Benchmarking: lab networks, sometimes used inside data centres.
  block("198.18.0.0/15", "reserved_range", "benchmarking, RFC 2544"),
  // Multicast: one request fanned out to a group on the local network.
  block("224.0.0.0/4", "multicast", "multicast, RFC 5771"),
  // Limited broadcast comes before class E so that it gets its own label.
  block("255.255.255.255/32", "reserved_range", "limited broadcast, RFC 919"),
  block("240.0.0.0/4", "reserved_range", "reserved class E, RFC 1112"),
];

/**
 * IANA IPv6 Special-Purpose Address Registry entries that are not embeddings (those are decoded by
 * `classifyEmbedding`). The first group lies outside 2000::/3 and gets a specific reason rather than
 * the generic `not_global_unicast`; the second group lies inside 2000::/3 and is still refused.
 */
const IPV6_BLOCKS: readonly Block[] = [
  // Link-local: the local segment (neighbours, routers, on-link metadata services).
  block("fe80::/10", "link_local", "link-local, RFC 4291"),
  // Unique local: the IPv6 counterpart of RFC 1918 (incl. AWS metadata fd00:ec2::254).
  block("fc00::/7", "private_range", "unique local, RFC 4193"),
  // Deprecated site-local: still routed inside some old networks.
  block("fec0::/10", "private_range", "site-local (deprecated), RFC 3879"),
  block("ff00::/8", "multicast", "multicast, RFC 4291"),
  block("100::/64", "reserved_range", "discard-only, RFC 6666"),
  block("100:0:0:1::/64", "reserved_range", "dummy prefix, RFC 9780"),
  block("5f00::/16", "reserved_range", "segment routing SIDs, RFC 9602"),
  // Inside 2000::/3 but special. 2001::/23 (IETF protocol assignments) covers Teredo's /32 (handled
  // first as an embedding), benchmarking 2001:2::/48, AMT 2001:3::/32, AS112 2001:4:112::/48,
  // ORCHID 2001:10::/28, ORCHIDv2 2001:20::/28 and drone remote ID 2001:30::/28.
  block("2001:2::/48", "reserved_range", "benchmarking, RFC 5180"),
  block("2001:10::/28", "reserved_range", "ORCHID (deprecated), RFC 4843"),
  block("2001:20::/28", "reserved_range", "ORCHIDv2, RFC 7343"),
  block("2001::/23", "reserved_range", "IETF protocol assignments, RFC 2928"),
  block("2001:db8::/32", "reserved_range", "documentation, RFC 3849"),
  block("3fff::/20", "reserved_range", "documentation, RFC 9637"),
  block("2620:4f:8000::/48", "reserved_range", "direct delegation AS112 service, RFC 7534"),
];

/** The host itself. Checked before the embeddings because both also lie inside ::/96. */
const IPV6_SELF: readonly Block[] = [
  // Loopback: the proxy host itself (admin ports, metrics, sidecars).
  block("::1/128", "loopback", "loopback, RFC 4291"),
  // Unspecified: like 0.0.0.0, a connect() to :: reaches the local host on Linux.
  block("::/128", "reserved_range", "unspecified address, RFC 4291"),
];

/** Only global unicast may be dialled; everything else in IPv6 space is refused. */
const IPV6_GLOBAL_UNICAST = parseCidr("2000::/3");

/**
 * IPv6 forms that carry an IPv4 address. All are refused whatever the inner address: a public inner
 * address still means the packet goes through a translator or tunnel relay we do not control (and that
 * may sit inside the operator's network, e.g. a NAT64 gateway in front of the LAN), and a private
 * inner address (::ffff:127.0.0.1, 64:ff9b::a9fe:a9fe) is a direct SSRF route around the IPv4 list.
 * `extract` decodes the IPv4 so the refusal names it.
 */
const EMBEDDINGS: readonly { cidr: Cidr; label: string; extract: (p: readonly number[]) => ipaddr.IPv4 }[] = [
  { cidr: parseCidr("::ffff:0:0/96"), label: "IPv4-mapped, RFC 4291", extract: (p) => ipv4From(p[6], p[7]) },
  {
    cidr: parseCidr("::ffff:0:0:0/96"),
    label: "IPv4-translated, RFC 6145",
    extract: (p) => ipv4From(p[6], p[7]),
  },
  {
    cidr: parseCidr("64:ff9b::/96"),
    label: "NAT64 well-known prefix, RFC 6052",
    extract: (p) => ipv4From(p[6], p[7]),
  },
  // Local-use NAT64: the operator picks the prefix length, so the /96 layout is a best guess for
  // the message; the whole /48 is refused regardless.
  {
    cidr: parseCidr("64:ff9b:1::/48"),
    label: "local-use NAT64, RFC 8215",
    extract: (p) => ipv4From(p[6], p[7]),
  },
  { cidr: parseCidr("2002::/16"), label: "6to4, RFC 3056", extract: (p) => ipv4From(p[1], p[2]) },
  // Teredo: the client address is stored bitwise inverted in the last 32 bits (RFC 4380 section 4),
  // which hides a private client address from naive filters.
  {
    cidr: parseCidr("2001::/32"),
    label: "Teredo, RFC 4380",
    extract: (p) => ipv4From((p[6] ?? 0) ^ 0xffff, (p[7] ?? 0) ^ 0xffff),
  },
  // IPv4-compatible (deprecated): ::a.b.c.d. Checked after :: and ::1, which have their own reasons.
  {
    cidr: parseCidr("::/96"),
    label: "IPv4-compatible (deprecated), RFC 4291",
    extract: (p) => ipv4From(p[6], p[7]),
  },
];

/**
 * Decides whether the proxy may dial `address` (as returned by DNS). Pure: no lookup, no clock.
 * `allowCidrs` (development/test only, `EGRESS_ALLOW_CIDRS`) is checked first so that a test can
 * reach a loopback origin; nothing else bends the rule. Fails closed: text that is not a canonical
 * IPv4 or IPv6 address is refused as `reserved_range`.
 *
 * @example classifyAddress("169.254.169.254")
 *   // { allowed: false, reason: "link_local", address: "169.254.169.254", range: "169.254.0.0/16 (...)" }
 */
export function classifyAddress(address: string, allowCidrs: readonly Cidr[] = []): AddressVerdict {
  const text = typeof address === "string" ? address.slice(0, 64) : "";
  if (allowCidrs.length > 0 && isInCidrs(address, allowCidrs)) {
    return { allowed: true, reason: "allow_listed", address: text };
  }
  const parsed = parseAddress(address);
  const classification: Classification = !parsed
    ? { allowed: false, reason: "reserved_range", range: "not a canonical IP address" }
    : parsed.kind() === "ipv4"
      ? classifyIpv4(parsed as ipaddr.IPv4)
      : classifyIpv6(parsed as ipaddr.IPv6);
  return classification.allowed
    ? { allowed: true, reason: "public_unicast", address: text }
    : { ...classification, address: text };
}

/**
 * Parses a comma-separated list of ranges ("127.0.0.1/32,::1/128"). A bare address means just that
 * address (/32 or /128). Blank entries are skipped. An entry with host bits set ("10.0.0.1/8") is
 * refused rather than silently widened: in an allow list that typo would open a whole network.
 */
export function parseCidrList(text: string): Cidr[] {
  const cidrs: Cidr[] = [];
  for (const raw of text.split(",")) {
    const entry = raw.trim();
    if (entry === "") continue;
    const cidr = tryParseCidr(entry);
    if (!cidr) {
      throw new AppError(
        "invalid_request",
        `address range ${JSON.stringify(entry.slice(0, 64))} is not a canonical CIDR such as 10.0.0.0/8 or ::1/128, with no bits set after the prefix`,
      );
    }
    cidrs.push(cidr);
  }
  return cidrs;
}

/** True when `address` is inside one of `cidrs`. Families never cross-match; malformed text is false. */
export function isInCidrs(address: string, cidrs: readonly Cidr[]): boolean {
  const parsed = parseAddress(address);
  if (!parsed) return false;
  return cidrs.some((c) => c.network.kind() === parsed.kind() && parsed.match(c.network, c.prefix));
}

function classifyIpv4(address: ipaddr.IPv4): Classification {
  const hit = IPV4_BLOCKS.find((b) => address.match(b.cidr.network, b.cidr.prefix));
  return hit ? deny(hit.reason, `${hit.cidr.text} (${hit.label})`) : { allowed: true };
}

function classifyIpv6(address: ipaddr.IPv6): Classification {
  const exact = IPV6_SELF.find((b) => address.match(b.cidr.network, b.cidr.prefix));
  if (exact) return deny(exact.reason, `${exact.cidr.text} (${exact.label})`);
  const embedding = EMBEDDINGS.find((e) => address.match(e.cidr.network, e.cidr.prefix));
  if (embedding) {
    const inner = embedding.extract(address.parts);
    const innerVerdict = classifyIpv4(inner);
    const innerText = innerVerdict.allowed ? "public" : innerVerdict.reason;
    return deny(
      "ipv6_embedding",
      `${embedding.cidr.text} (${embedding.label}) carrying IPv4 ${inner.toString()} (${innerText})`,
    );
  }
  const hit = IPV6_BLOCKS.find((b) => address.match(b.cidr.network, b.cidr.prefix));
  if (hit) return deny(hit.reason, `${hit.cidr.text} (${hit.label})`);
  if (!address.match(IPV6_GLOBAL_UNICAST.network, IPV6_GLOBAL_UNICAST.prefix)) {
    return deny("not_global_unicast", "outside 2000::/3 (global unicast), RFC 4291");
  }
  return { allowed: true };
}

function deny(reason: DenyReason, range: string): Classification {
  return { allowed: false, reason, range };
}

/**
 * Strict parser: ipaddr.js on its own accepts "0177.1", "127.1" and zone ids, forms that mean
 * different things to different parsers. DNS answers are canonical, so anything else is refused.
 */
function parseAddress(text: string): Address | undefined {
  if (typeof text !== "string" || text.length > 64) return undefined;
  if (CANONICAL_IPV4.test(text)) return ipaddr.IPv4.parse(text);
  if (!text.includes(":") || !IPV6_TEXT.test(text)) return undefined;
  const dotted = text.includes(".") ? text.slice(text.lastIndexOf(":") + 1) : undefined;
  if (dotted !== undefined && !CANONICAL_IPV4.test(dotted)) return undefined;
  try {
    return ipaddr.IPv6.parse(text);
  } catch {
    return undefined;
  }
}

function tryParseCidr(entry: string): Cidr | undefined {
  const slash = entry.indexOf("/");
  const addressText = slash === -1 ? entry : entry.slice(0, slash);
  const address = parseAddress(addressText);
  if (!address) return undefined;
  const bits = address.kind() === "ipv4" ? 32 : 128;
  let prefix = bits;
  if (slash !== -1) {
    const prefixText = entry.slice(slash + 1);
    if (!/^(?:0|[1-9]\d{0,2})$/.test(prefixText)) return undefined;
    prefix = Number(prefixText);
    if (prefix > bits) return undefined;
  }
  const network =
    address.kind() === "ipv4"
      ? ipaddr.IPv4.networkAddressFromCIDR(`${address.toString()}/${prefix}`)
      : ipaddr.IPv6.networkAddressFromCIDR(`${address.toString()}/${prefix}`);
  if (network.toString() !== address.toString()) return undefined;
  return Object.freeze({ network, prefix, text: `${network.toString()}/${prefix}` });
}

function parseCidr(text: string): Cidr {
  const cidr = tryParseCidr(text);
  if (!cidr) throw new Error(`built-in address range ${text} is malformed`);
  return cidr;
}

function block(text: string, reason: DenyReason, label: string): Block {
  return Object.freeze({ cidr: parseCidr(text), reason, label });
}

function ipv4From(high: number | undefined, low: number | undefined): ipaddr.IPv4 {
  const h = high ?? 0;
  const l = low ?? 0;
  return new ipaddr.IPv4([h >> 8, h & 0xff, l >> 8, l & 0xff]);
}
