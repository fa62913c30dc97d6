// The allow-list of origin response headers the caller may see (spec 2.8 origin_headers).
import type { IncomingHttpHeaders } from "node:http";

export interface ResponseHeader {
  name: string;
  value: string;
}

const ALLOWED_NAMES: ReadonlySet<string> = new Set(["content-type", "link", "retry-after", "x-request-id"]);
const ALLOWED_PREFIX = "x-ratelimit-";
/** A longer value is not a rate-limit hint; it is a place to smuggle data or bloat the answer. */
export const MAX_HEADER_VALUE_BYTES = 4 * 1024;
// CR/LF would let a value forge lines in whatever the answer is copied into; NUL and the rest of
// C0 and DEL have no business in these headers.
const CONTROL = /[\x00-\x1f\x7f]/;

export function isAllowedResponseHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return (
    ALLOWED_NAMES.has(lower) || (lower.startsWith(ALLOWED_PREFIX) && lower.length > ALLOWED_PREFIX.length)
  );
}

function isSafeValue(value: string): boolean {
  return Buffer.byteLength(value, "latin1") <= MAX_HEADER_VALUE_BYTES && !CONTROL.test(value);
}

/**
 * Keeps only allow-listed headers (lowercase names, one entry per value, in arrival order) and
 * drops any value over 4 KiB or holding a control character. `set-cookie`, `location` and
 * everything else never come back.
 */
export function filterResponseHeaders(
  headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>,
  alsoKeep: readonly string[] = [],
): ResponseHeader[] {
  const kept: ResponseHeader[] = [];
  for (const [rawName, rawValue] of Object.entries(headers)) {
    const name = rawName.toLowerCase();
    if ((!isAllowedResponseHeader(name) && !alsoKeep.includes(name)) || rawValue === undefined) continue;
    for (const value of Array.isArray(rawValue) ? rawValue : [rawValue]) {
      if (typeof value === "string" && isSafeValue(value)) kept.push({ name, value });
    }
  }
  return kept;
}
