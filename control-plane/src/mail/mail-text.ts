// Text that goes into a mail from elsewhere (an agent's words, an organisation's name): kept to one
// line, so it cannot pose as lines of our own or reach a header as a second one.

/** Text on one line: control characters and line or paragraph separators become one space. */
export function oneLine(text: string): string {
  return text.replace(/[\p{Cc}\p{Zl}\p{Zp}]+/gu, " ").trim();
}
