import { describe, expect, it } from "vitest";
import { answerShape, createRedactor, REDACTED } from "./redactor.ts";
import { listSecretEncodings, type RedactionValue } from "./secret-encodings.ts";

// Characters that every encoding treats differently: "/" (JSON \/ and %2F), "+" and space (form),
// "~!'()" (encodeURIComponent vs URLSearchParams), "<&>" (Go's JSON), quotes and backslash
// (JSON), non-ASCII inside and beyond the BMP (\u escapes, lowercase and uppercase hex).
const SECRET = "s3cr/et+K ey~!'()<&>\"\\é😀zZ9";
const USER = "acct_42";

const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");
const b64url = (text: string) => Buffer.from(text, "utf8").toString("base64url");
const lowerHex = (text: string) => text.replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase());
const escapeNonAscii = (text: string, upper: boolean) =>
  text.replace(/[^\x00-\x7f]/g, (c) => {
    const hex = c.charCodeAt(0).toString(16).padStart(4, "0");
    return `\\u${upper ? hex.toUpperCase() : hex}`;
  });
const json = JSON.stringify(SECRET).slice(1, -1);

const ENCODINGS: [string, string][] = [
  ["raw", SECRET],
  ["encodeURIComponent", encodeURIComponent(SECRET)],
  ["encodeURIComponent, lowercase hex", lowerHex(encodeURIComponent(SECRET))],
  ["form encoding with +", encodeURIComponent(SECRET).replaceAll("%20", "+")],
  ["form encoding with +, lowercase hex", lowerHex(encodeURIComponent(SECRET).replaceAll("%20", "+"))],
  ["URLSearchParams form encoding", new URLSearchParams({ k: SECRET }).toString().slice(2)],
  ["JSON escape", json],
  ["JSON escape with \\/", json.replaceAll("/", "\\/")],
  ["JSON escape with lowercase \\u", escapeNonAscii(json, false)],
  ["JSON escape with uppercase \\u", escapeNonAscii(json, true)],
  ["JSON escape with \\/ and \\u", escapeNonAscii(json.replaceAll("/", "\\/"), false)],
  ["Go JSON escape of <>&", json.replace("<&>", "\\u003c\\u0026\\u003e")],
  ["base64", b64(SECRET)],
  ["base64 without padding", b64(SECRET).replace(/=+$/, "")],
  ["base64url", b64url(SECRET)],
  ["base64url with padding", b64url(SECRET).padEnd(b64(SECRET).length, "=")],
  ["base64 of the Basic pair user:secret", b64(`${USER}:${SECRET}`)],
  ["base64url of the Basic pair user:secret", b64url(`${USER}:${SECRET}`)],
  ["base64 of the Basic pair secret:", b64(`${SECRET}:`)],
];

describe("createRedactor: each encoding", () => {
  const redactor = createRedactor([{ secret: SECRET, username: USER }]);

  it("the table's spellings really differ from each other", () => {
    expect(new Set(ENCODINGS.map(([, text]) => text)).size).toBe(ENCODINGS.length);
  });

  it.each(ENCODINGS)("hides the %s spelling in a body", (_name, spelling) => {
    const body = Buffer.from(`{"echo":"${spelling}","n":1}`, "utf8");
    expect(redactor.redactBytes(body).toString("utf8")).toBe(`{"echo":"${REDACTED}","n":1}`);
  });

  it.each(ENCODINGS)("hides the %s spelling in header text", (_name, spelling) => {
    expect(redactor.redactText(`before ${spelling} after`)).toBe(`before ${REDACTED} after`);
  });

  it.each([0, 1, 2, 5, 16])(
    "hides the secret inside a longer base64 text (a JWT payload) after a %i-byte prefix",
    (prefixLength) => {
      const payload = `${"p".repeat(prefixLength)}{"sub":"u1","token":"${SECRET}","exp":1}`;
      for (const encoded of [b64(payload), b64url(payload)]) {
        const redacted = redactor.redactText(`eyJhbGciOiJIUzI1NiJ9.${encoded}.sig`);
        expect(redacted).toContain(REDACTED);
        // What is left decodes to the surroundings only, never to the secret or a large part of it.
        const leftover = Buffer.from(redacted.replaceAll(REDACTED, ""), "base64").toString("latin1");
        expect(leftover).not.toContain("s3cr/et");
        expect(leftover).not.toContain("~!'()<&>");
        expect(redacted.startsWith("eyJhbGciOiJIUzI1NiJ9.")).toBe(true);
      }
    },
  );

  it("leaves the username alone: it is not secret", () => {
    expect(redactor.redactText(`user ${USER}`)).toBe(`user ${USER}`);
  });

  it.each(ENCODINGS)(
    "hides the %s spelling when built for the answer's shape, as the whole redactor does",
    (_name, spelling) => {
      const body = Buffer.from(`{"echo":"${spelling}","n":1}`, "utf8");
      const headers = [
        { name: "x-request-id", value: `id ${spelling}` },
        { name: "link", value: spelling.slice(0, 9) },
        { name: "x-ratelimit-remaining", value: spelling.slice(9) },
      ];
      const gated = createRedactor([{ secret: SECRET, username: USER }], {
        shape: answerShape(
          body,
          headers.map((h) => h.value),
        ),
      });
      expect(gated.redactBytes(body).toString("utf8")).toBe(`{"echo":"${REDACTED}","n":1}`);
      expect(gated.redactHeaders(headers)).toEqual(redactor.redactHeaders(headers));
    },
  );
});

