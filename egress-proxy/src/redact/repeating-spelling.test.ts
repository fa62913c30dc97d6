import { describe, expect, it } from "vitest";
import { answerShape, createRedactor, REDACTED } from "./redactor.ts";
import { addSecretEncodings } from "./secret-encodings.ts";
import { buildSpellingAutomaton, normalizeSpelling } from "./spelling-automaton.ts";

// A member with credentials.write may store a value of one character (or one block) repeated up
// to the 32 KiB a value may hold, and have their own origin answer with every marker byte and
// long runs of it. The automaton must stay about as large as the spellings themselves (not a trie
// node per spelling byte: 32 bytes of table a byte, a gigabyte a call), and still hide every echo.

const MAX_VALUE_LENGTH = 32 * 1024;
/** Every byte that makes a family of spellings listed: "%", "&", "\", "+", ":", "-", " ", NUL. */
const MARKERS = "%&\\+:- \x00";

function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return state / 0x80000000;
  };
}

/** The runs every occurrence of every spelling covers, by indexOf at each position (no CR/LF). */
function naiveRuns(spellings: readonly string[], body: string): number[] {
  const matches: [number, number][] = [];
  const read = normalizeSpelling(body);
  for (const spelling of new Set(spellings.map(normalizeSpelling))) {
    if (spelling.length === 0) continue;
    for (let at = read.indexOf(spelling); at !== -1; at = read.indexOf(spelling, at + 1)) {
      matches.push([at, at + spelling.length]);
    }
  }
  matches.sort((a, b) => a[0] - b[0]);
  const runs: number[] = [];
  for (const [start, end] of matches) {
    if (runs.length > 0 && runs[runs.length - 1]! >= start)
      runs[runs.length - 1] = Math.max(runs.at(-1)!, end);
    else runs.push(start, end);
  }
  return runs;
}

function spellingsOf(secret: string, body: Buffer): string[] {
  const spellings: string[] = [];
  addSecretEncodings({ secret }, spellings, answerShape(body, []));
  return spellings;
}

const block = Array.from({ length: 2000 }, (_, i) => "%&\\+:-"[(i * 5 + (i >> 3)) % 6]).join("");
const HOSTILE_VALUES: [string, string][] = [
  ["one character", "%".repeat(MAX_VALUE_LENGTH)],
  ["a 2000-character block of markers", block.repeat(17).slice(0, MAX_VALUE_LENGTH)],
  ["two characters", "&\\".repeat(MAX_VALUE_LENGTH / 2)],
];

describe("a 32 KiB value that repeats, answered with every marker and long runs of it", () => {
  it.each(HOSTILE_VALUES)("keeps the tables within a few bytes a spelling byte (%s)", (_name, secret) => {
    const unit = secret.slice(0, secret.indexOf(secret.slice(0, 16), 1));
    const body = Buffer.from(`${MARKERS}${unit.repeat(60_000 / unit.length)}${MARKERS}${secret}`, "latin1");
    const spellings = spellingsOf(secret, body);
    const spellingBytes = spellings.reduce((total, spelling) => total + spelling.length, 0);
    const automaton = buildSpellingAutomaton(spellings)!;
    expect(automaton.findCoveredRuns(body).length).toBeGreaterThan(0);
    // A failure table (4 bytes) for each byte of a repeating spelling, 16 trie nodes a spelling;
    // the whole spellings in the trie were 32 bytes a byte.
    expect(automaton.tableBytes()).toBeLessThanOrEqual(4 * spellingBytes + 1024 * spellings.length + 2048);
    automaton.release();
  });

  it.each(HOSTILE_VALUES)("hides every spelling echoed inside a run of the value (%s)", (_name, secret) => {
    const unit = secret.slice(0, secret.indexOf(secret.slice(0, 16), 1));
    const shapeBody = Buffer.from(`${MARKERS}${unit.repeat(100)}`, "latin1");
    const spellings = [...new Set(spellingsOf(secret, shapeBody))];
    // Each spelling inside runs of the value's own repeating unit and of its own beginning, in
    // bodies of at most the 1 MiB the proxy buffers.
    const bodies: { pieces: string[]; count: number; length: number }[] = [];
    for (const spelling of spellings) {
      const own = spelling.slice(0, 24);
      const piece = [unit.repeat(3), own, spelling, own, spelling.slice(1), "|"].join("");
      const last = bodies.at(-1);
      if (last !== undefined && last.length + piece.length <= 1024 * 1024) {
        last.pieces.push(piece);
        last.count++;
        last.length += piece.length;
      } else bodies.push({ pieces: [MARKERS, piece], count: 1, length: MARKERS.length + piece.length });
    }
    for (const { pieces, count } of bodies) {
      const body = Buffer.from(pieces.join(""), "latin1");
      const redactor = createRedactor([{ secret }], { shape: answerShape(body, []) });
      const redacted = redactor.redactBytes(body).toString("latin1");
      redactor.dispose();
      for (const spelling of spellings) expect(redacted.includes(spelling)).toBe(false);
      // No "|" (in no spelling) is taken into a redaction: each echo is hidden on its own.
      expect(redacted.split("|").length - 1).toBe(count);
      expect(redacted.split(REDACTED).length - 1).toBeGreaterThanOrEqual(count);
    }
  });
});

