import { describe, expect, it } from "vitest";
import { readJsonLineBreaks } from "./json-line-breaks.ts";
import { answerShape, createRedactor, REDACTED } from "./redactor.ts";

// Base64 or hex wrapped inside a JSON string: each break is the two-byte escape "\n" (or "\r\n",
// "\u000a"), not a raw line break. GitHub's contents API answers a file this way, 60 columns a
// line; a file holding the agent's own token must not come back with the token decodable.

const SECRET = "ghp_Zq3xLw8NvR2mKp5tYb7cHd1fJg4sWe6uTa9o";
const read = (text: string) =>
  Buffer.from(readJsonLineBreaks(Buffer.from(text, "latin1"))).toString("latin1");

/** `text` cut every `width` characters, the lines joined by `eol`, and one more `eol` at the end. */
const wrap = (text: string, width: number, eol: string) =>
  `${(text.match(new RegExp(`.{1,${width}}`, "g")) ?? []).join(eol)}${eol}`;

/** The file GitHub would hold: `prefix` bytes before the token move where every break falls in it. */
const fileWithToken = (prefix: number) =>
  Buffer.from(`${"#".repeat(prefix)}\nenv:\n  GITHUB_TOKEN: ${SECRET}\n  region: eu\n`, "utf8");

/** The answer's JSON text, its content's line breaks written as `writeBreak` spells them. */
function contentsAnswer(content: string, writeBreak: (json: string) => string): Buffer {
  const json = JSON.stringify({
    name: "deploy.yml",
    path: ".github/deploy.yml",
    encoding: "base64",
    content,
  });
  return Buffer.from(writeBreak(json), "latin1");
}

/** Every 8-byte piece of the token that some decoding of the text left between redactions shows. */
function findLeakedPieces(text: string, decode: (segment: string) => string[]): string[] {
  const leaked: string[] = [];
  for (const segment of text.replace(/[\r\n]/g, "").split(REDACTED)) {
    for (const decoded of decode(segment)) {
      for (let at = 0; at + 8 <= SECRET.length; at++) {
        if (decoded.includes(SECRET.slice(at, at + 8))) leaked.push(SECRET.slice(at, at + 8));
      }
    }
  }
  return leaked;
}
const decodeBase64 = (segment: string) =>
  [0, 1, 2, 3].map((skip) => Buffer.from(segment.slice(skip), "base64").toString("latin1"));
const decodeHex = (segment: string) =>
  [0, 1].map((skip) => Buffer.from(segment.slice(skip).replace(/[^0-9a-f]/gi, ""), "hex").toString("latin1"));

/** Redacts `body` as the proxy does (a redactor built for this answer), and parses the result. */
function redactAnswer(body: Buffer): { text: string; content: string } {
  const redactor = createRedactor([{ secret: SECRET }], {
    shape: answerShape(body, ["application/json; charset=utf-8"]),
  });
  const text = redactor.redactBytes(body).toString("latin1");
  redactor.dispose();
  // Still JSON: no escape was cut in half.
  const parsed = JSON.parse(text) as { content: string };
  return { text, content: parsed.content };
}

// How the encoders write the breaks of the wrapped content inside the JSON string.
const BREAKS = [
  ["\\n (JSON.stringify, GitHub)", "\n", (json: string) => json],
  ["\\r\\n", "\r\n", (json: string) => json],
  ["\\u000a", "\n", (json: string) => json.replaceAll("\\n", "\\u000a")],
  [
    "\\u000D\\u000A",
    "\r\n",
    (json: string) => json.replaceAll("\\r", "\\u000D").replaceAll("\\n", "\\u000A"),
  ],
] as const;

