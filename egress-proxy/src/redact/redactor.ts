// Redaction of an origin's answer: every byte that spells a credential (in any encoding that
// secret-encodings.ts lists) becomes "[redacted]" before the answer leaves the proxy, in the body
// and in the allowed response headers.
import { BASE64_ESCAPE_FAMILIES } from "./base64-escapes.ts";
import { findHeadersSplittingASpelling } from "./header-block.ts";
import { readJsonLineBreaks, readJsonLineBreaksInSpelling } from "./json-line-breaks.ts";
import {
  type AnswerShape,
  addSecretEncodings,
  BACKSLASH,
  FAMILY_MARKERS,
  NUL,
  type RedactionValue,
} from "./secret-encodings.ts";
import { buildSpellingAutomaton } from "./spelling-automaton.ts";

export type { RedactionValue } from "./secret-encodings.ts";

export const REDACTED = "[redacted]";

export interface Redactor {
  /**
   * Redacts a whole body. Works on bytes, so a body that is not UTF-8 is safe; returns `body`
   * itself when nothing matched. A secret split across chunks of the origin's stream is found
   * because the proxy buffers the body (at most 1 MiB) before calling this.
   */
  redactBytes(body: Buffer): Buffer;
  /** Redacts one header value (or any text), whether it was decoded as UTF-8 or as latin1. */
  redactText(text: string): string;
  /**
   * Redacts a response's headers, in order: each value as `redactText` does, and every header
   * that holds a piece of a spelling split across headers (two allowed headers, or a duplicate
   * x-request-id, each carrying half) becomes "[redacted]" whole.
   */
  redactHeaders<T extends { value: string }>(headers: readonly T[]): T[];
  /** Zeroes the compiled spellings and gives their memory back; the redactor is unusable after. */
  dispose(): void;
}

const REDACTED_BYTES = Buffer.from(REDACTED, "latin1");

/**
 * Each byte's classes: BASE64 when base64 or base64url writes it, HEX for hex digits and
 * separators, ESCAPED_BASE64 for those of base64 and the bytes its JSON, URL and HTML escapes add.
 */
const BASE64 = 1;
const HEX = 2;
const ESCAPED_BASE64 = 4;
const BASE64_CHARACTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=";

function buildCharacterClasses(isNulRead: boolean): Uint8Array {
  const table = new Uint8Array(256);
  const add = (characters: string, bit: number) => {
    for (const character of characters) table[character.charCodeAt(0)]! |= bit;
  };
  add(BASE64_CHARACTERS, BASE64 | ESCAPED_BASE64);
  add("\\%&#;", ESCAPED_BASE64);
  add("0123456789abcdefABCDEF:- ", HEX);
  // The scan reads through line breaks (JSON's escaped ones are given to it as raw ones): they
  // continue a run of any class.
  add("\r\n", BASE64 | HEX | ESCAPED_BASE64);
  // In an answer with a NUL, a run may be UTF-16 text: read through its NULs too.
  if (isNulRead) add("\x00", BASE64 | HEX | ESCAPED_BASE64);
  return table;
}

const CHARACTER_CLASSES = buildCharacterClasses(false);
const CHARACTER_CLASSES_THROUGH_NUL = buildCharacterClasses(true);

/** The longest runs of `body` in each class, in one pass. */
function longestRuns(body: Uint8Array, classesOf: Uint8Array): { base64: number; hex: number } {
  let base64 = 0;
  let hex = 0;
  let base64Run = 0;
  let hexRun = 0;
  for (let i = 0; i < body.length; i++) {
    const classes = classesOf[body[i]!]!;
    if (classes & BASE64) {
      if (++base64Run > base64) base64 = base64Run;
    } else base64Run = 0;
    if (classes & HEX) {
      if (++hexRun > hex) hex = hexRun;
    } else hexRun = 0;
  }
  return { base64, hex };
}

/**
 * longestRuns, and the longest run of ESCAPED_BASE64, in the same pass: for a body that holds an
 * escape's marker. Every byte of BASE64 is of ESCAPED_BASE64 too, so only a byte outside BASE64
 * can end an escaped run, and the run is measured from where it began, not counted byte by byte.
 */