describe("createRedactor: placement and repetition", () => {
  const secret = "tok_AbC123xyz";
  const redactor = createRedactor([{ secret }]);
  const redact = (text: string) => redactor.redactBytes(Buffer.from(text, "latin1")).toString("latin1");

  it.each([
    ["the whole body", secret, REDACTED],
    ["the start", `${secret} tail`, `${REDACTED} tail`],
    ["the end", `head ${secret}`, `head ${REDACTED}`],
    ["start and end", `${secret}-${secret}`, `${REDACTED}-${REDACTED}`],
    // Adjacent occurrences form one covered run and become one marker.
    ["adjacent occurrences", `a${secret}${secret}b`, `a${REDACTED}b`],
    ["nothing", "no secret here", "no secret here"],
  ])("redacts %s", (_case, input, expected) => {
    expect(redact(input)).toBe(expected);
  });

  it("redacts a value that appears many times", () => {
    const body = Array.from({ length: 5000 }, (_, i) => `${i}:${secret}`).join(",");
    const out = redact(body);
    expect(out).not.toContain(secret);
    expect(out.split(REDACTED)).toHaveLength(5001);
    expect(out.startsWith(`0:${REDACTED},1:${REDACTED}`)).toBe(true);
  });

  it("hides overlapping occurrences of a self-overlapping value without leaving a piece", () => {
    const overlapping = createRedactor([{ secret: "abab" }]);
    expect(overlapping.redactText("xabababy")).toBe(`x${REDACTED}y`);
  });

  it("hides overlapping spellings of one value together (raw run into its base64)", () => {
    const body = `${secret}${b64(secret)}!`;
    expect(redact(body)).toBe(`${REDACTED}!`);
  });

  it("hides a value that is itself the marker text, and ends", () => {
    expect(createRedactor([{ secret: REDACTED }]).redactText(`a${REDACTED}b`)).toBe(`a${REDACTED}b`);
  });

  it("returns the body unchanged when nothing matches", () => {
    const body = Buffer.from("hello");
    expect(redactor.redactBytes(body)).toBe(body);
  });

  it("skips empty secrets instead of matching everywhere", () => {
    const empty = createRedactor([{ secret: "" }, { secret: "", username: "u" }]);
    expect(empty.redactText("abc")).toBe("abc");
    expect(empty.redactBytes(Buffer.from("abc")).toString()).toBe("abc");
    expect(createRedactor([]).redactText("abc")).toBe("abc");
  });

  it("redacts several values, each in its own spellings", () => {
    const minted = "ya29.minted-access-token";
    const both = createRedactor([{ secret }, { secret: minted }]);
    const body = `{"a":"${secret}","b":"${encodeURIComponent(minted)}","c":"${b64(minted)}"}`;
    expect(both.redactText(body)).toBe(`{"a":"${REDACTED}","b":"${REDACTED}","c":"${REDACTED}"}`);
  });
});