describe("base64 wrapped inside a JSON string (GitHub's contents API)", () => {
  it.each(
    [60, 64, 76].flatMap((width) => BREAKS.map(([name, eol, write]) => [width, name, eol, write] as const)),
  )("hides the token at every offset of a %i-column wrap with %s escapes", (width, _name, eol, write) => {
    // 3 * width prefixes: every alignment of the token's bytes at every column of the wrap.
    for (let prefix = 0; prefix < 3 * width; prefix++) {
      const content = wrap(fileWithToken(prefix).toString("base64"), width, eol);
      const { text, content: redacted } = redactAnswer(contentsAnswer(content, write));
      expect(redacted, `prefix ${prefix}`).toContain(REDACTED);
      expect(findLeakedPieces(redacted, decodeBase64), `prefix ${prefix}`).toEqual([]);
      // The rest of the answer is as it was.
      expect(JSON.parse(text).name).toBe("deploy.yml");
    }
  });

  it.each(
    [60, 64].flatMap((width) => BREAKS.map(([name, eol, write]) => [width, name, eol, write] as const)),
  )(
    "hides the token in hex wrapped at %i columns with %s escapes, at every offset",
    (width, _name, eol, write) => {
      for (let prefix = 0; prefix < width; prefix++) {
        const content = wrap(fileWithToken(prefix).toString("hex"), width, eol);
        const { content: redacted } = redactAnswer(contentsAnswer(content, write));
        expect(redacted, `prefix ${prefix}`).toContain(REDACTED);
        expect(findLeakedPieces(redacted, decodeHex), `prefix ${prefix}`).toEqual([]);
      }
    },
  );

  it("keeps the breaks outside the token and the base64 around it", () => {
    const content = wrap(fileWithToken(7).toString("base64"), 60, "\n");
    const { content: redacted } = redactAnswer(contentsAnswer(content, (json) => json));
    const [before, after] = redacted.split(REDACTED);
    expect(content.startsWith(before!)).toBe(true);
    expect(content.endsWith(after!)).toBe(true);
  });

  it("hides the token's own base64 split by an escaped break in a header value too", () => {
    const encoded = Buffer.from(SECRET).toString("base64");
    const redactor = createRedactor([{ secret: SECRET }]);
    for (let at = 1; at < encoded.length; at++) {
      const value = `x ${encoded.slice(0, at)}\\r\\n${encoded.slice(at)} y`;
      expect(redactor.redactText(value), `break after ${at}`).toBe(`x ${REDACTED} y`);
    }
  });
});

describe("an escaped backslash before an n is not a line break", () => {
  it("hides a token that begins with n after an escaped backslash (a Windows path)", () => {
    // The JSON text holds "\\n...": the backslash is escaped, the n is the token's first letter.
    const secret = "nT0k3n_0123456789abcdefghijklmnop";
    const body = Buffer.from(JSON.stringify({ path: `C:\\${secret}` }));
    expect(body.toString()).toContain("\\\\nT0k3n");
    const redactor = createRedactor([{ secret }], { shape: answerShape(body, []) });
    const text = redactor.redactBytes(body).toString();
    expect(JSON.parse(text)).toEqual({ path: `C:\\${REDACTED}` });
  });

  it("does not join two halves of a token across a backslash and an n", () => {
    // The value is half of the base64, a backslash, the letter n, the other half: no token.
    const encoded = Buffer.from(SECRET).toString("base64");
    const half = encoded.length / 2;
    const body = Buffer.from(JSON.stringify({ v: `${encoded.slice(0, half)}\\n${encoded.slice(half)}` }));
    const redactor = createRedactor([{ secret: SECRET }], { shape: answerShape(body, []) });
    expect(redactor.redactBytes(body).toString()).toBe(body.toString());
  });

  it("reads \\\\n as a backslash and an n, and \\\\\\n as a backslash and a break", () => {
    expect(read("a\\\\nb")).toBe("a\\\\nb");
    expect(read("a\\\\\\nb")).toBe("a\\\\\n\nb");
  });
});

describe("readJsonLineBreaks", () => {
  it("writes each escaped line break as LF bytes, one per byte, and keeps every other byte", () => {
    expect(read('"ab\\ncd\\r\\nef"')).toBe('"ab\n\ncd\n\n\n\nef"');
    expect(read("a\\u000ab\\u000Dc\\u000Ad")).toBe("a\n\n\n\n\n\nb\n\n\n\n\n\nc\n\n\n\n\n\nd");
    // Other escapes, and escapes of other control characters, stay.
    expect(read('a\\"b\\/c\\u0041d\\u000be\\tf\\u00aa')).toBe('a\\"b\\/c\\u0041d\\u000be\\tf\\u00aa');
    // An escape cut short at the end of the text stays.
    expect(read("a\\u000")).toBe("a\\u000");
    expect(read("a\\")).toBe("a\\");
  });

  it("returns the bytes themselves when there is nothing to read, and never writes to them", () => {
    const plain = Buffer.from('{"a":"b\\"c"}');
    expect(readJsonLineBreaks(plain)).toBe(plain);
    const escaped = Buffer.from('{"a":"b\\nc"}');
    const copy = Buffer.from(escaped);
    expect(readJsonLineBreaks(escaped)).not.toBe(escaped);
    expect(escaped.equals(copy)).toBe(true);
  });
});
