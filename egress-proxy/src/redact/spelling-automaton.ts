// One Aho-Corasick automaton over every spelling of every secret of a call: a single pass over a
// body finds every occurrence of any spelling, overlapping ones included, in time linear in the
// body whatever the number of spellings (no indexOf per spelling).
//
// The scan reads bytes the way encoders vary them: the hex letters a-f and the "x" of "&#x" are
// read without case (so %2f, %2F, \u00E9 and &#X41; match the one spelling listed), and CR and LF
// are not read at all, so a spelling still matches when an encoder wrapped its lines (MIME base64
// at 64 or 76 columns, CRLF or LF, wherever the wrapped text starts) or a line break was put inside
// it. JSON's escaped line breaks ("\n", "\r", "\u000a", "\u000d") are read as line breaks too, in
// a body and in a spelling alike (json-line-breaks.ts), so base64 wrapped inside a JSON string
// matches as well. A match covers the original bytes from its first to its last byte read, the
// breaks between included (a break at either end of a spelling stays; it tells nothing).
//
// The automaton holds each spelling's first ANCHOR_BYTES only (the encoded spellings are long:
// six bytes per character for \uXXXX), so its tables grow with the number of spellings, never
// with their length. Where an anchor matches, the rest of its spelling is compared byte by byte
// when the anchor occurs nowhere else in it: then two comparisons of one spelling never read the
// same body bytes twice (beyond an anchor's length), so an origin cannot make the scan quadratic
// with a body of near-misses. A spelling whose anchor repeats inside it (a stored value of one
// character repeated, echoed amid long runs of it) is matched from its anchor on by KMP instead
// (repeating-spelling.ts), which reads each body byte once per spelling: the whole spelling in
// the trie cost 32 bytes of table a byte of it, and a 32 KiB value's spellings a gigabyte.

import { readJsonLineBreaks, readJsonLineBreaksInSpelling } from "./json-line-breaks.ts";
import {
  findAnchorStart,
  matchRepeating,
  mergeRepeatingRuns,
  type ReadTable,
  type RepeatingScan,
  startRepeatingScan,
} from "./repeating-spelling.ts";

const ANCHOR_BYTES = 16;

/** What the scan reads for each byte: its case-folded value, or SKIP for CR and LF. */
const SKIP = -1;
const READ_AS: Int16Array = buildReadTable();

function buildReadTable(): Int16Array {
  const table = new Int16Array(256);
  for (let byte = 0; byte < 256; byte++) table[byte] = byte;
  for (const upper of "ABCDEFX") table[upper.charCodeAt(0)] = upper.toLowerCase().charCodeAt(0);
  table[0x0d] = SKIP;
  table[0x0a] = SKIP;
  return table;
}

const READ: ReadTable = { readAs: READ_AS, skip: SKIP };

// What comparing the rest of a spelling found.
const MISMATCH = -1;
const RAN_OFF_THE_END = -2;

export interface SpellingAutomaton {
  /**
   * The byte ranges of `bytes` covered by one or more spellings, as a flat list
   * [start0, end0, start1, end1, ...] (end exclusive), in order; overlapping and touching
   * matches are merged into one range. Empty when nothing matched.
   */
  findCoveredRuns(bytes: Uint8Array): number[];
  /** Whether `bytes` ends with the beginning of a spelling (that text following it could complete). */
  isOpenAtEnd(bytes: Uint8Array): boolean;
  /**
   * Zeroes the tables (they are made of the secrets' spellings) and gives their memory back for
   * the next call's automaton; the automaton must not be used after. Optional: an automaton never
   * released is simply collected, and the next one gets memory of its own.
   */
  release(): void;
  /**
   * Bytes of table the automaton holds (the trie, and the failure table of each repeating
   * spelling built so far): bounded by the number of spellings and their total length, whatever
   * they repeat (for tests and measurements).
   */
  tableBytes(): number;
}

/**
 * The tables' memory, reused from one call's automaton to the next (zeroed in between): a fresh
 * ArrayBuffer per call, allocated, zeroed and tracked outside the JavaScript heap, cost more than
 * building the tables in it. At most one automaton holds it at a time.
 */
