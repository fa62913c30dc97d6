import { describe, expect, it } from "vitest";
import { createRedactor, REDACTED } from "./redactor.ts";

// Each family of spellings an origin may echo a credential in, written here with Node's own
// encoders (Buffer, encodeURIComponent, encodeURI, escape, URLSearchParams, JSON.stringify) and
// small transforms of their output that follow each language's documentation, never with the
// code under test. Every spelling must leave neither the body nor a header.

// Characters the encoders treat differently: URL-reserved and sub-delims, "~" and "*" (PHP vs
// RFC 3986 vs WHATWG), "!'()" (encodeURIComponent vs the rest), "/" (Python's safe, JSON's "\/"),
// "<>&'\"" (HTML, Go and PHP JSON), "+" and space (forms), "=" (Gson), non-ASCII in and beyond
// the BMP.
const SECRET = "s3cr/et+K ey~!'()*<&>\"\\=$,;:@?#[]é€😀zZ9x";
const USER = "acct_42";

const utf8 = (text: string) => Buffer.from(text, "utf8");
const percent = (char: string) =>
  [...utf8(char)].map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, "0")}`).join("");
/** Writes `chars` percent-encoded in an encodeURIComponent-style text (they are never in an escape). */
const escapeAlso = (text: string, chars: string) =>
  [...chars].reduce((result, char) => result.replaceAll(char, percent(char)), text);
/** Writes `chars` literally again in a percent-encoded text. */
const keepLiteral = (text: string, chars: string) =>
  [...chars].reduce((result, char) => result.replaceAll(percent(char), char), text);
const lowerEscapes = (text: string) => text.replace(/%[0-9A-F]{2}/g, (sequence) => sequence.toLowerCase());
/** Alternates the case of each escape's hex digits, as no encoder does but a hand-written one may. */
const mixEscapes = (text: string) => {
  let n = 0;
  return text.replace(/(%|\\u|&#x)([0-9a-fA-F]+)/g, (_all, lead: string, hex: string) =>
    n++ % 2 === 0 ? `${lead}${hex.toUpperCase()}` : `${lead}${hex.toLowerCase()}`,
  );
};
const component = (text: string) => encodeURIComponent(text);
const whatwgForm = (text: string) => new URLSearchParams({ k: text }).toString().slice(2);

/** The UTF-8 bytes as hex, lowercase, pairs joined by `separator`. */
const hex = (text: string, separator: string) => utf8(text).toString("hex").match(/../g)!.join(separator);

/** \uXXXX of one UTF-16 code unit. */
const u = (char: string, upper = false) => {
  const code = char.charCodeAt(0).toString(16).padStart(4, "0");
  return `\\u${upper ? code.toUpperCase() : code}`;
};
const json = (text: string) => JSON.stringify(text).slice(1, -1);
/** Every character of `text` as \uXXXX (per UTF-16 unit: /./ without the u flag). */
const jsonEveryChar = (text: string, upper = false) => text.replace(/[\s\S]/g, (char) => u(char, upper));
const jsonAsciiOnly = (text: string, upper = false) =>
  text.replace(/[^\x00-\x7f]/g, (char) => u(char, upper));

const htmlDecimal = (text: string) => [...text].map((char) => `&#${char.codePointAt(0)};`).join("");
const htmlHex = (text: string, x: "x" | "X", upper: boolean) =>
  [...text]
    .map((char) => {
      const code = char.codePointAt(0)!.toString(16);
      return `&#${x}${upper ? code.toUpperCase() : code};`;
    })
    .join("");
const htmlEscape = (text: string, quote: string, apostrophe: string) =>
  text
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', quote)
    .replaceAll("'", apostrophe);
const nonAsciiAsDecimal = (text: string) =>
  text.replace(/[^\x00-\x7f]/gu, (char) => `&#${char.codePointAt(0)};`);