describe("createRedactor: bytes that are not UTF-8", () => {
  it("keeps invalid UTF-8 around a secret byte for byte", () => {
    const secret = "tok_AbC123xyz";
    const before = Buffer.from([0xff, 0xfe, 0x80, 0xc3]);
    const after = Buffer.from([0xc3, 0x28, 0x00, 0xa0]);
    const body = Buffer.concat([before, Buffer.from(secret), after, Buffer.from(secret)]);
    const out = createRedactor([{ secret }]).redactBytes(body);
    expect(out).toEqual(Buffer.concat([before, Buffer.from(REDACTED), after, Buffer.from(REDACTED)]));
  });

  it("hides a non-ASCII secret in a latin1 body and in UTF-8", () => {
    const secret = "pässwörd-42";
    const redactor = createRedactor([{ secret }]);
    for (const encoding of ["latin1", "utf8"] as const) {
      const body = Buffer.from(`x=${secret};`, encoding);
      expect(redactor.redactBytes(body).toString(encoding)).toBe(`x=${REDACTED};`);
    }
  });

  it("hides a non-ASCII secret in a header value decoded as latin1 or as UTF-8", () => {
    const secret = "pässwörd-42";
    const redactor = createRedactor([{ secret }]);
    const wire = Buffer.from(`token=${secret}`, "utf8");
    expect(redactor.redactText(wire.toString("utf8"))).toBe(`token=${REDACTED}`);
    expect(redactor.redactText(wire.toString("latin1"))).toBe(`token=${REDACTED}`);
  });
});

describe("createRedactor: a secret split across the origin's chunks", () => {
  it("finds the secret whatever chunk boundary fell inside it, because the whole body is redacted", () => {
    const secret = "sk_live_chunked_SECRET";
    const redactor = createRedactor([{ secret }]);
    const body = Buffer.from(`{"key":"${secret}","b64":"${b64(secret)}"}`);
    const start = body.indexOf(secret);
    // Every split point from just before the secret to just after it, as the stream delivered it.
    for (let cut = start; cut <= start + secret.length; cut++) {
      const chunks = [body.subarray(0, cut), body.subarray(cut, cut + 3), body.subarray(cut + 3)];
      const assembled = Buffer.concat(chunks);
      const out = redactor.redactBytes(assembled).toString();
      expect(out).toBe(`{"key":"${REDACTED}","b64":"${REDACTED}"}`);
    }
  });
});

describe("createRedactor: a 1 MiB body", () => {
  it("redacts three secrets scattered through a megabyte and keeps everything else", () => {
    const secrets = ["sk_live_first_0123456789", "ghp_second_abcdefghijklmnop", "xoxb-third-9876543210"];
    const redactor = createRedactor(secrets.map((secret) => ({ secret, username: "user" })));
    const filler = "lorem ipsum dolor sit amet, ".repeat(40);
    let body = "";
    let expected = "";
    for (let i = 0; body.length < 1024 * 1024; i++) {
      body += filler + (secrets[i % 3] ?? "");
      expected += filler + REDACTED;
    }
    const out = redactor.redactBytes(Buffer.from(body));
    expect(out.toString()).toBe(expected);
  });
});

describe("createRedactor: the tables' memory, reused from call to call", () => {
  it("redacts alike with a fresh redactor after one was disposed, and with two alive at once", () => {
    const body = (secret: string) => Buffer.from(`{"a":"${secret}","b":"sk_other_value_123456"}`);
    const first = createRedactor([{ secret: "sk_first_value_0123456789" }]);
    const second = createRedactor([{ secret: "sk_other_value_123456" }]);
    // Both alive: the second has memory of its own, and neither disturbs the other.
    expect(first.redactBytes(body("sk_first_value_0123456789")).toString()).toBe(
      '{"a":"[redacted]","b":"sk_other_value_123456"}',
    );
    expect(second.redactBytes(body("x")).toString()).toBe('{"a":"x","b":"[redacted]"}');
    first.dispose();
    second.dispose();
    for (let round = 0; round < 3; round++) {
      const next = createRedactor([{ secret: `sk_round_${round}_value_abcdef` }]);
      expect(next.redactBytes(body(`sk_round_${round}_value_abcdef`)).toString()).toBe(
        '{"a":"[redacted]","b":"sk_other_value_123456"}',
      );
      // Nothing of an earlier round's spellings is still found.
      expect(next.redactBytes(body("sk_first_value_0123456789")).toString()).toContain("sk_first_value");
      next.dispose();
    }
  });
});

