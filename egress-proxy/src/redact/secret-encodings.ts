// The spellings of one credential that an origin may echo back: raw, hex, URL and form encoded,
// once or twice (url-encodings.ts), JSON escaped (json-escapes.ts), HTML escaped
// (html-escapes.ts), base64 (whole, inside a longer base64 text, and as an HTTP Basic pair), each
// base64 one also with its "+", "/" and "=" escaped for JSON, a URL or HTML (base64-escapes.ts);
// as UTF-8 bytes (and latin1), and the raw, JSON and base64 ones as UTF-16 and UTF-32 too (either
// byte order). Spellings that differ only in hex case or line breaks are one for the scan
// (spelling-automaton.ts), so each is listed once.
import { BASE64_ESCAPE_FAMILIES, BASE64_ESCAPED, listEscapedBase64 } from "./base64-escapes.ts";
import { listHtmlEscapes } from "./html-escapes.ts";
import { listJsonEscapes } from "./json-escapes.ts";
import { listUrlEncodings } from "./url-encodings.ts";

export interface RedactionValue {
  secret: string;
  /** HTTP Basic user id of the credential; the pair `username:secret` is redacted as base64. */
  username?: string | undefined;
}

// Below this many bytes a value has no "inside a longer base64 text" spellings: their few
// characters would match unrelated base64 too often to be worth hiding.
const MIN_EMBEDDED_BASE64_BYTES = 6;

/**
 * What an answer can hold, for leaving out the spellings that cannot occur in it
 * (redactor.ts `answerShape`).
 */
export interface AnswerShape {
  /** Which of FAMILY_MARKERS occur (1 at the byte's index). */
  markers: Uint8Array;
  /**
   * The longest run of base64 and base64url characters (letters, digits, "+", "/", "-", "_",
   * "=", with CR and LF read through, raw or JSON-escaped, as the scan skips them) that a
   * spelling could lie in.
   */
  longestBase64Run: number;
  /** The same for hex digits and the hex separators (":", "-", " "). */
  longestHexRun: number;
  /**
   * The same for base64 characters and the bytes of their JSON, URL and HTML escapes ("\\",
   * "%", "&", "#", ";"), counting only the parts of the answer that hold one of "\\", "%" and
   * "&" (0 when none does). With a NUL in the answer, every run reads through NULs too (UTF-16).
   */
  longestEscapedBase64Run: number;
}

/**
 * Every distinct byte spelling of `value` to hide, unordered; empty when the secret is empty.
 * With `shape`, every one that can occur in an answer of that shape.
 */
export function listSecretEncodings(value: RedactionValue, shape?: AnswerShape): Buffer[] {
  const spellings: string[] = [];
  addSecretEncodings(value, spellings, shape);
  return [...new Set(spellings)].map((spelling) => Buffer.from(spelling, "latin1"));
}

/** Every JSON escape holds one. */
export const BACKSLASH = 0x5c;
const AMPERSAND = 0x26;
const PERCENT = 0x25;
const PLUS = 0x2b;
/** ":", "-" and " ": what hex dumps, fingerprints and debug logs put between bytes. */
const HEX_SEPARATORS: readonly number[] = [0x3a, 0x2d, 0x20];
/** Every UTF-16 spelling of an ASCII or latin1 text holds one (the high byte of each unit). */
export const NUL = 0x00;
/** The bytes whose absence from an answer rules a family of spellings out (addSecretEncodings). */
export const FAMILY_MARKERS: readonly number[] = [
  BACKSLASH,
  AMPERSAND,
  PERCENT,
  PLUS,
  ...HEX_SEPARATORS,
  NUL,
];

/**
 * Appends every byte spelling of `value` to `spellings` as a byte string (its bytes read as
 * latin1, one character per byte). The same spelling may be appended more than once (the scan
 * keeps one); nothing when the secret is empty.
 *
 * With `shape` (redactor.ts answerShape: what the answer holds), a spelling that cannot occur in
 * that answer is not listed: each JSON escape that is not the secret itself holds a backslash,
 * each HTML one an "&", each URL one a "%" or a "+" (a space), each separated hex one its
 * separator, each escaped base64 one its family's marker, each UTF-16 one of a text with an ASCII
 * or latin1 character a NUL; a hex spelling is nothing but hex digits and separators, a base64
 * one nothing but base64 characters, and an escaped base64 one nothing but those and its escapes'
 * bytes, so none fits in an answer whose longest run of those is shorter. Only spellings that
 * cannot occur are left out (secret-encodings.test.ts compares with the whole list for thousands
 * of secrets and answers).
 */