/** Every family, each spelling built without the code under test. */
function listIndependentSpellings(secret: string): [string, string][] {
  const form = component(secret).replaceAll("%20", "+");
  const rfc3986 = escapeAlso(component(secret), "!'()*");
  return [
    ["raw", secret],
    ["hex, lowercase", hex(secret, "")],
    ["hex, uppercase", hex(secret, "").toUpperCase()],
    ["hex, colon-separated", hex(secret, ":")],
    ["hex, colon-separated, uppercase", hex(secret, ":").toUpperCase()],
    ["hex, dash-separated", hex(secret, "-")],
    ["hex, space-separated, uppercase", hex(secret, " ").toUpperCase()],
    ["every byte percent-encoded", escapeEveryByte(secret)],
    ["every byte percent-encoded, lowercase", lowerEscapes(escapeEveryByte(secret))],
    ["every byte percent-encoded, mixed case", mixEscapes(escapeEveryByte(secret))],
    ["encodeURIComponent", component(secret)],
    ["encodeURIComponent, lowercase", lowerEscapes(component(secret))],
    ["encodeURIComponent, mixed case", mixEscapes(component(secret))],
    ["encodeURI", encodeURI(secret)],
    ["escape()", escape(secret)],
    ["URLSearchParams (WHATWG form), Java URLEncoder", whatwgForm(secret)],
    ["form encoding with + (encodeURIComponent)", form],
    ["Python quote (safe='/')", keepLiteral(rfc3986, "/")],
    ["Python quote_plus, Go url.QueryEscape", rfc3986.replaceAll("%20", "+")],
    ["PHP rawurlencode, .NET Uri.EscapeDataString", rfc3986],
    ["Go url.PathEscape", keepLiteral(rfc3986, "$&+:=@")],
    ["PHP urlencode", escapeAlso(component(secret), "!'()*~").replaceAll("%20", "+")],
    [".NET HttpUtility.UrlEncode (lowercase hex)", lowerEscapes(keepLiteral(whatwgForm(secret), "!()"))],
    ["JSON.stringify", json(secret)],
    ["JSON with \\/ (PHP)", json(secret).replaceAll("/", "\\/")],
    ["JSON, non-ASCII as \\u (Python ensure_ascii)", jsonAsciiOnly(json(secret))],
    ["JSON, non-ASCII as uppercase \\u (Jackson)", jsonAsciiOnly(json(secret), true)],
    ["JSON, <>& as \\u (Go encoding/json)", json(secret).replace(/[<>&\u2028\u2029]/g, (char) => u(char))],
    [
      "JSON, PHP json_encode with JSON_HEX_TAG|AMP|APOS|QUOT",
      jsonAsciiOnly(json(secret).replaceAll("/", "\\/"))
        .replaceAll('\\"', u('"', true))
        .replace(/[<>&']/g, (char) => u(char, true)),
    ],
    [
      "JSON, .NET System.Text.Json",
      jsonAsciiOnly(json(secret), true)
        .replaceAll('\\"', u('"', true))
        .replace(/[<>&'+`]/g, (char) => u(char, true)),
    ],
    ["JSON, Gson", json(secret).replace(/[<>&='\u2028\u2029]/g, (char) => u(char))],
    ["JSON, every character as \\u", jsonEveryChar(secret)],
    ["JSON, every character as uppercase \\u", jsonEveryChar(secret, true)],
    ["JSON, every character as \\u, mixed case", mixEscapes(jsonEveryChar(secret))],
    ["HTML, decimal references", htmlDecimal(secret)],
    ["HTML, hex references", htmlHex(secret, "x", false)],
    ["HTML, hex references, uppercase", htmlHex(secret, "X", true)],
    ["HTML, Python html.escape", htmlEscape(secret, "&quot;", "&#x27;")],
    ["HTML, Go html.EscapeString", htmlEscape(secret, "&#34;", "&#39;")],
    ["HTML, PHP htmlspecialchars", htmlEscape(secret, "&quot;", "&#039;")],
    ["HTML, XML / ENT_HTML5", htmlEscape(secret, "&quot;", "&apos;")],
    ["HTML, specials named, non-ASCII decimal", nonAsciiAsDecimal(htmlEscape(secret, "&quot;", "&#39;"))],
    ["base64", utf8(secret).toString("base64")],
    ["base64 without padding", utf8(secret).toString("base64").replace(/=+$/, "")],
    ["base64url", utf8(secret).toString("base64url")],
  ];
}

function escapeEveryByte(secret: string): string {
  return utf8(secret).toString("hex").toUpperCase().replace(/../g, "%$&");
}

describe("every family of spellings, built with independent encoders", () => {
  const redactor = createRedactor([{ secret: SECRET, username: USER }]);
  const spellings = listIndependentSpellings(SECRET);

  it("the table's spellings really differ from each other and from the secret", () => {
    expect(new Set(spellings.map(([, text]) => text)).size).toBe(spellings.length);
  });

  it.each(spellings)("hides the %s spelling in a body, UTF-8 or latin1", (_name, spelling) => {
    const body = Buffer.from(`{"echo":"${spelling}","n":1}`, "utf8");
    expect(redactor.redactBytes(body).toString("utf8")).toBe(`{"echo":"${REDACTED}","n":1}`);
    if (/^[\x00-\xff]*$/.test(spelling)) {
      const latin1 = Buffer.from(`<p>${spelling}</p>`, "latin1");
      expect(redactor.redactBytes(latin1).toString("latin1")).toBe(`<p>${REDACTED}</p>`);
    }
  });

  it.each(spellings)(
    "hides the %s spelling in a header, as text or as latin1 wire bytes",
    (_name, spelling) => {
      const asText = redactor.redactHeaders([{ name: "x-request-id", value: `id-${spelling}` }]);
      expect(asText).toEqual([{ name: "x-request-id", value: `id-${REDACTED}` }]);
      const wire = utf8(`id-${spelling}`).toString("latin1");
      expect(redactor.redactHeaders([{ name: "link", value: wire }])).toEqual([
        { name: "link", value: `id-${REDACTED}` },
      ]);
    },
  );

  it("reads hex in any case inside an escape, but keeps the secret's own letters exact", () => {
    const redact = (text: string) => createRedactor([{ secret: "tok" }]).redactText(text);
    expect(redact("a=%74%6F%6B;b=%74%6f%6b;c=%54%4F%4B")).toBe(`a=${REDACTED};b=${REDACTED};c=%54%4F%4B`);
    expect(redact("tok TOK Tok")).toBe(`${REDACTED} TOK Tok`);
  });
});

describe("MIME-wrapped base64", () => {
  const secret = "sk_live_wrapped_0123456789_abcdefghijklmnopqrstuvwxyz_ABCDEFGH";
  const redactor = createRedactor([{ secret }]);

  /** Lines of `width` characters joined by `eol`, as MIME (76) and PEM (64) encoders write them. */
  const wrap = (text: string, width: number, eol: string) =>
    (text.match(new RegExp(`.{1,${width}}`, "g")) ?? []).join(eol);

  /** Every piece of the secret of 8 bytes that some decoding of what is left shows. */
  function findLeakedPieces(redacted: string): string[] {
    const leaked: string[] = [];
    for (const segment of redacted.replace(/[\r\n]/g, "").split(REDACTED)) {
      for (let skip = 0; skip < 4; skip++) {
        const decoded = Buffer.from(segment.slice(skip), "base64").toString("latin1");
        for (let at = 0; at + 8 <= secret.length; at++) {
          if (decoded.includes(secret.slice(at, at + 8))) leaked.push(secret.slice(at, at + 8));
        }
      }
    }
    return leaked;
  }

  const cases = [64, 76].flatMap((width) =>
    ["\r\n", "\n"].flatMap((eol) =>
      (["base64", "base64url"] as const).map(
        (alphabet) => [width, JSON.stringify(eol), alphabet, eol] as const,
      ),
    ),
  );

  it.each(cases)(
    "hides the secret in a text wrapped at %i columns with %s, %s, whatever the prefix",
    (width, _eolName, alphabet, eol) => {
      // Every prefix length moves both the secret's byte alignment and where the breaks fall in it.
      for (let prefix = 0; prefix < 80; prefix++) {
        const payload = `${"p".repeat(prefix)}{"token":"${secret}","exp":1}`;
        const body = `Content-Transfer-Encoding: base64${eol}${eol}${wrap(utf8(payload).toString(alphabet), width, eol)}${eol}`;
        const redacted = redactor.redactBytes(Buffer.from(body, "latin1")).toString("latin1");
        expect(redacted, `prefix ${prefix}`).toContain(REDACTED);
        expect(findLeakedPieces(redacted.slice(redacted.indexOf(eol + eol))), `prefix ${prefix}`).toEqual([]);
      }
    },
  );

  it("hides the secret's own base64 when a line break falls anywhere inside it", () => {
    const encoded = utf8(secret).toString("base64");
    for (let at = 1; at < encoded.length; at++) {
      const body = `x ${encoded.slice(0, at)}\r\n${encoded.slice(at)} y`;
      expect(redactor.redactText(body), `break after ${at}`).toBe(`x ${REDACTED} y`);
    }
  });

  it("keeps the line breaks outside the secret", () => {
    const body = `line one\r\n${secret}\r\nline three\n`;
    expect(redactor.redactText(body)).toBe(`line one\r\n${REDACTED}\r\nline three\n`);
  });
});

describe("secrets the anchors cannot cut", () => {
  it("hides a secret that holds line breaks (a PEM key) raw, with CRLF for LF, and JSON-escaped", () => {
    const pem =
      "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ0xq1Yj0Lr8kZ3JcBHZ9fQ7\n-----END PRIVATE KEY-----\n";
    const redactor = createRedactor([{ secret: pem }]);
    // The scan does not read line breaks, raw or JSON-escaped, so the secret's final one stays:
    // it tells nothing (and the escape stays whole).
    expect(redactor.redactText(`a ${pem} b`)).toBe(`a ${REDACTED}\n b`);
    expect(redactor.redactText(`a ${pem.replaceAll("\n", "\r\n")} b`)).toBe(`a ${REDACTED}\r\n b`);
    expect(redactor.redactText(`{"key":"${json(pem)}"}`)).toBe(`{"key":"${REDACTED}\\n"}`);
  });

  it("hides a long periodic secret and every overlapping repetition of it", () => {
    const secret = "ab".repeat(40);
    const redactor = createRedactor([{ secret }]);
    expect(redactor.redactText(`x${"ab".repeat(100)}y`)).toBe(`x${REDACTED}y`);
    expect(redactor.redactText(`x${"ab".repeat(39)}y`)).toBe(`x${"ab".repeat(39)}y`);
    expect(redactor.redactText(`x${hex(secret, ":")}y`)).toBe(`x${REDACTED}y`);
  });

  it("leaves a near miss of a long spelling alone, however often it repeats", () => {
    const secret = "sk_live_0123456789abcdefghijklmnopqrstuvwxyz";
    const redactor = createRedactor([{ secret }]);
    const nearMiss = `${secret.slice(0, -1)}!`;
    const body = nearMiss.repeat(1000);
    expect(redactor.redactText(body)).toBe(body);
    expect(redactor.redactText(`${body}${secret}`)).toBe(`${body}${REDACTED}`);
  });
});

describe("generated secrets: no spelling survives", () => {
  const PRINTABLE = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).filter(
    (c) => c !== "|",
  );
  const POOL = [...PRINTABLE, ...PRINTABLE, "é", "ß", "€", "中", "😀", "\u2028", " ", " "];
  // Never in a spelling, so that each spelling is redacted on its own.
  const SEPARATOR = "\u0001|\u0001";

  function random(seed: number): () => number {
    let state = seed >>> 0;
    return () => {
      state = (state * 1664525 + 1013904223) >>> 0;
      return state / 2 ** 32;
    };
  }

  it("redacts every independent spelling of 300 generated secrets, in bodies and headers", () => {
    const next = random(7_2026_1123);
    for (let n = 0; n < 300; n++) {
      const length = 6 + Math.floor(next() * 30);
      const secret = Array.from({ length }, () => POOL[Math.floor(next() * POOL.length)]).join("");
      const redactor = createRedactor([{ secret }]);
      const spellings = listIndependentSpellings(secret).map(([, text]) => text);
      const body = spellings.join(SEPARATOR);
      const redacted = redactor.redactBytes(utf8(body)).toString("utf8");
      expect(redacted, JSON.stringify(secret)).toBe(spellings.map(() => REDACTED).join(SEPARATOR));
      for (const spelling of spellings) {
        if (/[\x00-\x1f\x7f]/.test(spelling)) continue; // never an allowed header value
        const wire = utf8(spelling).toString("latin1");
        expect(
          redactor.redactHeaders([{ name: "x-request-id", value: wire }]),
          JSON.stringify(secret),
        ).toEqual([{ name: "x-request-id", value: REDACTED }]);
      }
    }
  });
});
