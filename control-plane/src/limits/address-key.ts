// The key spec 8's per-address limits count under (issue 21 item 2): one caller is one key, however
// its address is spelled. An IPv4-mapped IPv6 address (::ffff:198.51.100.7) is that IPv4 address,
// and IPv6 counts per /64, the block one home line or one cloud instance is given (RFC 6177), so
// walking through the 2^64 addresses of one's own network is not a way past the limit.
import ipaddr from "ipaddr.js";

/**
 * The counting key of a caller's address: the dotted IPv4 address, or the /64 of an IPv6 one
 * (`2001:db8:1:2::/64`). Text that is no address is kept (lowercased), so it still counts as one.
 *
 * @example addressKey("::ffff:198.51.100.7") // "198.51.100.7"
 * @example addressKey("2001:db8:1:2:aaaa::1") // "2001:db8:1:2::/64"
 */
export function addressKey(address: string): string {
  const text = address.trim().toLowerCase();
  // A zone (fe80::1%eth0) names the interface, not another caller.
  const unzoned = text.includes("%") ? text.slice(0, text.indexOf("%")) : text;
  if (!ipaddr.isValid(unzoned)) return text;
  const parsed = ipaddr.process(unzoned);
  if (parsed.kind() === "ipv4") return parsed.toString();
  const parts = (parsed as ipaddr.IPv6).parts.slice(0, 4).concat([0, 0, 0, 0]);
  return `${new ipaddr.IPv6(parts).toString()}/64`;
}
