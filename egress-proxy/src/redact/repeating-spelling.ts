// The match of a spelling whose anchor (its first bytes) occurs again inside it, such as a value
// of one punctuation character repeated 32 KiB times: Knuth-Morris-Pratt from where its anchor
// was found, so that the scan stays linear in the body however the spelling repeats, and the
// spelling costs one failure table (4 bytes a byte) instead of a trie node per byte.
//
// spelling-automaton.ts finds the anchor; a matcher then reads on from there and tracks every
// alignment of the spelling at once, until no partial match of at least an anchor's length is
// left (any later match begins with an anchor the automaton finds again) or the body ends. It
// never reads a body byte twice: an anchor found inside bytes it already read is skipped.

/** What the scan reads for each byte (spelling-automaton.ts READ_AS), and its SKIP. */
export interface ReadTable {
  readAs: Int16Array;
  skip: number;
}

/**
 * The KMP failure table of `spelling` (as the scan reads it): entry i is the length of the
 * longest proper prefix of spelling[0..i] that is also its suffix.
 */
export function buildFailureTable(spelling: string): Int32Array {
  const failure = new Int32Array(spelling.length);
  let border = 0;
  for (let i = 1; i < spelling.length; i++) {
    const byte = spelling.charCodeAt(i);
    while (border > 0 && spelling.charCodeAt(border) !== byte) border = failure[border - 1]!;
    if (spelling.charCodeAt(border) === byte) border++;
    failure[i] = border;
  }
  return failure;
}

export interface MatcherRun {
  /** The index of the first body byte the matcher has not read (it read everything before). */
  reach: number;
  /** Whether the body ended inside a partial match (text that follows could complete it). */
  isOpen: boolean;
}

/**
 * Reads `bytes` from `from` on, in the state where the spelling's first `anchorLength` bytes (as
 * read) just matched, beginning at `start`; calls `onMatch(start, end)` for each full match (end
 * exclusive), in order. Stops once fewer than `anchorLength` bytes of a partial match are left,
 * or at the end of `bytes`.
 */
export function runRepeatingMatcher(
  bytes: Uint8Array,
  from: number,
  start: number,
  spelling: string,
  failure: Int32Array,
  anchorLength: number,
  read: ReadTable,
  onMatch: ((start: number, end: number) => void) | undefined,
): MatcherRun {
  const { readAs, skip } = read;
  const length = spelling.length;
  let matched = anchorLength;
  let position = from;
  // The first body byte (as read) of the partial match.
  let tail = start;
  // Moves `tail` on by `count` bytes as read (CR and LF between them do not count).
  const advanceTail = (count: number): void => {
    for (let left = count; left > 0; tail++) if (readAs[bytes[tail]!] !== skip) left--;
    while (tail < position && readAs[bytes[tail]!] === skip) tail++;
  };
  while (position < bytes.length) {
    const byte = readAs[bytes[position]!]!;
    if (byte === skip) {
      position++;
      continue;
    }
    while (spelling.charCodeAt(matched) !== byte) {
      const border = failure[matched - 1]!;
      advanceTail(matched - border);
      matched = border;
      if (matched < anchorLength) return { reach: position, isOpen: false };
    }
    matched++;
    position++;
    if (matched === length) {
      onMatch?.(tail, position);
      const border = failure[length - 1]!;
      advanceTail(length - border);
      matched = border;
      if (matched < anchorLength) return { reach: position, isOpen: false };
    }
  }
  return { reach: position, isOpen: true };
}
