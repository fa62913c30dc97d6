// Spellings split across response headers. Redacting each header alone lets an origin that
// echoes a credential in two pieces (two allowed headers, or x-request-id sent twice, as a
// buggy or hostile origin may) hand both halves to the caller; here the headers are read
// together, as a client joining them would.
import type { SpellingAutomaton } from "./spelling-automaton.ts";

// How a client joins header values: RFC 9110 5.3 joins repeated fields with ", "; a log or a
// raw dump concatenates them, with or without line breaks (which the scan skips, so "\r\n"
// reads as "").
const SEPARATORS: readonly Buffer[] = [Buffer.alloc(0), Buffer.from(", ", "latin1")];

/**
 * The most pairs one reading reads for one separator. Pairs grow with the square of the headers,
 * and an origin may send thousands of short allowed values ("link: s" again and again), each the
 * beginning of a spelling: past this bound every header is redacted whole instead of read in
 * pairs (safe, and bounded). The proxy keeps at most 32 values (upstream/response-headers.ts),
 * 32 × 31 pairs, under it.
 */
export const MAX_PAIR_READS = 1_024;

/**
 * Indexes of the `values` that hold a piece of a spelling which begins in one header and ends
 * in another: in the values joined in their order (any number of pieces, a header wholly inside
 * a spelling included), and for any two headers in either order (Node groups repeated headers
 * by name, so two pieces that were adjacent on the wire may not be adjacent here). A spelling
 * wholly inside one header is left to that header's own redaction.
 */
export function findHeadersSplittingASpelling(
  automaton: SpellingAutomaton,
  values: readonly string[],
): Set<number> {
  const split = new Set<number>();
  if (values.length < 2) return split;
  for (const reading of listReadings(values)) {
    for (const separator of SEPARATORS) {
      markSplitInJoin(automaton, reading, separator, split);
      markSplitInPairs(automaton, reading, separator, split);
    }
  }
  return split;
}

/**
 * The values as bytes: as latin1 (the bytes on the wire, as Node decodes header values) and,
 * when a value is not ASCII, as UTF-8 (a client that decoded them so).
 */
function listReadings(values: readonly string[]): Buffer[][] {
  const readings: Buffer[][] = [];
  if (values.every((value) => /^[\x00-\xff]*$/.test(value))) {
    readings.push(values.map((value) => Buffer.from(value, "latin1")));
  }
  if (values.some((value) => /[^\x00-\x7f]/.test(value))) {
    readings.push(values.map((value) => Buffer.from(value, "utf8")));
  }
  return readings;
}

function markSplitInJoin(
  automaton: SpellingAutomaton,
  reading: readonly Buffer[],
  separator: Buffer,
  split: Set<number>,
): void {
  const starts: number[] = [];
  const pieces: Buffer[] = [];
  let length = 0;
  for (const [i, bytes] of reading.entries()) {
    if (i > 0) {
      pieces.push(separator);
      length += separator.length;
    }
    starts.push(length);
    pieces.push(bytes);
    length += bytes.length;
  }
  const runs = automaton.findCoveredRuns(Buffer.concat(pieces, length));
  for (let r = 0; r < runs.length; r += 2) {
    const start = runs[r]!;
    const end = runs[r + 1]!;
    const touched: number[] = [];
    let isInsideOneHeader = false;
    for (const [i, bytes] of reading.entries()) {
      const from = starts[i]!;
      const to = from + bytes.length;
      if (start < to && end > from) touched.push(i);
      if (start >= from && end <= to) isInsideOneHeader = true;
    }
    if (!isInsideOneHeader) for (const i of touched) split.add(i);
  }
}

/**
 * For each header that ends with the beginning of a spelling (followed by `separator`), reads
 * every other header after it and marks both when a spelling runs across the boundary. Rare:
 * most headers end outside any spelling, and then no pair starting with them is read. More pairs
 * than MAX_PAIR_READS mark every header.
 */
function markSplitInPairs(
  automaton: SpellingAutomaton,
  reading: readonly Buffer[],
  separator: Buffer,
  split: Set<number>,
): void {
  const heads: [number, Buffer, Buffer][] = [];
  for (const [i, first] of reading.entries()) {
    const head = Buffer.concat([first, separator]);
    if (automaton.isOpenAtEnd(head)) heads.push([i, first, head]);
  }
  if (heads.length * (reading.length - 1) > MAX_PAIR_READS) {
    for (let i = 0; i < reading.length; i++) split.add(i);
    return;
  }
  for (const [i, first, head] of heads) {
    for (const [j, second] of reading.entries()) {
      if (j === i) continue;
      const runs = automaton.findCoveredRuns(Buffer.concat([head, second]));
      for (let r = 0; r < runs.length; r += 2) {
        const start = runs[r]!;
        const end = runs[r + 1]!;
        // Across the boundary: it holds bytes of `second` and begins before them.
        if (start < head.length && end > head.length) {
          split.add(j);
          if (start < first.length) split.add(i);
        }
      }
    }
  }
}