let scratch: ArrayBuffer | undefined = new ArrayBuffer(64 * 1024);

function tableMemory(bytes: number): { buffer: ArrayBuffer; isScratch: boolean } {
  const free = scratch;
  if (free !== undefined && free.byteLength >= bytes) {
    scratch = undefined;
    return { buffer: free, isScratch: true };
  }
  return { buffer: new ArrayBuffer(bytes), isScratch: false };
}

/**
 * Builds the automaton over `spellings`, each a byte string (one character per byte, as
 * Buffer's latin1); duplicates are allowed. Spellings that differ only in hex case or line
 * breaks (raw or JSON-escaped) read alike; a spelling of nothing but line breaks is dropped.
 * Returns undefined when no spelling is left.
 *
 * @example buildSpellingAutomaton(["s3cr%2Fet"])?.findCoveredRuns(Buffer.from("a=s3cr%2fet")) // [2, 11]
 */
export function buildSpellingAutomaton(listed: readonly string[]): SpellingAutomaton | undefined {
  // Each spelling as the scan reads it (json-line-breaks.ts, READ_AS), once; nothing but line
  // breaks: nothing to find.
  const spellings = [...new Set(listed.map(readSpelling))].filter((spelling) => spelling.length > 0);
  // Which spellings repeat their anchor (matched by KMP from it, repeating-spelling.ts).
  const isRepeating = spellings.map(isAnchorRepeated);
  let capacity = 1;
  for (const spelling of spellings) capacity += Math.min(spelling.length, ANCHOR_BYTES);

  // The trie of anchors: node 0 is the root; every other node is reached by one byte (`label`)
  // from its parent. The root's children are a table; other nodes keep a list (most have one).
  // One allocation for every table: a typed array each would cost more than filling them.
  const byteLength = 4 * (256 + 8 * capacity + spellings.length + 1);
  const { buffer, isScratch } = tableMemory(byteLength);
  let offset = 0;
  let isReleased = false;
  const release = (): void => {
    if (isReleased) return;
    isReleased = true;
    // Every byte the tables used, the queue (the last one) included.
    new Uint8Array(buffer, 0, offset).fill(0);
    for (const failure of trie.failures) failure?.fill(0);
    trie.failures.length = 0;
    if (isScratch) scratch = buffer;
  };
  const table = (length: number): Int32Array => {
    const view = new Int32Array(buffer, offset, length);
    offset += 4 * length;
    return view;
  };
  const trie: Trie = {
    rootNext: table(256),
    firstChild: table(capacity),
    nextSibling: table(capacity),
    label: table(capacity),
    depth: table(capacity),
    fail: table(capacity),
    firstEntry: table(capacity),
    nextEntry: table(spellings.length + 1),
    output: table(capacity),
    spellings,
    isRepeating,
    failures: [],
  };
  const { rootNext, firstChild, nextSibling, label, depth, fail, firstEntry, nextEntry, output } = trie;
  let count = 1;

  for (let index = 0; index < spellings.length; index++) {
    const spelling = spellings[index]!;
    const anchorLength = Math.min(spelling.length, ANCHOR_BYTES);
    let node = 0;
    for (let i = 0; i < anchorLength; i++) {
      const byte = spelling.charCodeAt(i);
      let child = childOf(trie, node, byte);
      if (child === 0) {
        child = count++;
        label[child] = byte;
        depth[child] = depth[node]! + 1;
        if (node === 0) rootNext[byte] = child;
        else {
          nextSibling[child] = firstChild[node]!;
          firstChild[node] = child;
        }
      }
      node = child;
    }
    nextEntry[index + 1] = firstEntry[node]!;
    firstEntry[node] = index + 1;
    output[node] = node;
  }

  if (count === 1) {
    if (isScratch) release();
    return undefined;
  }

  // Failure links in breadth-first order, so that every shallower node is done first.
  const queue = table(count);
  let tail = 0;
  for (let byte = 0; byte < 256; byte++) if (rootNext[byte] !== 0) queue[tail++] = rootNext[byte]!;
  for (let head = 0; head < tail; head++) {
    const node = queue[head]!;
    for (let child = firstChild[node]!; child !== 0; child = nextSibling[child]!) {
      const target = follow(trie, fail[node]!, label[child]!);
      fail[child] = target;
      if (output[child] === 0) output[child] = output[target]!;
      queue[tail++] = child;
    }
  }

  return {
    // The runs found in the read copy are those of `bytes`: reading an escape keeps its length.
    findCoveredRuns: (bytes) => {
      const runs: number[] = [];
      scan(trie, readJsonLineBreaks(bytes), runs);
      return runs;
    },
    isOpenAtEnd: (bytes) => scan(trie, readJsonLineBreaks(bytes), undefined),
    release,
    tableBytes: () => {
      let bytes = byteLength;
      for (const failure of trie.failures) bytes += failure?.byteLength ?? 0;
      return bytes;
    },
  };
}

