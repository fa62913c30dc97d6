// The match of a spelling whose anchor (its first bytes) occurs again inside it, such as a value
// of one punctuation character repeated 32 KiB times: Knuth-Morris-Pratt from where its anchor
// was found, so that the scan stays linear in the body however the spelling repeats, and the
// spelling costs one failure table (4 bytes a byte) instead of a trie node per byte.
//
// spelling-automaton.ts finds the anchor and calls matchRepeating; a matcher then reads on from there and tracks every
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
function buildFailureTable(spelling: string): Int32Array {
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

/** One scan's progress on an automaton's repeating spellings, and the runs their matches cover. */
export interface RepeatingScan {
  /** Each spelling as the scan reads it (an automaton's whole list; only the repeating ones run). */
  spellings: readonly string[];
  /** Each repeating spelling's failure table, built the first time its anchor matches (kept by the automaton). */
  failures: (Int32Array | undefined)[];
  anchorLength: number;
  read: ReadTable;
  /**
   * For each spelling, the first body byte its matcher has not read (0 before it runs); made
   * when a repeating spelling's anchor is first found (most scans find none).
   */
  reach: Int32Array | undefined;
  /**
   * Runs of the matches, flat [start, end, ...]: a matcher reads ahead of the scan, so they are
   * merged with the automaton's own runs once the scan is done (mergeRepeatingRuns).
   */
  runs: number[];
}

export function startRepeatingScan(
  spellings: readonly string[],
  failures: (Int32Array | undefined)[],
  anchorLength: number,
  read: ReadTable,
): RepeatingScan {
  return { spellings, failures, anchorLength, read, reach: undefined, runs: [] };
}

/**
 * Runs the matcher of repeating spelling `index` from its anchor ending at `last`, unless it
 * already read that byte (it tracks every alignment, this one included). Keeps its matches
 * when `isCollecting`; answers whether it ran off the end of `bytes`.
 */
export function matchRepeating(
  scan: RepeatingScan,
  bytes: Uint8Array,
  last: number,
  index: number,
  isCollecting: boolean,
): boolean {
  scan.reach ??= new Int32Array(scan.spellings.length);
  if (last < scan.reach[index]!) return false;
  const spelling = scan.spellings[index]!;
  let failure = scan.failures[index];
  if (failure === undefined) {
    failure = buildFailureTable(spelling);
    scan.failures[index] = failure;
  }
  const found = scan.runs;
  const onMatch = isCollecting
    ? (start: number, end: number) => {
        // One matcher's matches come in order: each is merged with the run before when it
        // starts inside it (mergeRepeatingRuns sorts the runs of several matchers).
        const previous = found.length - 1;
        if (previous > 0 && found[previous - 1]! <= start && start <= found[previous]!) {
          found[previous] = Math.max(found[previous]!, end);
        } else found.push(start, end);
      }
    : undefined;
  const anchorStart = findAnchorStart(bytes, last, scan.anchorLength, scan.read);
  const run = runRepeatingMatcher(
    bytes,
    last + 1,
    anchorStart,
    spelling,
    failure,
    scan.anchorLength,
    scan.read,
    onMatch,
  );
  scan.reach[index] = run.reach;
  return run.isOpen;
}

/** Merges the scan's runs (in any order) into the sorted, disjoint `runs`. */
export function mergeRepeatingRuns(scan: RepeatingScan, runs: number[]): void {
  if (scan.runs.length === 0) return;
  const pairs: [number, number][] = [];
  for (let i = 0; i < runs.length; i += 2) pairs.push([runs[i]!, runs[i + 1]!]);
  for (let i = 0; i < scan.runs.length; i += 2) pairs.push([scan.runs[i]!, scan.runs[i + 1]!]);
  pairs.sort((a, b) => a[0] - b[0]);
  runs.length = 0;
  for (const [start, end] of pairs) {
    if (runs.length > 0 && runs[runs.length - 1]! >= start) {
      runs[runs.length - 1] = Math.max(runs[runs.length - 1]!, end);
    } else runs.push(start, end);
  }
}

/** Where an anchor of `length` bytes (as read) that ends at `last` begins, behind any CR or LF. */
export function findAnchorStart(bytes: Uint8Array, last: number, length: number, read: ReadTable): number {
  let start = last;
  for (let counted = 1; counted < length; ) if (read.readAs[bytes[--start]!] !== read.skip) counted++;
  return start;
}

interface MatcherRun {
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
function runRepeatingMatcher(
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
