// Redaction of an origin's answer: every byte that spells a credential (in any encoding that
// secret-encodings.ts lists) becomes "[redacted]" before the answer leaves the proxy.
import { addSecretEncodings, type RedactionValue } from "./secret-encodings.ts";

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
}

/**
 * A pattern searched with indexOf, plus the longer patterns that contain it: those are only
 * compared at the places where the short one matched, so each body is scanned once per anchor
 * rather than once per spelling (a value has up to ~40 spellings, most sharing a core).
 */
interface Anchor {
  bytes: Buffer;
  extensions: { bytes: Buffer; offset: number }[];
}

const REDACTED_BYTES = Buffer.from(REDACTED, "latin1");

/**
 * Builds a redactor for `values` (the injected credential, and any token minted on the way).
 * All patterns are computed here, once per call, as Buffers. Empty secrets are skipped.
 *
 * Every match is found, overlapping ones included; each run of bytes covered by one or more
 * matches becomes a single "[redacted]" (so adjacent or overlapping spellings hide together and
 * no piece of a longer spelling is left behind). Matching runs over the original bytes only, so
 * a replacement can never create a new match.
 *
 * @example createRedactor([{ secret: "sk_live_123" }]).redactText("key sk_live_123") // "key [redacted]"
 */
export function createRedactor(values: readonly RedactionValue[]): Redactor {
  const patterns = new Map<string, Buffer>();
  for (const value of values) addSecretEncodings(value, patterns);
  const anchors = planAnchors(patterns);

  function redactBytes(body: Buffer): Buffer {
    if (anchors.length === 0 || body.length === 0) return body;
    let covered: Uint8Array | undefined;
    for (const anchor of anchors) {
      for (let at = body.indexOf(anchor.bytes); at !== -1; at = body.indexOf(anchor.bytes, at + 1)) {
        covered ??= new Uint8Array(body.length);
        covered.fill(1, at, at + anchor.bytes.length);
        for (const extension of anchor.extensions) {
          const start = at - extension.offset;
          const end = start + extension.bytes.length;
          if (start >= 0 && end <= body.length && extension.bytes.equals(body.subarray(start, end))) {
            covered.fill(1, start, end);
          }
        }
      }
    }
    if (covered === undefined) return body;
    return replaceCoveredRuns(body, covered);
  }

  function redactText(text: string): string {
    if (anchors.length === 0 || text.length === 0) return text;
    // Header values reach us decoded as UTF-8 or as latin1 depending on the client; run the
    // UTF-8 pass, then a latin1 pass (the original wire bytes) when the text allows it, so a
    // non-ASCII secret is found under either decoding.
    const afterUtf8 = redactBytes(Buffer.from(text, "utf8")).toString("utf8");
    if (!/^[\x00-\xff]*$/.test(afterUtf8)) return afterUtf8;
    return redactBytes(Buffer.from(afterUtf8, "latin1")).toString("latin1");
  }

  return { redactBytes, redactText };
}

/**
 * Groups patterns so that a pattern containing a shorter one is checked only where that one
 * matched. `patterns` is keyed by each pattern's bytes read as latin1 (one character per byte):
 * containment is tested on those strings, which is cheaper than a Buffer call per pair.
 */
function planAnchors(patterns: ReadonlyMap<string, Buffer>): Anchor[] {
  const shortestFirst = [...patterns].sort((a, b) => a[0].length - b[0].length);
  const anchors: (Anchor & { text: string })[] = [];
  for (const [text, pattern] of shortestFirst) {
    const anchor = anchors.find((candidate) => text.includes(candidate.text));
    if (anchor === undefined) {
      anchors.push({ text, bytes: pattern, extensions: [] });
      continue;
    }
    // Every place the anchor occurs inside the pattern is a place the pattern may start from.
    for (let at = text.indexOf(anchor.text); at !== -1; at = text.indexOf(anchor.text, at + 1)) {
      anchor.extensions.push({ bytes: pattern, offset: at });
    }
  }
  return anchors;
}

/** Copies `body` with every run of covered bytes replaced by one "[redacted]". */
function replaceCoveredRuns(body: Buffer, covered: Uint8Array): Buffer {
  const pieces: Buffer[] = [];
  let position = 0;
  while (position < body.length) {
    const runStart = covered.indexOf(1, position);
    if (runStart === -1) break;
    let runEnd = covered.indexOf(0, runStart);
    if (runEnd === -1) runEnd = body.length;
    if (runStart > position) pieces.push(body.subarray(position, runStart));
    pieces.push(REDACTED_BYTES);
    position = runEnd;
  }
  if (position < body.length) pieces.push(body.subarray(position));
  return Buffer.concat(pieces);
}