/** The automaton's tables (see buildSpellingAutomaton). */
interface Trie {
  rootNext: Int32Array;
  firstChild: Int32Array;
  nextSibling: Int32Array;
  /** The byte (as read) on the edge into a node. */
  label: Int32Array;
  /** Bytes (as read) from the root to a node. */
  depth: Int32Array;
  /** The node for the longest proper suffix of a node's text that is in the trie. */
  fail: Int32Array;
  /** The spellings whose anchor ends at a node, as a list (0 ends it): entry e is spelling e - 1. */
  firstEntry: Int32Array;
  nextEntry: Int32Array;
  /** The deepest node on the failure chain (the node itself included) where an anchor ends. */
  output: Int32Array;
  /** Each spelling as the scan reads it (readSpelling), each once. */
  spellings: readonly string[];
  /** Whether a spelling's anchor occurs again inside it: matched by KMP, not compared. */
  isRepeating: readonly boolean[];
  /** The KMP failure table of each repeating spelling, built the first time its anchor matches. */
  failures: (Int32Array | undefined)[];
}

function childOf(trie: Trie, node: number, byte: number): number {
  if (node === 0) return trie.rootNext[byte]!;
  const { firstChild, nextSibling, label } = trie;
  for (let child = firstChild[node]!; child !== 0; child = nextSibling[child]!) {
    if (label[child] === byte) return child;
  }
  return 0;
}

/** The state after reading `byte` in `state`: its child, else its failure chain's. */
function follow(trie: Trie, state: number, byte: number): number {
  let current = state;
  for (;;) {
    const next = childOf(trie, current, byte);
    if (next !== 0 || current === 0) return next;
    current = trie.fail[current]!;
  }
}

/** Scans `bytes`; adds covered runs to `runs` when given; answers whether the end is open. */
function scan(trie: Trie, bytes: Uint8Array, runs: number[] | undefined): boolean {
  // This loop runs once per byte of every body: the usual byte, outside any anchor, costs two
  // table lookups; anchors found are handled out of line.
  const readAs = READ_AS;
  const { rootNext, output } = trie;
  const length = bytes.length;
  const repeating = startRepeatingScan(trie.spellings, trie.failures, ANCHOR_BYTES, READ);
  let isOpen = false;
  let state = 0;
  for (let i = 0; i < length; i++) {
    const byte = readAs[bytes[i]!]!;
    if (byte === SKIP) continue;
    state = state === 0 ? rootNext[byte]! : follow(trie, state, byte);
    if (state !== 0 && output[state] !== 0 && checkAnchorsAt(trie, bytes, i, state, runs, repeating)) {
      isOpen = true;
    }
  }
  if (runs !== undefined) mergeRepeatingRuns(repeating, runs);
  return isOpen || trie.depth[state]! > 0;
}

/**
 * Compares the spellings of every anchor that ends at byte `last` in `state` with the bytes
 * after it; adds each full match to `runs`. Answers whether a spelling ran off the end of `bytes`.
 */