function longestRunsWithEscapes(
  body: Uint8Array,
  classesOf: Uint8Array,
): { base64: number; hex: number; escaped: number } {
  let base64 = 0;
  let hex = 0;
  let escaped = 0;
  let base64Run = 0;
  let hexRun = 0;
  let escapedStart = 0;
  for (let i = 0; i < body.length; i++) {
    const classes = classesOf[body[i]!]!;
    if (classes & BASE64) {
      if (++base64Run > base64) base64 = base64Run;
    } else {
      base64Run = 0;
      if ((classes & ESCAPED_BASE64) === 0) {
        if (i - escapedStart > escaped) escaped = i - escapedStart;
        escapedStart = i + 1;
      }
    }
    if (classes & HEX) {
      if (++hexRun > hex) hex = hexRun;
    } else hexRun = 0;
  }
  if (body.length - escapedStart > escaped) escaped = body.length - escapedStart;
  return { base64, hex, escaped };
}

/** The markers of the escaped base64 spellings, as bytes and as a test of text. */
const ESCAPE_MARKERS: readonly number[] = [...new Set(BASE64_ESCAPE_FAMILIES.map((family) => family.marker))];
const ESCAPE_CHARACTERS = new RegExp(
  `[${ESCAPE_MARKERS.map((byte) => `\\x${byte.toString(16).padStart(2, "0")}`).join("")}]`,
);

/**
 * What an answer can hold, for a redactor built for it alone (secret-encodings.ts AnswerShape):
 * which of the bytes that mark a family of spellings (FAMILY_MARKERS: the backslash of JSON
 * escapes, the "&" of HTML references, the "%" and "+" of URL encodings, the separators of hex
 * dumps, the NUL of UTF-16 text) occur, found by the native byte search, a handful of passes that
 * stop at the first hit; and the longest runs of base64 characters, of hex ones, and of base64
 * ones and the bytes of their escapes (only where an escape's marker occurs), that a spelling
 * could lie in, read through line breaks, raw or JSON-escaped (the latter only looked for in a
 * body that holds a backslash), and through NULs when the answer holds one (UTF-16 text). A header
 * counts whole, and so do all of them joined with ", " (a spelling split across headers is found
 * in their join): their joined length bounds every run in them.
 */
export function answerShape(body: Buffer, headerValues: readonly string[]): AnswerShape {
  const markers = new Uint8Array(256);
  const isJoined = headerValues.length > 1;
  let isEscapeInBody = false;
  let isBackslashInBody = false;
  for (const byte of FAMILY_MARKERS) {
    const char = String.fromCharCode(byte);
    if (body.indexOf(byte) !== -1) {
      markers[byte] = 1;
      if (ESCAPE_MARKERS.includes(byte)) isEscapeInBody = true;
      if (byte === BACKSLASH) isBackslashInBody = true;
    } else if (
      (isJoined && (char === "," || char === " ")) ||
      headerValues.some((value) => value.includes(char))
    ) {
      markers[byte] = 1;
    }
  }
  let joined = 2 * Math.max(0, headerValues.length - 1);
  for (const value of headerValues) joined += Buffer.byteLength(value, "utf8");
  const classes = markers[NUL] === 1 ? CHARACTER_CLASSES_THROUGH_NUL : CHARACTER_CLASSES;
  // The body as the scan reads it: a body without a backslash has no escaped line break to read.
  const read = isBackslashInBody ? readJsonLineBreaks(body) : body;
  const runs = isEscapeInBody
    ? longestRunsWithEscapes(read, classes)
    : { ...longestRuns(read, classes), escaped: 0 };
  // Headers none of which holds an escape's marker hold no escaped spelling, not even one split
  // across them (its marker would be in one of them): their length does not count.
  const isEscapeInHeaders = headerValues.some((value) => ESCAPE_CHARACTERS.test(value));
  return {
    markers,
    longestBase64Run: Math.max(runs.base64, joined),
    longestHexRun: Math.max(runs.hex, joined),
    longestEscapedBase64Run: isEscapeInHeaders ? Math.max(runs.escaped, joined) : runs.escaped,
  };
}

