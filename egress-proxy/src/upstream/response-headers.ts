// The allow-list of origin response headers the caller may see (spec 2.8 origin_headers).
import type { IncomingHttpHeaders } from "node:http";

export interface ResponseHeader {
  name: string;
  value: string;
}

const ALLOWED_NAMES: ReadonlySet<string> = new Set(["content-type", "link", "retry-after", "x-request-id"]);
/**
 * `x-ratelimit-*` with a rate-limit name's shape: one to four words of letters, as providers name
 * them (`x-ratelimit-remaining`, `x-ratelimit-reset-after`, `x-ratelimit-limit-requests`). The
 * name reaches the agent and redaction reads values only, so a name must have no room for a
 * token an origin echoes (digits, `_`, a long run).
 */
const RATE_LIMIT_NAME = /^x-ratelimit-[a-z]{1,16}(?:-[a-z]{1,16}){0,3}$/;
/** A longer value is not a rate-limit hint; it is a place to smuggle data or bloat the answer. */
export const MAX_HEADER_VALUE_BYTES = 4 * 1024;
/**
 * Values kept per name and in all. An origin may repeat an allowed header thousands of times
 * within undici's 32 KiB header block; each kept value is redacted, and read in pairs with the
 * others for a credential split across them (redact/header-block.ts), so their number is bounded.
 * Real answers carry one of each, a few `link` lines, and some six rate-limit names.
 */
export const MAX_VALUES_PER_NAME = 8;
export const MAX_KEPT_VALUES = 32;
// CR/LF would let a value forge lines in whatever the answer is copied into; NUL and the rest of
// C0 and DEL have no business in these headers.
const CONTROL = /[\x00-\x1f\x7f]/;

export function isAllowedResponseHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return ALLOWED_NAMES.has(lower) || RATE_LIMIT_NAME.test(lower);
}

function isSafeValue(value: string): boolean {
  return Buffer.byteLength(value, "latin1") <= MAX_HEADER_VALUE_BYTES && !CONTROL.test(value);
}

/**
 * Keeps only allow-listed headers (lowercase names, one entry per value, in arrival order), the
 * first MAX_VALUES_PER_NAME of a name and MAX_KEPT_VALUES in all, and drops any value over 4 KiB
 * or holding a control character. `set-cookie`, `location` and everything else never come back.
 */
export function filterResponseHeaders(
  headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>,
  alsoKeep: readonly string[] = [],
): ResponseHeader[] {
  const kept: ResponseHeader[] = [];
  for (const [rawName, rawValue] of Object.entries(headers)) {
    const name = rawName.toLowerCase();
    if ((!isAllowedResponseHeader(name) && !alsoKeep.includes(name)) || rawValue === undefined) continue;
    let keptOfName = 0;
    for (const value of Array.isArray(rawValue) ? rawValue : [rawValue]) {
      if (typeof value !== "string" || !isSafeValue(value)) continue;
      kept.push({ name, value });
      if (kept.length === MAX_KEPT_VALUES) return kept;
      if (++keptOfName === MAX_VALUES_PER_NAME) break;
    }
  }
  return kept;
}
