import { describe, expect, it } from "vitest";
import { BASE64_ESCAPE_FAMILIES, listEscapedBase64 } from "./base64-escapes.ts";
import { answerShape, createRedactor, REDACTED, type RedactionValue } from "./redactor.ts";
import { listSecretEncodings } from "./secret-encodings.ts";

// A hostile origin echoes the injected credential in another spelling than the ones listed
// for the secret itself: the Basic pair's base64 with its "+", "/" or "=" escaped by the JSON,
// URL or HTML encoder of the origin's language, or the whole answer in UTF-16, which the control
// plane reads as UTF-8 and the agent reads by dropping the NULs. Each spelling is built here
// from Node's own encoders and documented replacements, never with the code under test, and
// redacted as redact-answer.ts does it: by a redactor built for the answer's shape.

// Its base64, and the Basic pair's, hold "+", "/" and "=" ("~", ">" and "?" make them).
const SECRET = "sk_j6uDT~99Kp-G>ot?>QyP~krz";
const USER = "acct_42";
const VALUE: RedactionValue = { secret: SECRET, username: USER };
const PAIR = Buffer.from(`${USER}:${SECRET}`, "utf8").toString("base64");
const HEADERS = [{ name: "content-type", value: "application/json" }];

/** Redacts `body` as redact-answer.ts does: a redactor built for this answer alone. */
function redactAnswer(body: Buffer, values: readonly RedactionValue[] = [VALUE]): Buffer {
  const redactor = createRedactor(values, {
    shape: answerShape(
      body,
      HEADERS.map((header) => header.value),
    ),
  });
  try {
    return redactor.redactBytes(body);
  } finally {
    redactor.dispose();
  }
}

/** Writes each of "+", "/" and "=" in `base64` as `written` says (literal when absent). */
const respell = (base64: string, written: Partial<Record<"+" | "/" | "=", string>>) =>
  base64.replace(/[+/=]/g, (char) => written[char as "+" | "/" | "="] ?? char);

/** What the agent reads of a body: the control plane decodes UTF-8, the agent drops NULs. */
const asAgentReads = (body: Buffer) => body.toString("utf8").replaceAll("\u0000", "");

