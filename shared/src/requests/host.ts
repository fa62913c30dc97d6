// Hostname check for http_request (spec 4.2 `host`, rule 4): one canonical ASCII name, never an IP.
//
// The check runs on the RAW string, before any URL parser sees it. A WHATWG parser "helpfully" turns
// 0177.1, 0x7f.1, 2130706433, １２７.０.０.１ and 127。0。0。1 into 127.0.0.1, so a check made after
// parsing can be fooled by what an operator approved as a harmless-looking name. What comes out is
// the exact string compared with an item's allowed_hosts (exact match) and handed to DNS.
import { domainToASCII, domainToUnicode } from "node:url";
import { quoteUntrusted } from "./quote.ts";

export type HostCheck =
  | { ok: true; host: string }
  | { ok: false; code: "invalid_host" | "ip_literal"; message: string };

/** RFC 1035 section 2.3.4: 255 octets on the wire, which is 253 characters of dotted text. */
const MAX_HOST_LENGTH = 253;
const MAX_LABEL_LENGTH = 63;
/** LDH rule (RFC 952, RFC 1123 section 2.1): letters, digits, inner hyphens; lowercase by now. */
const LDH_LABEL = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;
/** Controls, whitespace of every kind and invisible format characters (soft hyphen, bidi, ZWJ). */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Z}\s]/u;
/** What the WHATWG parser counts as an IPv4 number in the last label ("ends in a number"). */
const NUMERIC_LABEL = /^(?:\d+|0x[0-9a-f]*)$/;
const CANONICAL_IPV4 = /^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;
/** Dots that IDNA (UTS 46) maps to "." : fullwidth, ideographic and halfwidth ideographic full stops. */
const FOREIGN_DOTS = /[\u3002\uff0e\uff61]/g;
/**
 * Special-use names (RFC 6761 localhost, RFC 6762 mDNS .local, ICANN's private-use .internal,
 * RFC 8375 home.arpa) only ever resolve to the local host or the local network: no API lives there.
 * The address classifier would refuse the answer anyway; refusing the name says why up front.
 */
const LOCAL_ONLY_SUFFIXES = ["localhost", "local", "internal", "home.arpa"];

/**
 * Checks and canonicalises a hostname given by a caller.
 *
 * Decisions:
 * - Case: ASCII letters are lowercased; the result is always lowercase.
 * - One trailing dot (the DNS root) is stripped: "api.example.com." is "api.example.com"; two are refused.
 * - IDN: only ASCII. A Unicode name is refused with its punycode A-label ("xn--") form suggested;
 *   A-labels are accepted when they decode and re-encode to themselves (fake "xn--" labels refused).
 * - LDH rule, labels 1 to 63 characters, total 253; no underscore. Hyphens at positions 3-4 are
 *   allowed outside "xn--" because real hosts use them (r3---sn-abc.googlevideo.com).
 * - At least two labels: a single label would be completed from the resolver's search list.
 * - No port, userinfo, brackets, "%", "/", "?", "#", "\\", whitespace or control characters.
 * - IP literals in any notation are `ip_literal`: dotted, octal, hex, short (127.1), one integer,
 *   any name whose last label is all digits or 0x-hex (the WHATWG parser reads those as IPv4),
 *   IPv6 with or without brackets, IPv4-mapped IPv6, zone ids, fullwidth digits and foreign dots.
 *
 * @example checkHostname("API.Example.com.") // { ok: true, host: "api.example.com" }
 * @example checkHostname("0x7f.1") // { ok: false, code: "ip_literal", ... }
 */
