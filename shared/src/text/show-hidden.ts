// Text someone else wrote (an agent's task or name, a browser's user agent) as an operator reads
// it: what they could not see is shown as U+FFFD.

// What an operator cannot see but the origin reads: C0 and C1 controls but tab and line feed (a
// carriage return too: on its own it rewrites the line it is in, and in the mail it would end a
// line early); every format character (the bidirectional embeddings, overrides, isolates and marks
// of "Trojan Source", zero-width spaces and joiners, the word joiner, the byte order mark, the soft
// hyphen, and the tag characters that spell any ASCII text invisibly); the line and paragraph
// separators (a mail client may break a line there, and a body line could pose as one of ours);
// and the variation selectors that can carry data unseen (not U+FE0E and U+FE0F, which only choose
// text or emoji presentation and follow every other emoji).
const HIDDEN =
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}]|[\u{fe00}-\u{fe0d}]|[\u{e0100}-\u{e01ef}]/gu;

export function showHidden(text: string): { text: string; isHidden: boolean } {
  const shown = text.replace(HIDDEN, "\uFFFD");
  return { text: shown, isHidden: shown !== text };
}
