// Host patterns (DECISIONS "Policies" and PUSH_SERVICE_HOSTS): an exact host, or `*.suffix` for
// every name under a suffix. One reading for every place that lists hosts by pattern, so that
// "*.example.com" never matches "example.com" or "badexample.com" in one place and does in another.

const LDH_LABEL = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;

export type HostPatternCheck = { ok: true; value: string } | { ok: false; message: string };

/**
 * A host pattern as a rule holds it: lowercase, one trailing dot dropped, ASCII only, LDH labels;
 * `*.suffix` matches any name under the suffix (never the suffix itself).
 * @example checkHostPattern("*.Example.com.") // { ok: true, value: "*.example.com" }
 */
export function checkHostPattern(raw: string): HostPatternCheck {
  let host = raw.trim().toLowerCase();
  if (host.endsWith(".")) host = host.slice(0, -1);
  const isWildcard = host.startsWith("*.");
  const name = isWildcard ? host.slice(2) : host;
  if (name.length === 0) return { ok: false, message: "a host pattern names a host, e.g. api.example.com" };
  if (name.includes("*"))
    return { ok: false, message: "a host is exact or starts with one `*.` (e.g. *.example.com)" };
  if (/[^\x21-\x7e]/.test(name))
    return { ok: false, message: "a host is ASCII: write an international name in its xn-- form" };
  if (name.length > 253) return { ok: false, message: "a host is at most 253 characters" };
  const labels = name.split(".");
  if (labels.some((label) => label.length > 63 || !LDH_LABEL.test(label)))
    return {
      ok: false,
      message: "a host is letters, digits, hyphens and dots (no scheme, port, path or IP address)",
    };
  if (/^\d+$/.test(labels.at(-1)!))
    return { ok: false, message: "an IP address is never a host here; calls go to names only" };
  if (!isWildcard && labels.length < 2)
    return { ok: false, message: "a host has at least two labels; for every name under it write *.suffix" };
  return { ok: true, value: isWildcard ? `*.${name}` : name };
}

/** Whether `host` (canonical, lowercase) matches a checked host pattern. */
export function isHostMatch(pattern: string, host: string): boolean {
  if (!pattern.startsWith("*.")) return pattern === host;
  // "*.example.com" is ".example.com" as a suffix: "api.example.com" yes, "example.com" and
  // "badexample.com" no.
  return host.length > pattern.length - 1 && host.endsWith(pattern.slice(1));
}
