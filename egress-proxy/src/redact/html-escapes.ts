// HTML character references of a secret as the common HTML escapers write them, as one table of
// how each escaper writes the characters it escapes.

/**
 * How an escaper writes `"`, `'` and `+` (undefined: left literal). Every escaper here writes
 * `&`, `<` and `>` as &amp; &lt; &gt;.
 */
interface HtmlEscaper {
  quote?: string;
  apostrophe?: string;
  plus?: string;
}

const HTML_ESCAPERS: readonly HtmlEscaper[] = [
  // Python html.escape.
  { quote: "&quot;", apostrophe: "&#x27;" },
  // Go html.EscapeString, MarkupSafe (Jinja).
  { quote: "&#34;", apostrophe: "&#39;" },
  // Go html/template.
  { quote: "&#34;", apostrophe: "&#39;", plus: "&#43;" },
  // PHP htmlspecialchars with ENT_QUOTES (PHP 8.1's default).
  { quote: "&quot;", apostrophe: "&#039;" },
  // PHP with ENT_HTML5 or ENT_XML1, XML escapers.
  { quote: "&quot;", apostrophe: "&apos;" },
  // lodash escape, Rails, .NET WebUtility.HtmlEncode.
  { quote: "&quot;", apostrophe: "&#39;" },
  // .NET HtmlEncoder.Default.
  { quote: "&quot;", apostrophe: "&#x27;", plus: "&#x2B;" },
  // PHP ENT_COMPAT (before 8.1), Java escapeHtml4.
  { quote: "&quot;" },
  // Text-only escapers (Python html.escape(quote=False)).
  {},
];

const HTML_SPECIAL = /[&<>"'+]|[^\x00-\x7f]/;
const ASCII_DECIMAL = Array.from({ length: 128 }, (_, point) => `&#${point};`);
const ASCII_HEX = Array.from({ length: 128 }, (_, point) => `&#x${point.toString(16)};`);

/**
 * Every HTML spelling of `secret`: for each escaper above, with non-ASCII characters literal, as
 * decimal (&#233;) and as hex (&#xe9;) references; and every character as a decimal or a hex
 * reference (e-mail obfuscators). Hex digits and the "x" are written in lowercase; the scan
 * reads them without case. May hold duplicates and non-ASCII text.
 */
export function listHtmlEscapes(secret: string): string[] {
  let decimal = "";
  let hex = "";
  for (let i = 0; i < secret.length; i++) {
    const point = secret.codePointAt(i)!;
    if (point > 0xffff) i++;
    decimal += ASCII_DECIMAL[point] ?? `&#${point};`;
    hex += ASCII_HEX[point] ?? `&#x${point.toString(16)};`;
  }
  const results = [decimal, hex];
  if (!HTML_SPECIAL.test(secret)) {
    results.push(secret);
    return results;
  }
  const hasNonAscii = /[^\x00-\x7f]/.test(secret);
  for (const escaper of HTML_ESCAPERS) {
    results.push(escapeHtml(secret, escaper, "literal"));
    if (hasNonAscii) {
      results.push(escapeHtml(secret, escaper, "decimal"), escapeHtml(secret, escaper, "hex"));
    }
  }
  return results;
}

function escapeHtml(secret: string, escaper: HtmlEscaper, nonAscii: "literal" | "decimal" | "hex"): string {
  let text = "";
  for (const char of secret) {
    if (char === "&") text += "&amp;";
    else if (char === "<") text += "&lt;";
    else if (char === ">") text += "&gt;";
    else if (char === '"') text += escaper.quote ?? char;
    else if (char === "'") text += escaper.apostrophe ?? char;
    else if (char === "+") text += escaper.plus ?? char;
    else if (char.charCodeAt(0) < 0x80 || nonAscii === "literal") text += char;
    else if (nonAscii === "decimal") text += `&#${char.codePointAt(0)};`;
    else text += `&#x${char.codePointAt(0)!.toString(16)};`;
  }
  return text;
}
