// How the consent and device pages name an OAuth client and where it sends the browser back to
// (issue 21 item 1): a name the client chose for itself is said to be unverified; an https
// client_id (a client metadata document) is vouched for by its host; an https redirect is shown by
// its host, any other redirect whole with its scheme, so `cursor://...` or a loopback port is never
// read as a web site's name.
import { toSafeText } from "@latch/shared/text/safe-text";

/** What both pages say of a client that named itself (no metadata document vouches for it). */
export const SELF_NAMED_NOTE = "registered itself with this name (unverified)";

const MAX_TARGET = 200;

/**
 * Invisible characters that change how the text around them reads (Unicode category Cf: the bidi
 * embeddings, overrides and isolates U+202A-U+202E and U+2066-U+2069, the marks U+200E/U+200F and
 * U+061C, zero-width spaces and joiners, U+FEFF), and line or paragraph separators. A name the
 * client chose must not reverse the page's sentence around it ("Probe\u202Eevil") nor hide
 * inside a familiar name ("Cl\u200Baude").
 */
const FORMAT_OR_SEPARATOR = /[\p{Cf}\p{Zl}\p{Zp}]/gu;

/**
 * A name a client chose, as one safe line: control and format characters become U+FFFD (so the
 * operator sees that something was there), at most 80 characters.
 *
 * @example clientDisplayName("Probe\u202Eevil", "x") // "Probe\uFFFDevil"
 */
export function clientDisplayName(raw: unknown, fallback: string): string {
  const text =
    typeof raw === "string"
      ? toSafeText(raw.normalize("NFC")).replace(FORMAT_OR_SEPARATOR, "\uFFFD").trim()
      : "";
  // Cut by code point, so an emoji at the cut is never left half a surrogate pair.
  return Array.from(text).slice(0, 80).join("").trimEnd() || fallback;
}

/** The host of an https client_id (the site that publishes its metadata document), else null. */
export function publisherOf(clientId: string): string | null {
  if (!clientId.startsWith("https://")) return null;
  return URL.parse(clientId)?.host || null;
}

/**
 * Where a redirect URI sends the browser, as the pages show it: an https URI by its host (the site
 * the operator knows), anything else whole, scheme included (cut at 200 characters).
 *
 * @example redirectTarget("https://claude.ai/api/mcp/auth_callback") // "claude.ai"
 * @example redirectTarget("cursor://anysphere.cursor-mcp/oauth/callback") // the same string
 */
export function redirectTarget(uri: unknown): string | null {
  if (typeof uri !== "string") return null;
  const parsed = URL.parse(uri);
  if (parsed?.protocol === "https:" && parsed.host) return parsed.host;
  // As the URL parser writes it (anything outside ASCII percent-encoded), so no bidi or lookalike
  // character changes what the operator reads.
  const whole = toSafeText(parsed?.href ?? uri);
  return whole.length > MAX_TARGET ? `${whole.slice(0, MAX_TARGET)}...` : whole;
}
