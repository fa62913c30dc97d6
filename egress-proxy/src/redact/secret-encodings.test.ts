import { describe, expect, it } from "vitest";
import { FAMILY_MARKERS, listSecretEncodings, type RedactionValue } from "./secret-encodings.ts";
import { normalizeSpelling } from "./spelling-automaton.ts";

// listSecretEncodings takes shortcuts (plain tokens skip the percent and JSON variants, ASCII
// spellings become one Buffer) and has grown new families (hex, every URL encoder, HTML, more
// JSON styles) while listing one hex case only, since the scan reads hex digits without case.
// This checks that it still covers every spelling of the straightforward version below, kept
// verbatim as the reference, as the scan reads them, for secrets built from every kind of
// character the encoders treat differently; and that the reference is a strict subset.

const ALPHABET = [
  ..."abcXYZ019",
  ..."-_.*~!'()",
  ..." /+=:%?&#;,@$",
  ...'"\\<>&',
  "\x00",
  "\x1f",
  "\x7f",
  "\t",
  "\x80",
  "é",
  "ÿ",
  "€",
  "\u2028",
  "\u2029",
  "😀",
  "\ud800",
  "\udc00",
];

/** A deterministic generator, so that a failure is reproducible. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

function randomValue(next: () => number): RedactionValue {
  const pick = (pool: readonly string[], length: number) =>
    Array.from({ length }, () => pool[Math.floor(next() * pool.length)]).join("");
  // Half the secrets are plain tokens, which take the shortcuts; the rest mix everything.
  const isPlain = next() < 0.5;
  const pool = isPlain ? [..."abcdefXYZ0123456789-_."] : ALPHABET;
  const secret = pick(pool, 1 + Math.floor(next() * 40));
  const username = next() < 0.3 ? pick(ALPHABET.slice(0, 20), Math.floor(next() * 6)) : undefined;
  return { secret, username };
}

const hexSet = (buffers: readonly Buffer[]) => buffers.map((b) => b.toString("hex")).sort();
/** The spellings as the scan reads them (hex letters in one case, no line breaks), as hex. */
const readSet = (buffers: readonly Buffer[]) =>
  new Set(buffers.map((b) => Buffer.from(normalizeSpelling(b.toString("latin1")), "latin1").toString("hex")));

/** Every reference spelling is listed (as the scan reads it), and the listing has more. */
function expectReferenceCovered(value: RedactionValue): void {
  const listed = readSet(listSecretEncodings(value));
  const reference = readSet(referenceEncodings(value));
  const missing = [...reference].filter((spelling) => !listed.has(spelling));
  expect(missing, JSON.stringify(value)).toEqual([]);
  if (value.secret.length > 0) expect(listed.size, JSON.stringify(value)).toBeGreaterThan(reference.size);
}

describe("listSecretEncodings", () => {
  it("covers every reference spelling, and more, for 5000 generated secrets", () => {
    const next = random(20261123);
    for (let i = 0; i < 5000; i++) {
      const value = randomValue(next);
      expectReferenceCovered(value);
      const listed = listSecretEncodings(value);
      // Distinct and never empty.
      expect(new Set(hexSet(listed)).size).toBe(listed.length);
      expect(listed.every((b) => b.length > 0)).toBe(true);
    }
  });

  it.each([
    ["a plain token", { secret: "sk_live_0123456789abcdef" }],
    ["a token with a username", { secret: "tok-1.2_3", username: "acct_42" }],
    ["every special character", { secret: "s3cr/et+K ey~!'()<&>\"\\é😀zZ9", username: "acct_42" }],
    ["a lone surrogate", { secret: "ab\ud800cd-efgh" }],
    ["latin1 only", { secret: "pässwörd-42" }],
    ["a short value", { secret: "abc" }],
  ])("covers the reference spellings for %s", (_name, value: RedactionValue) => {
    expectReferenceCovered(value);
  });

  it("leaves out, for an answer's markers, only spellings that cannot occur in it (5000 secrets)", () => {
    const next = random(20261126);
    // Answers with and without each family's marker ("%", "+", "\\", "&", ":", "-", " ", NUL).
    const answers = [
      '{"a":"plain json","b":[1,2,3]}',
      "text with % and + but nothing else",
      '{"escaped":"\\u0041","html":"&amp;"}',
      "aa:bb-cc dd",
      "",
      "every byte %+\\&:- \r\nABCDEFXabcdefx0123456789",
      // UTF-16 text (NUL) and the bytes of escaped base64 ("#", ";", "/", "=").
      "\u0000a\u0000b &#43;&#x2f;&plus;\\u002b\\/%3d ABCDEFXabcdefx0123456789+/=_",
    ].map((text) => {
      const markers = new Uint8Array(256);
      for (const byte of FAMILY_MARKERS) if (text.includes(String.fromCharCode(byte))) markers[byte] = 1;
      // Every byte of the text as the scan reads it (hex letters folded, CR and LF skipped).
      const read = new Set(normalizeSpelling(text));
      return {
        // The runs unbounded: only the markers gate here (the runs are the redactor's test).
        shape: {
          markers,
          longestBase64Run: Number.POSITIVE_INFINITY,
          longestHexRun: Number.POSITIVE_INFINITY,
          longestEscapedBase64Run: Number.POSITIVE_INFINITY,
        },
        canOccur: (spelling: string) => [...normalizeSpelling(spelling)].every((c) => read.has(c)),
      };
    });
    for (let i = 0; i < 5000; i++) {
      const value = randomValue(next);
      const answer = answers[i % answers.length]!;
      // Every spelling of the whole list that could match somewhere in that text...
      const possible = readSet(
        listSecretEncodings(value).filter((b) => answer.canOccur(b.toString("latin1"))),
      );
      // ...is still listed with the families the text's markers rule out left out.
      const gated = readSet(listSecretEncodings(value, answer.shape));
      const missing = [...possible].filter((spelling) => !gated.has(spelling));
      expect(missing, JSON.stringify(value)).toEqual([]);
    }
  });

  it("lists nothing for an empty value, as the reference", () => {
    expect(listSecretEncodings({ secret: "" })).toEqual([]);
    expect(referenceEncodings({ secret: "" })).toEqual([]);
  });
});

