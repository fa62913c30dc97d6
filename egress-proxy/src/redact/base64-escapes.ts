// The spellings of a base64 or base64url text whose "+", "/" or "=" an encoder escaped on its
// way into a JSON string, a URL or an HTML page: an origin that echoes an Authorization header
// through PHP's json_encode ("\/"), .NET's System.Text.Json ("\u002B"), encodeURIComponent
// ("%2B") or Go's html/template ("&#43;") writes the same base64, so each must be hidden too.
// Letters and digits, the rest of base64, are written as themselves by every one of these.

/** How one family of encoders may write each of the three characters (besides literally). */
export interface Base64EscapeFamily {
  /** The byte every escape of the family holds: an answer without it holds none of them. */
  marker: number;
  /** The escapes of "+", "/" and "=", hex digits and the "x" of "&#x" in lowercase. */
  escapes: Readonly<Record<Base64Punctuation, readonly string[]>>;
}

type Base64Punctuation = "+" | "/" | "=";

const BACKSLASH = 0x5c;
const PERCENT = 0x25;
const AMPERSAND = 0x26;

// Hex case is not listed: the scan reads hex digits and "x" without case (spelling-automaton.ts).
// An encoder escapes some of the three and leaves the others literal (.NET escapes "+" alone,
// PHP "/" alone, Gson "=" alone; Go's url.PathEscape keeps "+" and "=", Python's quote keeps
// "/"), so every choice for each character is combined with every choice for the others.
export const BASE64_ESCAPE_FAMILIES: readonly Base64EscapeFamily[] = [
  // JSON: PHP json_encode "\/", serialize-javascript "\u002F", .NET "\u002B", Gson "\u003d".
  { marker: BACKSLASH, escapes: { "+": ["\\u002b"], "/": ["\\/", "\\u002f"], "=": ["\\u003d"] } },
  // Percent-encoding: encodeURIComponent, PHP urlencode, URLSearchParams and the rest of
  // url-encodings.ts, each keeping its own subset literal.
  { marker: PERCENT, escapes: { "+": ["%2b"], "/": ["%2f"], "=": ["%3d"] } },
  // HTML, one family per way of writing a reference, since an escaper writes all of its
  // references one way: decimal (Go html/template &#43;, its attribute escaper &#61;), hex
  // (.NET HtmlEncoder &#x2B;, OWASP ESAPI &#x2f; &#x3d;), named (PHP htmlentities with
  // ENT_HTML5: &plus; &sol; &equals;).
  { marker: AMPERSAND, escapes: { "+": ["&#43;"], "/": ["&#47;"], "=": ["&#61;"] } },
  { marker: AMPERSAND, escapes: { "+": ["&#x2b;"], "/": ["&#x2f;"], "=": ["&#x3d;"] } },
  { marker: AMPERSAND, escapes: { "+": ["&plus;"], "/": ["&sol;"], "=": ["&equals;"] } },
];

const PUNCTUATION: readonly Base64Punctuation[] = ["+", "/", "="];

/** Whether a base64 text holds a character that any family escapes. */
export const BASE64_ESCAPED = /[+/=]/;
const BASE64_PUNCTUATION = /[+/=]/g;

/**
 * Every spelling of `base64` in which `family` escapes at least one of the "+", "/" and "="
 * it holds, each character written one way throughout the text; empty when it holds none.
 *
 * @example listEscapedBase64("a+b/c=", BASE64_ESCAPE_FAMILIES[1]!) // ["a%2bb/c=", "a+b%2fc=", ..., "a%2bb%2fc%3d"]
 */
export function listEscapedBase64(base64: string, family: Base64EscapeFamily): string[] {
  // The choices for each character the text holds: literal first, then the family's escapes.
  const present = PUNCTUATION.filter((char) => base64.includes(char));
  if (present.length === 0) return [];
  const choices = present.map((char) => [char, ...family.escapes[char]]);
  const results: string[] = [];
  // Each combination as digits in mixed radix; 0 everywhere (all literal) is base64 itself.
  const picked = choices.map(() => 0);
  for (;;) {
    let carry = 0;
    while (carry < picked.length && ++picked[carry]! === choices[carry]!.length) picked[carry++] = 0;
    if (carry === picked.length) return results;
    const written: Record<string, string> = {};
    for (let i = 0; i < present.length; i++) written[present[i]!] = choices[i]![picked[i]!]!;
    // One pass, so that an escape holding "/" ("\/") is never escaped again.
    results.push(base64.replace(BASE64_PUNCTUATION, (char) => written[char]!));
  }
}