describe("a repeating spelling, matched from its anchor on", () => {
  it("finds exactly the runs an indexOf at every position finds (2 000 generated cases)", () => {
    const next = random(56);
    for (let n = 0; n < 2_000; n++) {
      const alphabet = ["ab", "%a", "abc", "\\u"][n % 4]!;
      const pick = () => alphabet[Math.floor(next() * alphabet.length)]!;
      const spellings: string[] = [];
      for (let s = 1 + Math.floor(next() * 3); s > 0; s--) {
        // A short unit repeated past the anchor's 16 bytes, with a stray byte now and then.
        const unit = Array.from({ length: 1 + Math.floor(next() * 4) }, pick).join("");
        let spelling = unit.repeat(Math.ceil((17 + next() * 30) / unit.length));
        if (next() < 0.5) {
          const at = Math.floor(next() * spelling.length);
          spelling = spelling.slice(0, at) + pick() + spelling.slice(at + 1);
        }
        spellings.push(spelling);
      }
      // Sometimes a spelling whose anchor does not repeat, and one of the anchor's length or less.
      if (next() < 0.3) spellings.push(`${"xyz0123456789".slice(0, 12)}${spellings[0]!}`);
      if (next() < 0.3) spellings.push(spellings[0]!.slice(0, 5 + Math.floor(next() * 12)));
      const body = Array.from({ length: 200 + Math.floor(next() * 200) }, () =>
        next() < 0.1 ? spellings[Math.floor(next() * spellings.length)]! : pick(),
      ).join("");
      const automaton = buildSpellingAutomaton(spellings)!;
      const runs = automaton.findCoveredRuns(Buffer.from(body, "latin1"));
      automaton.release();
      expect({ spellings, body, runs }).toEqual({ spellings, body, runs: naiveRuns(spellings, body) });
    }
  });

  it("covers an echo inside a long run, line breaks (raw or JSON-escaped) and hex case read through", () => {
    const secret = "%".repeat(100);
    const redactor = createRedactor([{ secret }]);
    // 40 + 70 "%" with a break between: one match of 100 in a run of 110.
    expect(redactor.redactBytes(Buffer.from(`a ${"%".repeat(40)}\r\n${"%".repeat(70)} b`)).toString()).toBe(
      `a ${REDACTED} b`,
    );
    expect(redactor.redactBytes(Buffer.from(`"${"%".repeat(60)}\\n${"%".repeat(60)}"`)).toString()).toBe(
      `"${REDACTED}"`,
    );
    // Percent-encoded, its hex in uppercase: %25 x 100 in a run of 300 of them.
    expect(redactor.redactBytes(Buffer.from(`q=${"%25".repeat(300)}&`)).toString()).toBe(`q=${REDACTED}&`);
    // A run one short of the value is not a match.
    const short = Buffer.from(`a ${"%".repeat(99)} b`);
    expect(redactor.redactBytes(short)).toBe(short);
    redactor.dispose();
  });

  it("tells a text ending inside the spelling, so a value split across two headers is found", () => {
    const secret = "ab".repeat(40);
    const automaton = buildSpellingAutomaton([secret])!;
    expect(automaton.isOpenAtEnd(Buffer.from(`x ${secret.slice(0, 50)}`))).toBe(true);
    expect(automaton.isOpenAtEnd(Buffer.from(`x ${secret.slice(0, 10)}`))).toBe(true);
    expect(automaton.isOpenAtEnd(Buffer.from(`x ${secret} y`))).toBe(false);
    automaton.release();
    const redactor = createRedactor([{ secret }]);
    const headers = redactor.redactHeaders([
      { name: "x-a", value: secret.slice(0, 50) },
      { name: "x-b", value: secret.slice(50) },
      { name: "x-c", value: "zz" },
    ]);
    redactor.dispose();
    expect(headers.map((header) => header.value)).toEqual([REDACTED, REDACTED, "zz"]);
  });
});