function checkAnchorsAt(
  trie: Trie,
  bytes: Uint8Array,
  last: number,
  state: number,
  runs: number[] | undefined,
  repeating: RepeatingScan,
): boolean {
  const { output, fail, firstEntry, nextEntry, spellings, isRepeating, depth } = trie;
  let isOpen = false;
  for (let node = output[state]!; node !== 0; node = output[fail[node]!]!) {
    let start = -1;
    for (let entry = firstEntry[node]!; entry !== 0; entry = nextEntry[entry]!) {
      const index = entry - 1;
      if (isRepeating[index]) {
        if (matchRepeating(repeating, bytes, last, index, runs !== undefined)) isOpen = true;
        continue;
      }
      const end = compareRest(bytes, last + 1, spellings[index]!, depth[node]!);
      if (end === RAN_OFF_THE_END) isOpen = true;
      else if (end !== MISMATCH && runs !== undefined) {
        if (start === -1) start = findAnchorStart(bytes, last, depth[node]!, READ);
        addRun(runs, start, end);
      }
    }
  }
  return isOpen;
}

/**
 * Compares `spelling` (as the scan reads it) from its character `from` on with `bytes` from `at`
 * on, as the scan reads them. Answers the end (exclusive) of the match in `bytes`, MISMATCH, or
 * RAN_OFF_THE_END.
 */
function compareRest(bytes: Uint8Array, at: number, spelling: string, from: number): number {
  let position = at;
  for (let i = from; i < spelling.length; i++) {
    let byte: number;
    do {
      if (position >= bytes.length) return RAN_OFF_THE_END;
      byte = READ_AS[bytes[position++]!]!;
    } while (byte === SKIP);
    if (byte !== spelling.charCodeAt(i)) return MISMATCH;
  }
  return position;
}

/**
 * Whether the first ANCHOR_BYTES of `spelling` (as the scan reads it) occur again inside it: then
 * two comparisons from two anchors could read the same bytes, and the spelling is matched by KMP.
 */
function isAnchorRepeated(spelling: string): boolean {
  return spelling.length > ANCHOR_BYTES && spelling.indexOf(spelling.slice(0, ANCHOR_BYTES), 1) !== -1;
}

/**
 * A listed spelling as the scan reads it: JSON's escaped line breaks read as raw ones, then no CR
 * or LF, and the hex letters and "x" in lowercase (READ_AS).
 */
function readSpelling(listed: string): string {
  let spelling = readJsonLineBreaksInSpelling(listed);
  if (LINE_BREAK.test(spelling)) spelling = spelling.replace(LINE_BREAKS, "");
  // Most long spellings (escapes, hex) hold no letter the scan folds: no copy needed for them.
  if (FOLDED.test(spelling)) spelling = spelling.replace(FOLDED_LETTERS, (letter) => letter.toLowerCase());
  return spelling;
}

const LINE_BREAK = /[\r\n]/;
const LINE_BREAKS = /[\r\n]/g;
const FOLDED = /[A-FX]/;
const FOLDED_LETTERS = /[A-FX]/g;

/** Appends [start, end) to sorted, disjoint `runs`, merging it with every run it touches. */
function addRun(runs: number[], start: number, end: number): void {
  let from = start;
  let to = end;
  // A later match ends at or after the start of every earlier run, but may start before
  // several of them.
  while (runs.length > 0 && runs[runs.length - 1]! >= from) {
    to = Math.max(to, runs.pop()!);
    from = Math.min(from, runs.pop()!);
  }
  runs.push(from, to);
}

/**
 * A spelling as the scan reads it: hex letters and "x" in lowercase, no CR or LF, raw or
 * JSON-escaped (for tests, and for the length of the shortest match).
 */
export function normalizeSpelling(spelling: string): string {
  const read = readJsonLineBreaksInSpelling(spelling);
  let text = "";
  for (let i = 0; i < read.length; i++) {
    const byte = READ_AS[read.charCodeAt(i) & 0xff]!;
    if (byte !== SKIP) text += String.fromCharCode(byte);
  }
  return text;
}
