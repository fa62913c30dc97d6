import { describe, expect, it } from "vitest";
import { findHeadersSplittingASpelling } from "./header-block.ts";
import { createRedactor, REDACTED } from "./redactor.ts";
import { buildSpellingAutomaton, type SpellingAutomaton } from "./spelling-automaton.ts";

// An origin that echoes the credential in pieces across response headers: each piece alone is
// no spelling, so redacting header by header would let all of them through.

const SECRET = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";
const HALF = 14;
const [FIRST, SECOND] = [SECRET.slice(0, HALF), SECRET.slice(HALF)];
const redactor = createRedactor([{ secret: SECRET }]);
const header = (name: string, value: string) => ({ name, value });

describe("redactHeaders: a secret split across headers", () => {
  it.each([
    ["duplicate x-request-id, in order", [header("x-request-id", FIRST), header("x-request-id", SECOND)]],
    ["two allowed headers", [header("x-ratelimit-policy", `p=${FIRST}`), header("link", `${SECOND}; rel=x`)]],
    // Node groups repeated headers by name, so pieces adjacent on the wire may arrive apart.
    [
      "pieces apart, with another header between",
      [header("x-request-id", FIRST), header("content-type", "text/plain"), header("x-request-id", SECOND)],
    ],
    ["pieces in reverse order", [header("x-request-id", SECOND), header("x-request-id", FIRST)]],
  ])("%s: every piece becomes [redacted], other headers stay", (_case, headers) => {
    const redacted = redactor.redactHeaders(headers);
    for (const [i, { name, value }] of headers.entries()) {
      const isPiece = value.includes(FIRST) || value.includes(SECOND);
      expect(redacted[i]).toEqual({ name, value: isPiece ? REDACTED : value });
    }
  });

  it("finds a spelling joined with ', ' as a client folds repeated headers (RFC 9110 5.3)", () => {
    // The secret's form encoding holds ", " once the client joins the two values.
    const secret = "tok, with comma";
    const [left, right] = ["tok", "with comma"];
    const redacted = createRedactor([{ secret }]).redactHeaders([
      header("x-request-id", left),
      header("x-request-id", right),
    ]);
    expect(redacted.map((h) => h.value)).toEqual([REDACTED, REDACTED]);
  });

  it("finds a spelling in three pieces, the middle header wholly inside it", () => {
    const headers = [
      header("x-request-id", `req ${SECRET.slice(0, 8)}`),
      header("x-request-id", SECRET.slice(8, 20)),
      header("x-request-id", `${SECRET.slice(20)} end`),
      header("retry-after", "30"),
    ];
    expect(redactor.redactHeaders(headers).map((h) => h.value)).toEqual([REDACTED, REDACTED, REDACTED, "30"]);
  });

  it("finds the pieces of an encoded spelling (percent-encoded, split inside an escape)", () => {
    const secret = "s3cr/et+value-0123456789";
    const encoded = encodeURIComponent(secret);
    const cut = encoded.indexOf("%2F") + 2;
    const redacted = createRedactor([{ secret }]).redactHeaders([
      header("link", `<https://a.example/?k=${encoded.slice(0, cut)}`),
      header("link", `${encoded.slice(cut)}>; rel="next"`),
    ]);
    expect(redacted.map((h) => h.value)).toEqual([REDACTED, REDACTED]);
  });

  it("redacts only the spelling of a secret wholly inside one header, and leaves the rest", () => {
    const headers = [
      header("x-request-id", `id-${SECRET}`),
      header("x-request-id", "req_2"),
      header("content-type", "application/json"),
    ];
    expect(redactor.redactHeaders(headers)).toEqual([
      header("x-request-id", `id-${REDACTED}`),
      header("x-request-id", "req_2"),
      header("content-type", "application/json"),
    ]);
  });

  it("leaves headers alone that only look like the start of a secret", () => {
    const headers = [header("x-request-id", "sk_live_"), header("x-ratelimit-remaining", "41")];
    expect(redactor.redactHeaders(headers)).toEqual(headers);
  });

  it("hides a non-ASCII secret split across headers given as latin1 wire bytes", () => {
    const secret = "pässwörd-0123456789";
    const wire = Buffer.from(secret, "utf8").toString("latin1");
    const redacted = createRedactor([{ secret }]).redactHeaders([
      header("x-request-id", wire.slice(0, 7)),
      header("x-request-id", wire.slice(7)),
    ]);
    expect(redacted.map((h) => h.value)).toEqual([REDACTED, REDACTED]);
  });

  it("keeps names, order and extra fields", () => {
    const headers = [{ name: "x-request-id", value: FIRST, extra: 1 }];
    expect(redactor.redactHeaders(headers)).toEqual(headers);
    expect(redactor.redactHeaders([])).toEqual([]);
  });
});

describe("findHeadersSplittingASpelling against thousands of allowed values", () => {
  it("reads a bounded number of pairs and redacts every header instead", () => {
    const automaton = buildSpellingAutomaton([SECRET])!;
    let reads = 0;
    const counting: SpellingAutomaton = {
      findCoveredRuns: (bytes) => {
        reads++;
        return automaton.findCoveredRuns(bytes);
      },
      isOpenAtEnd: (bytes) => {
        reads++;
        return automaton.isOpenAtEnd(bytes);
      },
      release: () => automaton.release(),
      tableBytes: () => automaton.tableBytes(),
    };
    // Each value is the beginning of the secret: every pair would have to be read.
    const values = Array.from({ length: 3_500 }, () => SECRET[0]!);
    const split = findHeadersSplittingASpelling(counting, values);
    counting.release();
    expect(split.size).toBe(values.length);
    // Linear in the values (a few reads each), not 3,500² pair reads.
    expect(reads).toBeLessThan(10 * values.length);
  });

  it("still reads every pair of a bounded header set", () => {
    const values = [...Array.from({ length: 30 }, () => "x"), FIRST, SECOND];
    const automaton = buildSpellingAutomaton([SECRET])!;
    const split = findHeadersSplittingASpelling(automaton, values);
    automaton.release();
    expect([...split].sort((a, b) => a - b)).toEqual([30, 31]);
  });
});
