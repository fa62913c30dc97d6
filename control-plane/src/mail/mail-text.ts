// Text that goes into a mail from elsewhere (an agent's words, an organisation's name): kept to one
// line, so it cannot pose as lines of our own or reach a header as a second one.

/**
 * Invisible characters that change how the text around them reads: format characters (the
 * direction overrides, embeddings, isolates and marks of "Trojan Source", zero-width spaces and
 * joiners, the byte order mark, tag characters) and the variation selectors that can carry data
 * unseen (U+FE0E and U+FE0F only choose text or emoji presentation). The same list as the
 * request body's (grants/request-body.ts).
 */
const INVISIBLE = /\p{Cf}|[\u{fe00}-\u{fe0d}]|[\u{e0100}-\u{e01ef}]/gu;

/**
 * Text on one line: control characters and line or paragraph separators become one space, and
 * each invisible character U+FFFD, so a name cannot reverse a subject line around it.
 * @example oneLine("Acme\u202Eevil\nco") // "Acme\uFFFDevil co"
 */
export function oneLine(text: string): string {
  return text
    .replace(/[\p{Cc}\p{Zl}\p{Zp}]+/gu, " ")
    .replace(INVISIBLE, "\uFFFD")
    .trim();
}