export function checkHostname(raw: string): HostCheck {
  if (typeof raw !== "string" || raw.length === 0)
    return invalid("The host is empty; give a domain name such as api.example.com.");
  // Bound the work before anything else looks at the text; a valid name is at most 254 with its dot.
  if (raw.length > MAX_HOST_LENGTH + 1)
    return invalid(`The host ${quote(raw)} is longer than ${MAX_HOST_LENGTH} characters.`);
  // The part before "@" may be a password: never echo a host that carries userinfo.
  if (raw.includes("@"))
    return invalid("The host must not contain user info (user:password@); give the domain name only.");
  if (INVISIBLE.test(raw)) {
    return invalid(`The host ${quote(raw)} contains whitespace, control or invisible characters.`);
  }
  if (isIpLiteral(raw)) {
    return {
      ok: false,
      code: "ip_literal",
      message: `The host ${quote(raw)} is an IP address; Latch only calls APIs by domain name.`,
    };
  }
  // A URL pasted where a host goes: say so, and name the host it holds, rather than "a port" for
  // the scheme's colon.
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(raw);
  if (scheme) {
    const inside = checkHostname(raw.slice(scheme[0].length).split(/[/?#]/)[0]!.replace(/:443$/, ""));
    return invalid(
      `The host ${quote(raw)} is a URL; give the host name only${inside.ok ? `: ${inside.host}` : ", such as api.example.com"}.`,
    );
  }
  if (/[[\]]/.test(raw))
    return invalid(`The host ${quote(raw)} contains brackets; give a plain domain name.`);
  if (raw.includes(":"))
    return invalid(`The host ${quote(raw)} contains a port; Latch connects to port 443, so drop it.`);
  if (raw.includes("%"))
    return invalid(`The host ${quote(raw)} contains "%"; percent-encoding is not allowed in a host.`);
  if (/[/?#\\]/.test(raw))
    return invalid(`The host ${quote(raw)} contains a path character; give the domain name only.`);
  if (/[^\x00-\x7f]/.test(raw)) return refuseUnicode(raw);

  let host = raw.toLowerCase();
  if (host.endsWith(".")) host = host.slice(0, -1);
  if (host.length > MAX_HOST_LENGTH)
    return invalid(`The host ${quote(raw)} is longer than ${MAX_HOST_LENGTH} characters.`);
  const labels = host.split(".");
  for (const label of labels) {
    const problem = findLabelProblem(label);
    if (problem) return invalid(`The host ${quote(raw)} ${problem}.`);
  }
  if (labels.length < 2) {
    return invalid(
      `The host ${quote(raw)} is a single label; give the full domain name, such as api.example.com.`,
    );
  }
  if (LOCAL_ONLY_SUFFIXES.some((suffix) => host === suffix || host.endsWith(`.${suffix}`))) {
    return invalid(`The host ${quote(raw)} is a local-only special-use name; no public API can live there.`);
  }
  return { ok: true, host };
}

/**
 * True when any parser on the way could read `raw` as an IP address. Two independent views, both
 * fail-safe in the "literal" direction: the WHATWG host parser itself (what an HTTP client will do),
 * and our own reading of the folded text, which also catches forms the WHATWG parser rejects
 * outright but other resolvers (inet_aton, getaddrinfo) accept, such as "foo.0x" or "1.2.3.4%eth0".
 */
function isIpLiteral(raw: string): boolean {
  const parsed = toWhatwgHost(raw);
  if (parsed !== undefined && (CANONICAL_IPV4.test(parsed) || parsed.startsWith("["))) return true;

  // Fold what IDNA would fold: compatibility forms (fullwidth digits), foreign dots, case.
  const folded = raw.normalize("NFKC").replace(FOREIGN_DOTS, ".").toLowerCase();
  // Bracketed IPv6 ("[::1]", "[::1]:443"), with or without a zone.
  if (/^\[[^\]]*:[^\]]*\]/.test(folded)) return true;
  // Drop a zone id ("fe80::1%25eth0", "1.2.3.4%25eth0"): the address before it is what matters.
  const unzoned = folded.replace(/%.*$/s, "");
  const colons = unzoned.split(":").length - 1;
  // Bare IPv6, including "::ffff:127.0.0.1" and "::ffff:7f00:1": two or more colons, hex and dots only.
  if (colons >= 2 && /^[0-9a-f:.]+$/.test(unzoned)) return true;
  // "127.0.0.1:443": judge the part before the port.
  const hostPart = colons === 1 ? unzoned.slice(0, unzoned.indexOf(":")) : unzoned;
  const lastLabel = hostPart.replace(/\.+$/, "").split(".").pop() ?? "";
  return NUMERIC_LABEL.test(lastLabel);
}

function toWhatwgHost(raw: string): string | undefined {
  try {
    return domainToASCII(raw);
  } catch {
    return undefined;
  }
}

/** One problem with a label, as the end of a sentence, or undefined when the label is fine. */
function findLabelProblem(label: string): string | undefined {
  if (label.length === 0) return "has an empty label (two dots in a row, or a leading dot)";
  if (label.length > MAX_LABEL_LENGTH) return `has a label longer than ${MAX_LABEL_LENGTH} characters`;
  if (!LDH_LABEL.test(label)) {
    return "has a label with characters other than letters, digits and inner hyphens";
  }
  if (label.startsWith("xn--") && !isValidALabel(label))
    return `has a malformed punycode label ${quote(label)}`;
  return undefined;
}

/** A real A-label decodes to Unicode and encodes back to exactly itself (RFC 5891 section 5.4). */
function isValidALabel(label: string): boolean {
  const unicode = domainToUnicode(label);
  return unicode !== "" && unicode !== label && domainToASCII(unicode) === label;
}

function refuseUnicode(raw: string): HostCheck {
  const aLabel = toWhatwgHost(raw);
  const suggestion = aLabel && /^[a-z0-9.-]+$/.test(aLabel) ? ` (${quote(aLabel)})` : "";
  return invalid(
    `The host ${quote(raw)} is not ASCII; give its ASCII form, with punycode xn-- labels for Unicode parts${suggestion}.`,
  );
}

function invalid(message: string): HostCheck {
  return { ok: false, code: "invalid_host", message };
}

function quote(text: string): string {
  return quoteUntrusted(text, 64);
}
