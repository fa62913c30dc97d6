// JSON's escaped line breaks read as the line breaks they stand for. An origin that wraps base64
// or hex and puts it in a JSON string (GitHub's contents API: a file's base64 cut every 60
// characters, each break written "\n") spells a credential with two- or six-byte escapes between
// its pieces; the scan reads through raw CR and LF (spelling-automaton.ts), so each such escape is
// given to it as that many LF bytes, and the wrapped spelling matches as MIME-wrapped text does.

const BACKSLASH = 0x5c;
const LF = 0x0a;
const LOWER_N = 0x6e;
const LOWER_R = 0x72;
const LOWER_U = 0x75;
const ZERO = 0x30;

/**
 * `bytes` with every JSON escape of a line break ("\n", "\r", "\u000a", "\u000d", the hex
 * digits in any case) overwritten by LF bytes, one per byte of the escape, so that every offset
 * stays where it was and a match never ends inside an escape (all of its bytes are skipped alike).
 * Escapes are read from the start, pair by pair, as a JSON parser reads them: in "\\n" the
 * backslash is escaped and the "n" is a letter, not a break. Returns `bytes` itself, uncopied,
 * when it holds no such escape (one native search when it holds no backslash at all).
 *
 * @example readJsonLineBreaks(Buffer.from('"ab\\ncd"')) // the bytes of '"ab\n\ncd"'
 */
export function readJsonLineBreaks(bytes: Uint8Array): Uint8Array {
  let at = bytes.indexOf(BACKSLASH);
  if (at === -1) return bytes;
  let read: Uint8Array | undefined;
  while (at !== -1 && at + 1 < bytes.length) {
    const length = lineBreakEscapeLength(bytes, at);
    if (length > 0) {
      // A copy: the caller's bytes are what it sends on, escapes and all.
      read ??= Buffer.from(bytes);
      read.fill(LF, at, at + length);
    }
    // Whatever follows the backslash belongs to its escape (a second backslash included).
    at = bytes.indexOf(BACKSLASH, at + Math.max(length, 2));
  }
  return read ?? bytes;
}

/** A spelling (a byte string, one character per byte) read as readJsonLineBreaks reads a body. */
export function readJsonLineBreaksInSpelling(spelling: string): string {
  if (!spelling.includes("\\")) return spelling;
  const bytes = Buffer.from(spelling, "latin1");
  const read = readJsonLineBreaks(bytes);
  return read === bytes ? spelling : Buffer.from(read).toString("latin1");
}

/** The length of the line-break escape whose backslash is at `at` (2 or 6), or 0 for any other. */
function lineBreakEscapeLength(bytes: Uint8Array, at: number): number {
  const next = bytes[at + 1];
  if (next === LOWER_N || next === LOWER_R) return 2;
  if (
    next === LOWER_U &&
    bytes[at + 2] === ZERO &&
    bytes[at + 3] === ZERO &&
    bytes[at + 4] === ZERO &&
    isAOrD(bytes[at + 5])
  ) {
    return 6;
  }
  return 0;
}

/** "a", "d", "A" or "D": the last hex digit of U+000A and U+000D. */
function isAOrD(byte: number | undefined): boolean {
  return byte === 0x61 || byte === 0x64 || byte === 0x41 || byte === 0x44;
}