export function addSecretEncodings(value: RedactionValue, spellings: string[], shape?: AnswerShape): void {
  const secret = value.secret;
  if (typeof secret !== "string" || secret.length === 0) return;
  const has = (byte: number) => shape === undefined || shape.markers[byte] === 1;
  // A body of UTF-16 or UTF-32 text (a hostile origin need not answer in UTF-8) reaches the agent
  // read as UTF-8, where dropping the NULs is all it takes to read it. The secret, its JSON
  // escapes and its base64 spellings (an echoed Authorization header) are listed so too, in an
  // answer with a NUL; without one, only a text whose every UTF-16 unit has two non-zero bytes
  // (addText), in UTF-16.
  const isUtf16 = has(NUL);
  const addAscii = (texts: readonly string[], isAlsoUtf16: boolean) => {
    for (const text of texts) spellings.push(text);
    if (isAlsoUtf16) for (const text of texts) addWide(spellings, text);
  };
  // The secret itself, its JSON escapes and its HTML escapes can hold non-ASCII; every other
  // spelling is ASCII, and so are the escapes of an ASCII secret.
  const isAscii = ASCII.test(secret);
  addText(spellings, secret, isUtf16);
  if (has(BACKSLASH)) {
    const escapes = listJsonEscapes(secret);
    if (isAscii) addAscii(escapes, isUtf16);
    else for (const text of escapes) addText(spellings, text, isUtf16);
  }
  if (has(AMPERSAND)) {
    const escapes = listHtmlEscapes(secret);
    if (isAscii) addAscii(escapes, false);
    else for (const text of escapes) addText(spellings, text, false);
  }
  const bytes = Buffer.from(secret, "utf8");
  if (has(PERCENT) || has(PLUS)) addAscii(listUrlEncodings(secret, bytes), false);
  // Plain hex is 2 characters a byte; separated, 3 less one.
  const hexRun = shape?.longestHexRun ?? Number.POSITIVE_INFINITY;
  if (hexRun >= 2 * bytes.length) addAscii(listHexEncodings(bytes, has, hexRun), false);
  const base64Run = shape?.longestBase64Run ?? Number.POSITIVE_INFINITY;
  const escapedRun = shape?.longestEscapedBase64Run ?? Number.POSITIVE_INFINITY;
  // The shortest base64 spelling of a value is the core of its embedded form, at least
  // 4/3 of its bytes less 2 characters (longer still with an escape in it): an answer with no
  // run that long holds none of them.
  const shortestBase64 = Math.floor((4 * bytes.length) / 3) - 2;
  if (base64Run < shortestBase64 && escapedRun < shortestBase64) return;
  const base64 = [
    ...listBase64Encodings(bytes),
    ...listEmbeddedBase64(bytes),
    ...listBase64Encodings(Buffer.from(`${secret}:`, "utf8")),
  ];
  if (value.username !== undefined && value.username.length > 0) {
    base64.push(...listBase64Encodings(Buffer.from(`${value.username}:${secret}`, "utf8")));
  }
  const listed: string[] = [];
  for (const spelling of base64) {
    if (spelling.length <= base64Run) listed.push(spelling);
    // Each escape is longer than the character it writes.
    if (spelling.length >= escapedRun || !BASE64_ESCAPED.test(spelling)) continue;
    for (const family of BASE64_ESCAPE_FAMILIES) {
      if (!has(family.marker)) continue;
      for (const text of listEscapedBase64(spelling, family)) {
        if (text.length <= escapedRun) listed.push(text);
      }
    }
  }
  addAscii(listed, isUtf16);
}

/**
 * Appends `text` as UTF-8 bytes; as latin1 bytes too when it fits (a body in a single-byte
 * charset carries each non-ASCII character as one byte); as UTF-16 and UTF-32 when `isUtf16` (the
 * answer holds a NUL), else as UTF-16 when that holds no NUL (an answer without one may hold it).
 */
function addText(spellings: string[], text: string, isUtf16: boolean): void {
  if (ASCII.test(text)) {
    // An ASCII text: UTF-8 and latin1 spell it alike, so it is its own byte string.
    spellings.push(text);
    if (isUtf16) addWide(spellings, text);
    return;
  }
  spellings.push(Buffer.from(text, "utf8").toString("latin1"));
  if (LATIN1.test(text)) spellings.push(text);
  if (isUtf16) addWide(spellings, text);
  else if (!hasNulInUtf16(text)) addUtf16(spellings, text);
}

