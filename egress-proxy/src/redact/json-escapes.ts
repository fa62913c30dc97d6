// JSON string escapes of a secret as the common JSON encoders write them. Encoders differ in
// which characters they write as \uXXXX, whether they escape "/" and how they write control
// characters, so they are one table of choices rather than one function per encoder.

/**
 * Sets of characters that some encoder writes as \uXXXX although JSON allows them literally;
 * the empty set is JSON.stringify, Python, Jackson and PHP with JSON_UNESCAPED_*.
 */
const U_ESCAPED_SETS: readonly string[] = [
  "",
  // PHP's default for U+2028/U+2029, also under JSON_UNESCAPED_UNICODE.
  "\u2028\u2029",
  // Go encoding/json (HTML-safe by default).
  "<>&\u2028\u2029",
  // PHP JSON_HEX_TAG.
  "<>\u2028\u2029",
  // PHP JSON_HEX_TAG | JSON_HEX_AMP | JSON_HEX_APOS | JSON_HEX_QUOT.
  "<>&'\"\u2028\u2029",
  // Gson (HTML-safe by default).
  "<>&='\u2028\u2029",
  // .NET System.Text.Json's default encoder.
  "<>&'\"+`",
];

/** Characters that make a secret's JSON spellings differ from the secret itself. */
const JSON_SPECIAL = /[\x00-\x1f"\\/<>&'=+`]|[^\x00-\x7f]/;
const SHORT_ESCAPES: Readonly<Record<number, string>> = {
  8: "\\b",
  9: "\\t",
  10: "\\n",
  12: "\\f",
  13: "\\r",
};

interface JsonStyle {
  uEscaped: string;
  /** "/" written as "\/" (PHP's default). */
  isSlashEscaped: boolean;
  /** Every non-ASCII character as \uXXXX (Python's ensure_ascii, PHP, .NET). */
  isNonAsciiEscaped: boolean;
  /** \n, \t and the like as \u000a (some encoders) instead of the short escapes. */
  isControlAsUnicode: boolean;
}

/**
 * Every JSON escape of `secret` that a combination of the choices above produces, plus the
 * spelling with every character as \uXXXX (obfuscators, some template engines). Hex digits are
 * lowercase; the scan reads them without case. May hold duplicates.
 */
export function listJsonEscapes(secret: string): string[] {
  const results = [escapeEveryUnit(secret)];
  // Nothing any encoder escapes (the usual token): every other spelling is the secret itself.
  if (!JSON_SPECIAL.test(secret)) {
    results.push(secret);
    return results;
  }
  // Only the sets that escape a character this secret holds give a new spelling.
  const sets = U_ESCAPED_SETS.filter((set, i) => i === 0 || [...set].some((char) => secret.includes(char)));
  const slashChoices = secret.includes("/") ? [false, true] : [false];
  const nonAsciiChoices = /[^\x00-\x7f]/.test(secret) ? [false, true] : [false];
  const controlChoices = /[\x08\x09\x0a\x0c\x0d]/.test(secret) ? [false, true] : [false];
  for (const uEscaped of sets) {
    for (const isSlashEscaped of slashChoices) {
      for (const isNonAsciiEscaped of nonAsciiChoices) {
        for (const isControlAsUnicode of controlChoices) {
          results.push(
            escapeJson(secret, { uEscaped, isSlashEscaped, isNonAsciiEscaped, isControlAsUnicode }),
          );
        }
      }
    }
  }
  return results;
}

function escapeJson(secret: string, style: JsonStyle): string {
  let text = "";
  for (let i = 0; i < secret.length; i++) {
    const char = secret[i]!;
    const unit = secret.charCodeAt(i);
    if (style.uEscaped.includes(char)) text += unicodeEscape(unit);
    else if (char === '"') text += '\\"';
    else if (char === "\\") text += "\\\\";
    else if (char === "/") text += style.isSlashEscaped ? "\\/" : "/";
    else if (unit < 0x20) text += (!style.isControlAsUnicode && SHORT_ESCAPES[unit]) || unicodeEscape(unit);
    else if (unit < 0x80) text += char;
    else if (style.isNonAsciiEscaped || isLoneSurrogate(secret, i)) text += unicodeEscape(unit);
    else if (unit >= 0xd800 && unit <= 0xdbff) {
      // A surrogate pair stays whole; its low half is copied with it.
      text += secret.slice(i, i + 2);
      i++;
    } else text += char;
  }
  return text;
}

function escapeEveryUnit(secret: string): string {
  let text = "";
  for (let i = 0; i < secret.length; i++) text += unicodeEscape(secret.charCodeAt(i));
  return text;
}

const LATIN1_ESCAPES = Array.from({ length: 256 }, (_, unit) => `\\u${unit.toString(16).padStart(4, "0")}`);

/** One UTF-16 code unit as \uXXXX: a character beyond the BMP is its surrogate pair. */
function unicodeEscape(unit: number): string {
  return LATIN1_ESCAPES[unit] ?? `\\u${unit.toString(16).padStart(4, "0")}`;
}

/** JSON.stringify writes a surrogate without its partner as \uXXXX (well-formed JSON.stringify). */
function isLoneSurrogate(text: string, i: number): boolean {
  const unit = text.charCodeAt(i);
  if (unit >= 0xd800 && unit <= 0xdbff) {
    const next = text.charCodeAt(i + 1);
    return !(next >= 0xdc00 && next <= 0xdfff);
  }
  if (unit >= 0xdc00 && unit <= 0xdfff) {
    const previous = text.charCodeAt(i - 1);
    return !(previous >= 0xd800 && previous <= 0xdbff);
  }
  return false;
}
