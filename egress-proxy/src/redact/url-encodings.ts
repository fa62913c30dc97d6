// Percent-encodings of a secret as the common URL encoders write them. Encoders differ only in
// which characters they leave literal and how they write a space, so they are one table.

/** A URL encoder, described by what it leaves alone. */
interface UrlEncoder {
  /** ASCII characters written as themselves; every other byte becomes %XX. */
  literal: string;
  /**
   * How a non-ASCII character is written: %XX of each UTF-8 byte (every modern encoder), or
   * JavaScript's legacy escape(): %XX of a Latin-1 code unit, %uXXXX of any other UTF-16 unit.
   */
  nonAscii: "utf8" | "escape";
}

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

// Hex case is not listed: the scan reads hex digits without case (spelling-automaton.ts), so
// "%2F", "%2f" and a mix of both are one spelling, listed in lowercase. Space is written both as "%20" and as "+"
// for every row (listed once below), which also covers an encoder used with the other
// convention, such as quote() for a form body.
const URL_ENCODERS: readonly UrlEncoder[] = [
  // Every byte escaped, letters and digits included (some loggers and obfuscators).
  { literal: "", nonAscii: "utf8" },
  // Letters and digits only.
  { literal: ALNUM, nonAscii: "utf8" },
  // PHP urlencode ("~" as %7E).
  { literal: `${ALNUM}-_.`, nonAscii: "utf8" },
  // RFC 3986 unreserved: PHP rawurlencode, Go url.QueryEscape, Python quote_plus and
  // quote(safe=""), .NET Uri.EscapeDataString, Ruby CGI.escape, curl_easy_escape.
  { literal: `${ALNUM}-_.~`, nonAscii: "utf8" },
  // Python urllib.parse.quote with its default safe="/".
  { literal: `${ALNUM}-_.~/`, nonAscii: "utf8" },
  // application/x-www-form-urlencoded per WHATWG (URLSearchParams) and Java URLEncoder.
  { literal: `${ALNUM}-_.*`, nonAscii: "utf8" },
  // .NET WebUtility.UrlEncode and HttpUtility.UrlEncode.
  { literal: `${ALNUM}-_.!*()`, nonAscii: "utf8" },
  // JavaScript encodeURIComponent.
  { literal: `${ALNUM}-_.!~*'()`, nonAscii: "utf8" },
  // JavaScript encodeURI.
  { literal: `${ALNUM}-_.!~*'();/?:@&=+$,#`, nonAscii: "utf8" },
  // Go url.PathEscape (one path segment).
  { literal: `${ALNUM}-_.~$&+:=@`, nonAscii: "utf8" },
  // Go url.URL.EscapedPath (a whole path).
  { literal: `${ALNUM}-_.~$&+,/:;=@`, nonAscii: "utf8" },
  // Go url.UserPassword (userinfo).
  { literal: `${ALNUM}-_.~$&+,;=`, nonAscii: "utf8" },
  // JavaScript escape().
  { literal: `${ALNUM}@*_+-./`, nonAscii: "escape" },
];

const PERCENT_HEX = Array.from({ length: 256 }, (_, byte) => `%${byte.toString(16).padStart(2, "0")}`);

const IS_ALNUM: readonly boolean[] = Array.from({ length: 128 }, (_, code) =>
  ALNUM.includes(String.fromCharCode(code)),
);

/** Per encoder, which ASCII codes stay literal (built once from the table above). */
const LITERAL_TABLES: readonly Uint8Array[] = URL_ENCODERS.map(({ literal }) => {
  const table = new Uint8Array(128);
  for (let i = 0; i < literal.length; i++) table[literal.charCodeAt(i)] = 1;
  return table;
});

/**
 * Every percent-encoding of `secret` that one of the encoders above writes, space as "%20" and
 * as "+", hex in lowercase (the scan ignores hex case), and each of those that holds a "%"
 * encoded once more by each encoder: a query-injected credential comes back so inside another
 * URL (a login link's `next=` or `return_to=` holding the request URL, a pagination link), its
 * "%2F" as "%252F". ASCII only; may hold duplicates.
 */
export function listUrlEncodings(secret: string, utf8: Uint8Array): string[] {
  const once = listUrlEncodingsOnce(secret, utf8, 0);
  const results = [...once];
  // Not the first row's text (every byte escaped) again, which no encoder writes twice: a token
  // of letters and digits alone has no second spelling.
  const everyByte = encodeUtf8Bytes(utf8, LITERAL_TABLES[0]!);
  for (const text of new Set(once)) {
    if (!text.includes("%") || text === everyByte || text === everyByte.replaceAll("%20", "+")) continue;
    results.push(...listUrlEncodingsOnce(text, Buffer.from(text, "latin1"), 1));
  }
  return results;
}

/** listUrlEncodings' first pass, by the rows of URL_ENCODERS from `firstRow` on. */
function listUrlEncodingsOnce(secret: string, utf8: Uint8Array, firstRow: number): string[] {
  // Encoders that keep the same characters of this secret write the same text: the usual token
  // (letters, digits, "-", "_", ".") has three spellings, not thirteen.
  const punctuation = listPunctuation(utf8);
  const hasNonAscii = utf8.some((byte) => byte >= 0x80);
  const seen = new Set<string>();
  const results: string[] = [];
  for (let row = firstRow; row < URL_ENCODERS.length; row++) {
    const encoder = URL_ENCODERS[row]!;
    const literal = LITERAL_TABLES[row]!;
    const isEscapeStyle = encoder.nonAscii === "escape" && hasNonAscii;
    let key = `${row === 0 ? "all" : ""}${isEscapeStyle ? "escape" : ""}:`;
    for (const byte of punctuation) key += literal[byte] === 1 ? "1" : "0";
    if (seen.has(key)) continue;
    seen.add(key);
    const text = isEscapeStyle ? encodeLikeEscape(secret, literal) : encodeUtf8Bytes(utf8, literal);
    results.push(text);
    if (secret.includes(" ")) results.push(text.replaceAll("%20", "+"));
  }
  return results;
}

/** The distinct ASCII bytes of `utf8` that are not letters or digits. */
function listPunctuation(utf8: Uint8Array): number[] {
  const found: number[] = [];
  for (let i = 0; i < utf8.length; i++) {
    const byte = utf8[i]!;
    if (byte < 128 && !IS_ALNUM[byte] && !found.includes(byte)) found.push(byte);
  }
  return found;
}

function encodeUtf8Bytes(utf8: Uint8Array, literal: Uint8Array): string {
  let text = "";
  for (let i = 0; i < utf8.length; i++) {
    const byte = utf8[i]!;
    text += byte < 128 && literal[byte] === 1 ? String.fromCharCode(byte) : PERCENT_HEX[byte];
  }
  return text;
}

/** JavaScript's escape(): per UTF-16 code unit, so a lone surrogate has a spelling too. */
function encodeLikeEscape(secret: string, literal: Uint8Array): string {
  let text = "";
  for (let i = 0; i < secret.length; i++) {
    const unit = secret.charCodeAt(i);
    if (unit < 128 && literal[unit] === 1) text += secret[i];
    else if (unit < 256) text += PERCENT_HEX[unit];
    else text += `%u${unit.toString(16).padStart(4, "0")}`;
  }
  return text;
}