/**
 * Appends `text` in UTF-16 and in UTF-32, each in either byte order: in an answer with a NUL
 * only, since every UTF-32 unit holds one. A body in UTF-32 (`charset=utf-32`, which no redaction
 * decodes) reaches the agent as UTF-8 with three NULs after each ASCII letter: as easy to read.
 */
function addWide(spellings: string[], text: string): void {
  addUtf16(spellings, text);
  const little = Buffer.alloc(4 * text.length);
  let length = 0;
  // By code point; a lone surrogate as its own unit, as a lenient encoder writes it.
  for (const character of text) {
    little.writeUInt32LE(character.codePointAt(0)!, length);
    length += 4;
  }
  const units = little.subarray(0, length);
  spellings.push(units.toString("latin1"), Buffer.from(units).swap32().toString("latin1"));
}

/** Appends the UTF-16LE and UTF-16BE bytes of `text`, each unit whole. */
function addUtf16(spellings: string[], text: string): void {
  const little = Buffer.from(text, "utf16le");
  spellings.push(little.toString("latin1"), little.swap16().toString("latin1"));
}

/** Whether a UTF-16 unit of `text` has a zero byte (each one up to U+00FF, and every U+xx00). */
function hasNulInUtf16(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit <= 0xff || (unit & 0xff) === 0) return true;
  }
  return false;
}

const ASCII = /^[\x00-\x7f]*$/;
const LATIN1 = /^[\x00-\xff]*$/;

/**
 * Hex of the UTF-8 bytes, plain and with ":", "-" or " " between bytes (hex dumps, fingerprints,
 * debug logs), the separated ones only when a run of `longestRun` can hold them. Lowercase only:
 * the scan reads hex digits without case.
 */
function listHexEncodings(bytes: Buffer, has: (byte: number) => boolean, longestRun: number): string[] {
  const hex = bytes.toString("hex");
  if (bytes.length < 2 || longestRun < 3 * bytes.length - 1) return [hex];
  const separators = HEX_SEPARATORS.filter(has);
  if (separators.length === 0) return [hex];
  // Two hex digits per byte, then a separator after every byte but the last.
  const digits = Buffer.from(hex, "latin1");
  const separated = Buffer.alloc(3 * bytes.length - 1);
  for (let i = 0; i < bytes.length; i++) {
    separated[3 * i] = digits[2 * i]!;
    separated[3 * i + 1] = digits[2 * i + 1]!;
  }
  const results = [hex];
  for (const separator of separators) {
    for (let at = 2; at < separated.length; at += 3) separated[at] = separator;
    results.push(separated.toString("latin1"));
  }
  return results;
}

/** base64 and base64url of `bytes`, each with and without "=" padding (each text once). */
function listBase64Encodings(bytes: Buffer): string[] {
  const standard = bytes.toString("base64");
  const unpadded = standard.replace(/=+$/, "");
  const results = unpadded === standard ? [standard] : [standard, unpadded];
  if (!BASE64_ONLY.test(unpadded)) return results;
  const url = toBase64Url(unpadded);
  results.push(url);
  if (unpadded !== standard) results.push(`${url}${standard.slice(unpadded.length)}`);
  return results;
}

/** Characters that base64 and base64url write differently. */
const BASE64_ONLY = /[+/]/;

function toBase64Url(base64: string): string {
  return base64.replaceAll("+", "-").replaceAll("/", "_");
}

/**
 * The characters of base64(prefix + bytes + suffix) that depend on `bytes` alone, for each of
 * the three alignments a prefix can give (its length mod 3). An origin that base64-encodes a
 * larger text holding the secret (a JWT payload, a debug dump, a Basic pair with another user)
 * spells the secret with one of these, whatever surrounds it.
 */
function listEmbeddedBase64(bytes: Buffer): string[] {
  if (bytes.length < MIN_EMBEDDED_BASE64_BYTES) return [];
  // Two zero bytes, then the value: from index 2 - offset it is `offset` zero bytes and the value.
  const padded = Buffer.alloc(bytes.length + 2);
  bytes.copy(padded, 2);
  const results: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = padded.subarray(2 - offset).toString("base64");
    // Character i covers bits [6i, 6i + 6); keep those that lie wholly inside the value's bits
    // [8 * offset, 8 * (offset + length)).
    const first = Math.ceil((8 * offset) / 6);
    const end = Math.floor((8 * (offset + bytes.length)) / 6);
    const core = encoded.slice(first, end);
    results.push(core);
    if (BASE64_ONLY.test(core)) results.push(toBase64Url(core));
  }
  padded.fill(0);
  return results;
}
