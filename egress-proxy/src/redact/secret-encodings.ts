// The spellings of one credential that an origin may echo back: raw, URL and form encoded,
// JSON escaped, base64 (whole, inside a longer base64 text, and as an HTTP Basic pair).

export interface RedactionValue {
  secret: string;
  /** HTTP Basic user id of the credential; the pair `username:secret` is redacted as base64. */
  username?: string | undefined;
}

// Below this many bytes a value has no "inside a longer base64 text" spellings: their few
// characters would match unrelated base64 too often to be worth hiding.
const MIN_EMBEDDED_BASE64_BYTES = 6;

/** Every distinct byte spelling of `value` to hide, unordered; empty when the secret is empty. */
export function listSecretEncodings(value: RedactionValue): Buffer[] {
  const patterns = new Map<string, Buffer>();
  addSecretEncodings(value, patterns);
  return [...patterns.values()];
}

/**
 * Adds every byte spelling of `value` to `patterns`, keyed by its bytes read as latin1 (one
 * character per byte), so that spellings with the same bytes, of this value or of another one
 * added to the same map, are one entry. Adds nothing when the secret is empty.
 */
export function addSecretEncodings(value: RedactionValue, patterns: Map<string, Buffer>): void {
  const secret = value.secret;
  if (typeof secret !== "string" || secret.length === 0) return;
  // Only the secret itself and its JSON escapes can hold non-ASCII; every other spelling is ASCII.
  addText(patterns, secret);
  for (const text of listJsonEscapes(secret)) addText(patterns, text);
  for (const text of listPercentEncodings(secret)) addAscii(patterns, text);
  const bytes = Buffer.from(secret, "utf8");
  for (const text of listBase64Encodings(bytes)) addAscii(patterns, text);
  for (const text of listEmbeddedBase64(bytes)) addAscii(patterns, text);
  for (const text of listBase64Encodings(Buffer.from(`${secret}:`, "utf8"))) addAscii(patterns, text);
  if (value.username !== undefined && value.username.length > 0) {
    for (const text of listBase64Encodings(Buffer.from(`${value.username}:${secret}`, "utf8")))
      addAscii(patterns, text);
  }
}

/** An ASCII text: UTF-8 and latin1 spell it alike, so it is one pattern and its own key. */
function addAscii(patterns: Map<string, Buffer>, text: string): void {
  if (text.length > 0 && !patterns.has(text)) patterns.set(text, Buffer.from(text, "latin1"));
}

function addText(patterns: Map<string, Buffer>, text: string): void {
  if (ASCII.test(text)) {
    addAscii(patterns, text);
    return;
  }
  const utf8 = Buffer.from(text, "utf8");
  patterns.set(utf8.toString("latin1"), utf8);
  // A body in a single-byte charset carries each non-ASCII character as one byte.
  if (LATIN1.test(text)) patterns.set(text, Buffer.from(text, "latin1"));
}

const ASCII = /^[\x00-\x7f]*$/;
const LATIN1 = /^[\x00-\xff]*$/;
/** Characters encodeURIComponent leaves alone but URLSearchParams escapes. */
const WHATWG_FORM_ESCAPED = /[!'()~]/;
/** Characters some JSON encoder writes escaped (JSON.stringify, "\/", \uXXXX of non-ASCII, Go's <>&). */
const JSON_ESCAPED = /[\x00-\x1f"\\/<>&]|[^\x00-\x7f]/;

function lowercaseHexEscapes(text: string): string {
  return text.replace(/%[0-9A-F]{2}/g, (sequence) => sequence.toLowerCase());
}

/** RFC 3986 percent-encoding and the two form encodings, with upper and lowercase hex. */
function listPercentEncodings(secret: string): string[] {
  // encodeURIComponent throws on a lone surrogate; such a value has no URL spelling to hide.
  if (!secret.isWellFormed()) return [];
  const component = encodeURIComponent(secret);
  // Nothing escaped (the usual token: letters, digits, "-", "_", "."): every spelling below is
  // the secret itself.
  if (component === secret && !WHATWG_FORM_ESCAPED.test(secret)) return [secret];
  // Form encoding as most clients write it (space as "+"), and as the WHATWG URL standard writes
  // it (URLSearchParams also escapes ! ' ( ) ~).
  const form = component.replaceAll("%20", "+");
  const whatwgForm = new URLSearchParams([["", secret]]).toString().slice(1);
  return [component, form, whatwgForm].flatMap((text) => [text, lowercaseHexEscapes(text)]);
}

/**
 * JSON string escapes: as JSON.stringify writes them, with "\/" (PHP), with non-ASCII as \uXXXX
 * in either case (Python's ensure_ascii, Java), and with <, >, &, U+2028 and U+2029 as \u escapes
 * (Go's encoding/json), in every combination.
 */
function listJsonEscapes(secret: string): string[] {
  // Nothing any of these encoders escapes: all twelve spellings are the secret itself.
  if (!JSON_ESCAPED.test(secret)) return [secret];
  const plain = JSON.stringify(secret).slice(1, -1);
  const results: string[] = [];
  for (const isSlashEscaped of [false, true]) {
    for (const hexCase of ["none", "lower", "upper"] as const) {
      for (const isHtmlEscaped of [false, true]) {
        let text = isSlashEscaped ? plain.replaceAll("/", "\\/") : plain;
        if (isHtmlEscaped) text = text.replace(/[<>&\u2028\u2029]/g, (c) => unicodeEscape(c, "lower"));
        if (hexCase !== "none") text = text.replace(/[^\x00-\x7f]/g, (c) => unicodeEscape(c, hexCase));
        results.push(text);
      }
    }
  }
  return results;
}

function unicodeEscape(char: string, hexCase: "lower" | "upper"): string {
  // One \uXXXX per UTF-16 code unit: a character beyond the BMP becomes its surrogate pair.
  let escaped = "";
  for (let i = 0; i < char.length; i++) {
    const hex = char.charCodeAt(i).toString(16).padStart(4, "0");
    escaped += `\\u${hexCase === "upper" ? hex.toUpperCase() : hex}`;
  }
  return escaped;
}

/** base64 and base64url of `bytes`, each with and without "=" padding. */
function listBase64Encodings(bytes: Buffer): string[] {
  const standard = bytes.toString("base64");
  const url = bytes.toString("base64url");
  return [standard, standard.replace(/=+$/, ""), url, `${url}${"=".repeat(standard.length - url.length)}`];
}

/**
 * The characters of base64(prefix + bytes + suffix) that depend on `bytes` alone, for each of
 * the three alignments a prefix can give (its length mod 3). An origin that base64-encodes a
 * larger text holding the secret (a JWT payload, a debug dump, a Basic pair with another user)
 * spells the secret with one of these, whatever surrounds it.
 */
function listEmbeddedBase64(bytes: Buffer): string[] {
  if (bytes.length < MIN_EMBEDDED_BASE64_BYTES) return [];
  // Two zero bytes, then the value: from index 2 - offset it is `offset` zero bytes and the value.
  const padded = Buffer.alloc(bytes.length + 2);
  bytes.copy(padded, 2);
  const results: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = padded.subarray(2 - offset).toString("base64");
    // Character i covers bits [6i, 6i + 6); keep those that lie wholly inside the value's bits
    // [8 * offset, 8 * (offset + length)).
    const first = Math.ceil((8 * offset) / 6);
    const end = Math.floor((8 * (offset + bytes.length)) / 6);
    const core = encoded.slice(first, end);
    results.push(core, core.replaceAll("+", "-").replaceAll("/", "_"));
  }
  padded.fill(0);
  return results;
}