describe("createRedactor: built for one answer's shape", () => {
  /** A deterministic generator, so that a failure is reproducible. */
  function random(seed: number): () => number {
    let state = seed >>> 0;
    return () => {
      state = (state * 1664525 + 1013904223) >>> 0;
      return state / 2 ** 32;
    };
  }
  const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=";
  const HEX = "0123456789abcdefABCDEF:- ";
  const LINE_BREAKS = ["\r\n", "\n", "\\n", "\\r\\n", "\\u000A"];

  it("redacts every answer exactly as the redactor of every spelling does (4000 answers)", () => {
    const next = random(20261126);
    const pick = (pool: string, length: number) =>
      Array.from({ length }, () => pool[Math.floor(next() * pool.length)]).join("");
    for (let i = 0; i < 4000; i++) {
      // Tokens of base64 and hex characters (the runs the shape measures), and a few others.
      const pool = next() < 0.4 ? "0123456789abcdef" : next() < 0.8 ? BASE64 : `${BASE64}%&\\é :`;
      const value: RedactionValue = {
        secret: pick(pool, 1 + Math.floor(next() * 48)),
        username: next() < 0.2 ? pick(BASE64, 1 + Math.floor(next() * 8)) : undefined,
      };
      const spellings = listSecretEncodings(value).map((b) => b.toString("latin1"));
      let spelling = spellings[Math.floor(next() * spellings.length)]!;
      // Line breaks inside it, raw or JSON-escaped (the scan reads through both), hex letters in
      // either case.
      if (next() < 0.3) {
        const at = Math.floor(next() * spelling.length);
        const lineBreak = LINE_BREAKS[Math.floor(next() * LINE_BREAKS.length)]!;
        spelling = `${spelling.slice(0, at)}${lineBreak}${spelling.slice(at)}`;
      }
      if (next() < 0.3) spelling = spelling.replace(/[a-f]/g, (c) => (next() < 0.5 ? c.toUpperCase() : c));
      // Around it: short JSON fields, a long run of base64 or hex characters, or nothing.
      const around = () =>
        [
          '{"id":"item_0001","n":17,"t":"',
          pick(BASE64, Math.floor(next() * 120)),
          pick(HEX, Math.floor(next() * 120)),
          "",
        ][Math.floor(next() * 4)]!;
      const inBody = next() < 0.7;
      const body = Buffer.from(inBody ? `${around()}${spelling}${around()}` : around(), "latin1");
      // Or split across two headers, beside one that has nothing to do with it.
      const cut = Math.floor(next() * spelling.length);
      const headerValues = inBody
        ? ["application/json"]
        : [spelling.slice(0, cut), "application/json", spelling.slice(cut)];
      const headers = headerValues.map((v, n) => ({ name: `x-h${n}`, value: v }));

      const whole = createRedactor([value]);
      const built = createRedactor([value], { shape: answerShape(body, headerValues) });
      const context = JSON.stringify({ value, spelling, body: body.toString("latin1"), headerValues });
      expect(built.redactBytes(body).equals(whole.redactBytes(body)), context).toBe(true);
      expect(built.redactHeaders(headers), context).toEqual(whole.redactHeaders(headers));
      whole.dispose();
      built.dispose();
    }
  });

  it("lists no base64 or hex spelling of a long key for a JSON answer of short fields", () => {
    const secret = "lt_bench_4f9c2a7e1b6d8f3a0c5e9b2d7a4f1c8e";
    const body = Buffer.from(
      `{"object":"echo","authorization":"Bearer ${secret}","items":[{"id":"item_0001"}]}`,
    );
    const listed = listSecretEncodings({ secret }, answerShape(body, ["application/json"]));
    expect(listed.map((b) => b.toString("latin1"))).toEqual([secret]);
    // The whole list has the hex and base64 spellings.
    expect(listSecretEncodings({ secret }).length).toBeGreaterThan(10);
  });
});
