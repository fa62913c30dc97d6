// Redaction of an origin's answer: every byte that spells a credential (in any encoding that
// secret-encodings.ts lists) becomes "[redacted]" before the answer leaves the proxy, in the body
// and in the allowed response headers.
import { findHeadersSplittingASpelling } from "./header-block.ts";
import { addSecretEncodings, type RedactionValue } from "./secret-encodings.ts";
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
}

const REDACTED_BYTES = Buffer.from(REDACTED, "latin1");

/**
 * Builds a redactor for `values` (the injected credential, and any token minted on the way).
 * Every spelling of every value is listed and compiled into one automaton here, once per call.
 * Empty secrets are skipped.
 *
 * Every match is found, overlapping ones included; each run of bytes covered by one or more
 * matches becomes a single "[redacted]" (so adjacent or overlapping spellings hide together and
 * no piece of a longer spelling is left behind). Matching runs over the original bytes only, so
 * a replacement can never create a new match.
 *
 * @example createRedactor([{ secret: "sk_live_123" }]).redactText("key sk_live_123") // "key [redacted]"
 */
export function createRedactor(values: readonly RedactionValue[]): Redactor {
  const spellings: string[] = [];
  for (const value of values) addSecretEncodings(value, spellings);
  const automaton = buildSpellingAutomaton(spellings);

  function redactBytes(body: Buffer): Buffer {
    if (automaton === undefined || body.length === 0) return body;
    const runs = automaton.findCoveredRuns(body);
    return runs.length === 0 ? body : replaceRuns(body, runs);
  }

  function redactText(text: string): string {
    if (automaton === undefined || text.length === 0) return text;
    // Header values reach us decoded as UTF-8 or as latin1 depending on the client; run the
    // UTF-8 pass, then a latin1 pass (the original wire bytes) when the text allows it, so a
    // non-ASCII secret is found under either decoding.
    const afterUtf8 = redactBytes(Buffer.from(text, "utf8")).toString("utf8");
    if (!/^[\x00-\xff]*$/.test(afterUtf8)) return afterUtf8;
    return redactBytes(Buffer.from(afterUtf8, "latin1")).toString("latin1");
  }

  function redactHeaders<T extends { value: string }>(headers: readonly T[]): T[] {
    if (automaton === undefined) return [...headers];
    const split = findHeadersSplittingASpelling(
      automaton,
      headers.map((header) => header.value),
    );
    return headers.map((header, i) => ({
      ...header,
      value: split.has(i) ? REDACTED : redactText(header.value),
    }));
  }

  return { redactBytes, redactText, redactHeaders };
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