/**
 * Builds a redactor for `values` (the injected credential, and any token minted on the way).
 * Every spelling of every value is listed and compiled into one automaton here, once per call.
 * Empty secrets are skipped. With `shape` (answerShape of the answer it will redact), a spelling
 * that cannot occur in that answer is left out: a family whose marker it lacks, a hex or base64
 * spelling longer than its longest run of those characters. Listing and compiling them was most
 * of the redactor's cost (an answer without "%", "\" or "&" needs no URL, JSON or HTML spelling,
 * a JSON answer of short fields no base64 of a 40-character key). A redactor so built is for
 * that answer alone.
 *
 * Every match is found, overlapping ones included; each run of bytes covered by one or more
 * matches becomes a single "[redacted]" (so adjacent or overlapping spellings hide together and
 * no piece of a longer spelling is left behind). Matching runs over the original bytes only, so
 * a replacement can never create a new match.
 *
 * @example createRedactor([{ secret: "sk_live_123" }]).redactText("key sk_live_123") // "key [redacted]"
 */
export function createRedactor(
  values: readonly RedactionValue[],
  options: { shape?: AnswerShape } = {},
): Redactor {
  const spellings: string[] = [];
  for (const value of values) addSecretEncodings(value, spellings, options.shape);
  const automaton = buildSpellingAutomaton(spellings);
  // No match is shorter than the shortest spelling as the scan reads it (line breaks, raw or
  // JSON-escaped, skipped): a text of fewer bytes needs no scan.
  let shortest = Number.POSITIVE_INFINITY;
  for (const listed of spellings) {
    const spelling = readJsonLineBreaksInSpelling(listed);
    const length = /[\r\n]/.test(spelling) ? spelling.replace(/[\r\n]/g, "").length : spelling.length;
    if (length < shortest) shortest = length;
  }

  function redactBytes(body: Buffer): Buffer {
    if (automaton === undefined || body.length === 0) return body;
    const runs = automaton.findCoveredRuns(body);
    return runs.length === 0 ? body : replaceRuns(body, runs);
  }

  function redactText(text: string): string {
    if (automaton === undefined || Buffer.byteLength(text, "utf8") < shortest) return text;
    // Header values reach us decoded as UTF-8 or as latin1 depending on the client; run the
    // UTF-8 pass, then a latin1 pass (the original wire bytes) when the text allows it, so a
    // non-ASCII secret is found under either decoding.
    const utf8 = Buffer.from(text, "utf8");
    const redacted = redactBytes(utf8);
    // ASCII text untouched by the first pass: its latin1 bytes are the bytes just read.
    if (redacted === utf8 && utf8.length === text.length) return text;
    const afterUtf8 = redacted.toString("utf8");
    if (!/^[\x00-\xff]*$/.test(afterUtf8)) return afterUtf8;
    return redactBytes(Buffer.from(afterUtf8, "latin1")).toString("latin1");
  }

  function redactHeaders<T extends { value: string }>(headers: readonly T[]): T[] {
    if (automaton === undefined) return [...headers];
    // Headers too short, even joined, to hold any spelling: nothing to read.
    let joined = 2 * Math.max(0, headers.length - 1);
    for (const header of headers) joined += Buffer.byteLength(header.value, "utf8");
    if (joined < shortest) return headers.map((header) => ({ ...header }));
    const split = findHeadersSplittingASpelling(
      automaton,
      headers.map((header) => header.value),
    );
    return headers.map((header, i) => ({
      ...header,
      value: split.has(i) ? REDACTED : redactText(header.value),
    }));
  }

  return { redactBytes, redactText, redactHeaders, dispose: () => automaton?.release() };
}

/** Copies `body` with each run [start, end) of `runs` replaced by one "[redacted]". */
function replaceRuns(body: Buffer, runs: readonly number[]): Buffer {
  const pieces: Buffer[] = [];
  let position = 0;
  for (let i = 0; i < runs.length; i += 2) {
    const start = runs[i]!;
    if (start > position) pieces.push(body.subarray(position, start));
    pieces.push(REDACTED_BYTES);
    position = runs[i + 1]!;
  }
  if (position < body.length) pieces.push(body.subarray(position));
  return Buffer.concat(pieces);
}