/** Every base64 text in `text` that decodes to something holding the secret or a large part of it. */
function findDecodableLeaks(text: string): string[] {
  const unescaped = decodeURIComponent(
    text
      .replace(/\\u([0-9a-fA-F]{4})/g, (_all, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))
      .replaceAll("\\/", "/")
      .replace(/&#x([0-9a-fA-F]+);/g, (_all, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))
      .replace(/&#(\d+);/g, (_all, decimal: string) => String.fromCharCode(Number(decimal)))
      .replaceAll("&plus;", "+")
      .replaceAll("&sol;", "/")
      .replaceAll("&equals;", "="),
  );
  const leaks: string[] = [];
  for (const run of unescaped.match(/[A-Za-z0-9+/=_-]{8,}/g) ?? []) {
    for (let skip = 0; skip < 4; skip++) {
      const decoded = Buffer.from(run.slice(skip), "base64").toString("latin1");
      for (let at = 0; at + 8 <= SECRET.length; at++) {
        if (decoded.includes(SECRET.slice(at, at + 8))) leaks.push(run);
      }
    }
  }
  return leaks;
}

describe("the Basic pair echoed back with its base64 escaped by another encoder", () => {
  it("holds all three characters an encoder escapes, so every case below is a real one", () => {
    expect(PAIR).toMatch(/\+/);
    expect(PAIR).toMatch(/\//);
    expect(PAIR).toMatch(/=$/);
  });

  const json = (text: string) => JSON.stringify({ headers: { authorization: text } });
  const cases: [string, string][] = [
    ["plain JSON", json(`Basic ${PAIR}`)],
    ["PHP json_encode (\\/)", json(`Basic ${PAIR}`).replaceAll("/", "\\/")],
    [".NET System.Text.Json (\\u002B)", json(`Basic ${PAIR}`).replaceAll("+", "\\u002B")],
    ["serialize-javascript (\\u002F)", json(`Basic ${PAIR}`).replaceAll("/", "\\u002F")],
    ["Gson (\\u003d)", json(`Basic ${PAIR}`).replaceAll("=", "\\u003d")],
    [
      "every one as lowercase \\u",
      json(`Basic ${PAIR}`).replaceAll("+", "\\u002b").replaceAll("/", "\\u002f").replaceAll("=", "\\u003d"),
    ],
    [
      ".NET and PHP together (\\u002B and \\/)",
      json(`Basic ${PAIR}`).replaceAll("/", "\\/").replaceAll("+", "\\u002B"),
    ],
    ["encodeURIComponent", `{"echo":"${encodeURIComponent(`Basic ${PAIR}`)}"}`],
    [
      "encodeURIComponent, lowercase hex",
      `{"echo":"${encodeURIComponent(`Basic ${PAIR}`).replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase())}"}`,
    ],
    ["URLSearchParams", `echo?${new URLSearchParams({ authorization: `Basic ${PAIR}` })}`],
    // Go url.PathEscape keeps "+" and "=", escapes "/".
    ["Go url.PathEscape (%2F only)", `/echo/Basic%20${respell(PAIR, { "/": "%2F" })}`],
    // Python quote keeps "/", escapes "+" and "=".
    ["Python quote (%2B and %3D)", `/echo/Basic%20${respell(PAIR, { "+": "%2B", "=": "%3D" })}`],
    ["Go html/template (&#43;)", `<p>Basic ${respell(PAIR, { "+": "&#43;" })}</p>`],
    [
      "Go html/template, unquoted attribute (&#43; &#61;)",
      `<a title=Basic&#32;${respell(PAIR, { "+": "&#43;", "=": "&#61;" })}>`,
    ],
    [".NET HtmlEncoder (&#x2B;)", `<p>Basic ${respell(PAIR, { "+": "&#x2B;" })}</p>`],
    [
      "OWASP ESAPI (&#x2b; &#x2f; &#x3d;)",
      `<p>Basic&#x20;${respell(PAIR, { "+": "&#x2b;", "/": "&#x2f;", "=": "&#x3d;" })}</p>`,
    ],
    [
      "decimal references (&#43; &#47; &#61;)",
      `<p>${respell(PAIR, { "+": "&#43;", "/": "&#47;", "=": "&#61;" })}</p>`,
    ],
    [
      "PHP htmlentities ENT_HTML5 (&plus; &sol; &equals;)",
      `<p>${respell(PAIR, { "+": "&plus;", "/": "&sol;", "=": "&equals;" })}</p>`,
    ],
  ];

  it("the table's spellings really differ from each other", () => {
    expect(new Set(cases.map(([, body]) => body)).size).toBe(cases.length);
  });

  it.each(cases)("hides the pair's base64 written by %s", (_name, text) => {
    const redacted = redactAnswer(Buffer.from(text, "utf8")).toString("utf8");
    expect(redacted).toContain(REDACTED);
    expect(findDecodableLeaks(redacted)).toEqual([]);
    // The same as a redactor of every spelling, built for no answer in particular.
    expect(redacted).toBe(createRedactor([VALUE]).redactText(text));
  });

  it("hides the secret's own base64, and base64url padded, escaped", () => {
    const own = Buffer.from(SECRET, "utf8").toString("base64");
    const url = Buffer.from(SECRET, "utf8").toString("base64url").padEnd(own.length, "=");
    expect(own).toMatch(/[+/=]/);
    for (const text of [
      `{"k":"${own.replaceAll("/", "\\/")}"}`,
      `{"k":"${own.replaceAll("+", "\\u002B")}"}`,
      `k=${encodeURIComponent(own)}&z=1`,
      `<i>${respell(own, { "+": "&#43;", "/": "&#x2F;", "=": "&equals;" })}</i>`,
      `k=${url.replaceAll("=", "%3D")}&z=1`,
    ]) {
      const redacted = redactAnswer(Buffer.from(text, "utf8")).toString("utf8");
      expect(redacted, text).toContain(REDACTED);
      expect(findDecodableLeaks(redacted), text).toEqual([]);
    }
  });

  it("hides the secret inside a longer base64 text (a JWT-like payload) whose / PHP escaped", () => {
    for (let prefix = 0; prefix < 3; prefix++) {
      const payload = `${"p".repeat(prefix)}{"token":"${SECRET}","exp":1}`;
      const encoded = Buffer.from(payload, "utf8").toString("base64");
      const text = `{"dump":"${encoded.replaceAll("/", "\\/").replaceAll("+", "\\u002b")}"}`;
      const redacted = redactAnswer(Buffer.from(text, "utf8")).toString("utf8");
      expect(redacted, `prefix ${prefix}`).toContain(REDACTED);
      expect(findDecodableLeaks(redacted), `prefix ${prefix}`).toEqual([]);
    }
  });

  it("hides a percent-encoded pair split across two headers", () => {
    const encoded = encodeURIComponent(`Basic ${PAIR}`);
    const cut = encoded.indexOf("%2F") + 1;
    const headers = [
      { name: "link", value: encoded.slice(0, cut) },
      { name: "x-request-id", value: encoded.slice(cut) },
    ];
    const redactor = createRedactor([VALUE], {
      shape: answerShape(
        Buffer.from("{}"),
        headers.map((header) => header.value),
      ),
    });
    expect(redactor.redactHeaders(headers).map((header) => header.value)).toEqual([REDACTED, REDACTED]);
  });
});

describe("a body in UTF-16", () => {
  const utf16le = (text: string) => Buffer.from(text, "utf16le");
  const utf16be = (text: string) => Buffer.from(text, "utf16le").swap16();
  const BOM = "\ufeff";

  /** Printable ASCII secrets of every kind, from a fixed seed. */
  function generateSecrets(count: number): string[] {
    let state = 20261127;
    const next = () => {
      state = (state * 1664525 + 1013904223) >>> 0;
      return state / 2 ** 32;
    };
    return Array.from({ length: count }, () =>
      Array.from({ length: 6 + Math.floor(next() * 40) }, () =>
        String.fromCharCode(32 + Math.floor(next() * 95)),
      ).join(""),
    );
  }

  it.each([
    ["UTF-16LE", utf16le],
    ["UTF-16BE", utf16be],
    ["UTF-16LE with a BOM", (text: string) => utf16le(`${BOM}${text}`)],
    ["UTF-16BE with a BOM", (text: string) => utf16be(`${BOM}${text}`)],
  ])('hides {"token":secret} in %s, for any secret', (_name, encode) => {
    for (const secret of [SECRET, ...generateSecrets(200)]) {
      const body = encode(JSON.stringify({ token: secret, n: 1 }));
      const read = asAgentReads(redactAnswer(body, [{ secret }]));
      // A BOM reads as two U+FFFD in UTF-8; the rest is the JSON with the secret hidden.
      expect(read.replace(/^\ufffd\ufffd/, ""), JSON.stringify(secret)).toBe(`{"token":"${REDACTED}","n":1}`);
    }
  });

  it("keeps the rest of a UTF-16 body as the agent reads it", () => {
    const body = utf16le(`{"token":"${SECRET}","after":"still here"}`);
    expect(asAgentReads(redactAnswer(body))).toBe(`{"token":"${REDACTED}","after":"still here"}`);
  });

  it("hides a secret JSON-escaped inside UTF-16 text", () => {
    const secret = 'pa"ss\\wo/rd<&>+1';
    for (const escaped of [
      JSON.stringify(secret),
      JSON.stringify(secret).replaceAll("/", "\\/"),
      JSON.stringify(secret).replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`),
    ]) {
      for (const body of [utf16le(`{"token":${escaped}}`), utf16be(`{"token":${escaped}}`)]) {
        expect(asAgentReads(redactAnswer(body, [{ secret }])), escaped).toBe(`{"token":"${REDACTED}"}`);
      }
    }
  });

  it("hides the echoed Authorization header, plain and PHP-escaped, in UTF-16", () => {
    for (const text of [
      JSON.stringify({ authorization: `Basic ${PAIR}` }),
      JSON.stringify({ authorization: `Basic ${PAIR}` }).replaceAll("/", "\\/"),
    ]) {
      for (const body of [utf16le(text), utf16be(text)]) {
        expect(asAgentReads(redactAnswer(body)), text).toBe(`{"authorization":"Basic ${REDACTED}"}`);
      }
    }
  });

  it("hides a secret whose UTF-16 holds no NUL, in an answer that holds none either", () => {
    const secret = "密钥甲乙丙丁戊己";
    const body = utf16le(`${secret}`);
    expect(body.includes(0)).toBe(false);
    expect(redactAnswer(body, [{ secret }]).toString("latin1")).toBe(REDACTED);
  });

  it("finds the secret wherever the origin's chunks split it: the whole body is redacted", () => {
    const body = utf16le(`{"token":"${SECRET}"}`);
    const start = body.indexOf(utf16le(SECRET));
    for (let cut = start; cut <= start + 2 * SECRET.length; cut++) {
      const assembled = Buffer.concat([
        body.subarray(0, cut),
        body.subarray(cut, cut + 3),
        body.subarray(cut + 3),
      ]);
      expect(asAgentReads(redactAnswer(assembled)), `cut ${cut}`).toBe(`{"token":"${REDACTED}"}`);
    }
  });
});

describe("what an answer without the markers pays", () => {
  const plainJson = Buffer.from(
    `{"object":"list","data":[{"id":"item_0001","url":"https://api.example.com/v1/items/1"}]}`,
  );

  it("lists no escaped base64 and no UTF-16 spelling for an answer without \\, %, & or NUL", () => {
    const listed = listSecretEncodings(VALUE, answerShape(plainJson, ["application/json"]));
    expect(listed.filter((spelling) => /[\\%&\0]/.test(spelling.toString("latin1")))).toEqual([]);
  });

  it("lists no escaped base64 when the escapes' markers lie outside any run long enough", () => {
    // "&", "%" and "\\" in short fields: no run of base64 characters and escapes holds a pair.
    const body = Buffer.from(`{"q":"a=1&b=%2C","note":"x\\ny","id":"item_0001"}`);
    const shape = answerShape(body, ["application/json"]);
    expect(shape.longestEscapedBase64Run).toBeLessThan(PAIR.length);
    const listed = listSecretEncodings(VALUE, shape).map((spelling) => spelling.toString("latin1"));
    expect(
      listed.filter((spelling) => /^[A-Za-z0-9]/.test(spelling) && /%2b|\\u002b|&#/.test(spelling)),
    ).toEqual([]);
  });

  it("lists escaped base64 only with its family's marker, and UTF-16 only with a NUL", () => {
    const listedFor = (text: string) =>
      listSecretEncodings(VALUE, answerShape(Buffer.from(`${text}${"A".repeat(200)}`, "latin1"), [])).map(
        (b) => b.toString("latin1"),
      );
    const hasEscapedPair = (listed: string[], written: string) =>
      listed.some((spelling) => spelling.startsWith(PAIR.slice(0, 10)) && spelling.includes(written));
    expect(hasEscapedPair(listedFor("\\"), "\\u002b")).toBe(true);
    expect(hasEscapedPair(listedFor("\\"), "%2b")).toBe(false);
    expect(hasEscapedPair(listedFor("%"), "%2b")).toBe(true);
    expect(hasEscapedPair(listedFor("%"), "&#43;")).toBe(false);
    expect(hasEscapedPair(listedFor("&"), "&#43;")).toBe(true);
    expect(listedFor("\\").some((spelling) => spelling.includes("\0"))).toBe(false);
    expect(
      listedFor("\0").some((spelling) => spelling === Buffer.from(SECRET, "utf16le").toString("latin1")),
    ).toBe(true);
  });
});

describe("listEscapedBase64", () => {
  it("writes each character one way throughout, every combination but the literal one", () => {
    const [jsonFamily, urlFamily] = BASE64_ESCAPE_FAMILIES;
    expect(listEscapedBase64("a+b+c/d=", urlFamily!).sort()).toEqual(
      [
        "a%2bb%2bc/d=",
        "a+b+c%2fd=",
        "a+b+c/d%3d",
        "a%2bb%2bc%2fd=",
        "a%2bb%2bc/d%3d",
        "a+b+c%2fd%3d",
        "a%2bb%2bc%2fd%3d",
      ].sort(),
    );
    // "/" has two JSON escapes: 3 x 2 - 1 combinations, and "\/" is never escaped again.
    expect(listEscapedBase64("a+b/c", jsonFamily!).sort()).toEqual(
      ["a\\u002bb/c", "a+b\\/c", "a+b\\u002fc", "a\\u002bb\\/c", "a\\u002bb\\u002fc"].sort(),
    );
    expect(listEscapedBase64("abc", urlFamily!)).toEqual([]);
  });
});

describe("a body in UTF-32", () => {
  const utf32le = (text: string) => {
    const units = Buffer.alloc(4 * text.length);
    let length = 0;
    for (const character of text) {
      units.writeUInt32LE(character.codePointAt(0)!, length);
      length += 4;
    }
    return units.subarray(0, length);
  };
  const utf32be = (text: string) => Buffer.from(utf32le(text)).swap32();

  it.each([
    ["UTF-32LE", utf32le],
    ["UTF-32BE", utf32be],
    ["UTF-32LE with a BOM", (text: string) => utf32le(`\ufeff${text}`)],
  ])("hides the secret, JSON-escaped or not, and the Basic pair in %s", (_name, encode) => {
    const escaped = 'pa"ss\\wo/rd<&>+1';
    for (const [text, values] of [
      [JSON.stringify({ token: SECRET, n: 1 }), [VALUE]],
      [JSON.stringify({ authorization: `Basic ${PAIR}`, n: 1 }), [VALUE]],
      [JSON.stringify({ token: escaped, n: 1 }), [{ secret: escaped }]],
    ] as const) {
      const read = asAgentReads(redactAnswer(encode(text), values));
      expect(read, text).not.toContain(SECRET);
      expect(read, text).not.toContain(PAIR);
      expect(read, text).not.toContain(JSON.stringify(escaped).slice(1, -1));
      expect(read, text).toContain(REDACTED);
      expect(read, text).toContain('"n":1');
    }
  });
});

describe("a query-injected credential echoed inside another URL", () => {
  // An AWS-style secret: "/", "+" and "=" are what its URL spellings escape.
  const KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCY==";
  // The request line as inject.ts writes it for query:api_key.
  const sent = `/v1/things?limit=5&api_key=${encodeURIComponent(KEY)}`;
  const cases: [string, string][] = [
    [
      "a login link's next= (encodeURIComponent of the request URL)",
      JSON.stringify({
        error: "unauthorized",
        login: `https://api.example.com/login?next=${encodeURIComponent(sent)}`,
      }),
    ],
    [
      "an HTML return_to (WHATWG form)",
      `<a href="/login?${new URLSearchParams({ return_to: sent })}">Sign in</a>`,
    ],
    ["Python quote(safe='/')", `next=${encodeURIComponent(sent).replaceAll("%2F", "/")}`],
    [
      "encodeURI keeps it literal, a query value then encodes it once",
      `u=${encodeURIComponent(encodeURI(`/v1/x?api_key=${KEY}`))}`,
    ],
  ];

  it.each(cases)("hides it: %s", (_name, text) => {
    const body = Buffer.from(text);
    // Each case holds the key encoded twice, and nothing decodes it in one step.
    expect(decodeURIComponent(decodeURIComponent(text.replaceAll("+", " ")))).toContain(KEY);
    const shown = redactAnswer(body, [{ secret: KEY }]).toString();
    expect(shown).toContain(REDACTED);
    for (let decoded = shown, round = 0; round < 3; round++) {
      expect(decoded).not.toContain(KEY);
      expect(decoded).not.toContain("K7MDENG/bPx");
      expect(decoded).not.toContain("K7MDENG+bPx");
      decoded = decodeURIComponent(decoded);
    }
  });
});