// --- The reference: secret-encodings.ts before the shortcuts, unchanged. ---

// Below this many bytes a value has no "inside a longer base64 text" spellings: their few
// characters would match unrelated base64 too often to be worth hiding.
const MIN_EMBEDDED_BASE64_BYTES = 6;

/** The spellings as listed before the fast paths: every text through UTF-8 and latin1, deduplicated by hex. */
function referenceEncodings(value: RedactionValue): Buffer[] {
  const secret = value.secret;
  if (typeof secret !== "string" || secret.length === 0) return [];
  const texts = new Set<string>([
    secret,
    ...listPercentEncodings(secret),
    ...listJsonEscapes(secret),
    ...listBase64Encodings(Buffer.from(secret, "utf8")),
    ...listEmbeddedBase64(Buffer.from(secret, "utf8")),
    ...listBase64Encodings(Buffer.from(`${secret}:`, "utf8")),
  ]);
  if (value.username !== undefined && value.username.length > 0) {
    for (const text of listBase64Encodings(Buffer.from(`${value.username}:${secret}`, "utf8")))
      texts.add(text);
  }

  const unique = new Map<string, Buffer>();
  const add = (bytes: Buffer) => {
    if (bytes.length > 0) unique.set(bytes.toString("hex"), bytes);
  };
  for (const text of texts) {
    add(Buffer.from(text, "utf8"));
    // A body in a single-byte charset carries each non-ASCII character as one byte.
    if (/^[\x00-\xff]*$/.test(text)) add(Buffer.from(text, "latin1"));
  }
  return [...unique.values()];
}

function lowercaseHexEscapes(text: string): string {
  return text.replace(/%[0-9A-F]{2}/g, (sequence) => sequence.toLowerCase());
}

/** RFC 3986 percent-encoding and the two form encodings, with upper and lowercase hex. */
function listPercentEncodings(secret: string): string[] {
  // encodeURIComponent throws on a lone surrogate; such a value has no URL spelling to hide.
  if (!secret.isWellFormed()) return [];
  const component = encodeURIComponent(secret);
  // Form encoding as most clients write it (space as "+"), and as the WHATWG URL standard writes
  // it (URLSearchParams also escapes ! ' ( ) ~).
  const form = component.replaceAll("%20", "+");
  const whatwgForm = new URLSearchParams([["", secret]]).toString().slice(1);
  return [component, form, whatwgForm].flatMap((text) => [text, lowercaseHexEscapes(text)]);
}

/**
 * JSON string escapes: as JSON.stringify writes them, with "\/" (PHP), with non-ASCII as \uXXXX
 * in either case (Python's ensure_ascii, Java), and with <, >, &, U+2028 and U+2029 as \u escapes
 * (Go's encoding/json), in every combination.
 */
function listJsonEscapes(secret: string): string[] {
  const plain = JSON.stringify(secret).slice(1, -1);
  const results: string[] = [];
  for (const isSlashEscaped of [false, true]) {
    for (const hexCase of ["none", "lower", "upper"] as const) {
      for (const isHtmlEscaped of [false, true]) {
        let text = isSlashEscaped ? plain.replaceAll("/", "\\/") : plain;
        if (isHtmlEscaped) text = text.replace(/[<>&\u2028\u2029]/g, (c) => unicodeEscape(c, "lower"));
        if (hexCase !== "none") text = text.replace(/[^\x00-\x7f]/g, (c) => unicodeEscape(c, hexCase));
        results.push(text);
      }
    }
  }
  return results;
}

function unicodeEscape(char: string, hexCase: "lower" | "upper"): string {
  // One \uXXXX per UTF-16 code unit: a character beyond the BMP becomes its surrogate pair.
  let escaped = "";
  for (let i = 0; i < char.length; i++) {
    const hex = char.charCodeAt(i).toString(16).padStart(4, "0");
    escaped += `\\u${hexCase === "upper" ? hex.toUpperCase() : hex}`;
  }
  return escaped;
}

/** base64 and base64url of `bytes`, each with and without "=" padding. */
function listBase64Encodings(bytes: Buffer): string[] {
  const standard = bytes.toString("base64");
  const url = bytes.toString("base64url");
  return [standard, standard.replace(/=+$/, ""), url, `${url}${"=".repeat(standard.length - url.length)}`];
}

/**
 * The characters of base64(prefix + bytes + suffix) that depend on `bytes` alone, for each of
 * the three alignments a prefix can give (its length mod 3). An origin that base64-encodes a
 * larger text holding the secret (a JWT payload, a debug dump, a Basic pair with another user)
 * spells the secret with one of these, whatever surrounds it.
 */
function listEmbeddedBase64(bytes: Buffer): string[] {
  if (bytes.length < MIN_EMBEDDED_BASE64_BYTES) return [];
  const results: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString("base64");
    // Character i covers bits [6i, 6i + 6); keep those that lie wholly inside the value's bits
    // [8 * offset, 8 * (offset + length)).
    const first = Math.ceil((8 * offset) / 6);
    const end = Math.floor((8 * (offset + bytes.length)) / 6);
    const core = encoded.slice(first, end);
    results.push(core, core.replaceAll("+", "-").replaceAll("/", "_"));
  }
  return results;
}
