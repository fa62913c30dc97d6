// Quoting untrusted request text (a host, a path segment) for an error message, safely and briefly.

/**
 * Wraps `text` in double quotes for a one-line message: cut to `max` characters, and every character
 * outside printable ASCII (controls, CR/LF, bidi overrides, non-ASCII) shown as \uXXXX so that a
 * hostile value can neither forge log lines nor reorder what an operator reads.
 *
 * @example quoteUntrusted("a\nb") // "\"a\\u000ab\""
 */
export function quoteUntrusted(text: string, max = 80): string {
  // Slice first so a megabyte of hostile input costs nothing to quote.
  const head = text.slice(0, max * 2);
  const chars = Array.from(head);
  const isCut = chars.length > max || head.length < text.length;
  const cut = isCut ? `${chars.slice(0, max).join("")}...` : head;
  const escaped = cut.replace(/[^\x20-\x7e]|["\\]/gu, (c) =>
    c === '"' || c === "\\" ? `\\${c}` : toEscape(c),
  );
  return `"${escaped}"`;
}

function toEscape(char: string): string {
  const code = char.codePointAt(0) ?? 0;
  if (code <= 0xffff) return `\\u${code.toString(16).padStart(4, "0")}`;
  return `\\u{${code.toString(16)}}`;
}
