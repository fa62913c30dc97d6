// What an operator reads of a body: exactly the bytes that will be sent, laid out, never re-parsed
// into other values; cut at 64 KiB on a character boundary; hidden characters made visible.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { bodyExcerpt, indentJson, keepBody, MAX_KEPT_BODY_BYTES, viewBody } from "./request-body.ts";

const sha = (text: string) => createHash("sha256").update(text).digest("hex");
const view = (text: string, contentType = "application/json") =>
  viewBody(keepBody(Buffer.from(text, "utf8"), contentType), sha(text));

describe("indentJson", () => {
  it("lays JSON out one value per line, two spaces a level, with empty containers kept short", () => {
    expect(indentJson('{"title":"Ship it","labels":["release"],"meta":{},"list":[]}')).toBe(
      '{\n  "title": "Ship it",\n  "labels": [\n    "release"\n  ],\n  "meta": {},\n  "list": []\n}',
    );
    expect(indentJson("42")).toBe("42");
  });

  it("keeps every token as written: big numbers, escapes, repeated keys, braces inside strings", () => {
    // A parse-and-print would round the number, decode the escape and drop the first "amount".
    const text = '{"amount":1,"amount":12345678901234567890,"note":"a\\"},{\\u0041[","x":1e400}';
    expect(indentJson(text)).toBe(
      '{\n  "amount": 1,\n  "amount": 12345678901234567890,\n  "note": "a\\"},{\\u0041[",\n  "x": 1e400\n}',
    );
  });

  it("refuses what is not one JSON value, and stops indenting past 16 levels", () => {
    expect(indentJson('{"a":')).toBeUndefined();
    expect(indentJson("{} {}")).toBeUndefined();
    const deep = `${"[".repeat(40)}1${"]".repeat(40)}`;
    const lines = indentJson(deep)!.split("\n");
    expect(Math.max(...lines.map((line) => line.length - line.trimStart().length))).toBe(32);
  });

  it("falls back (undefined) when laying out would blow a small body up past its bound", () => {
    // 16 levels deep, then 20,000 one-character values: 34 characters a line, far over 128 KiB.
    const wide = `${"[".repeat(16)}${Array(20_000).fill(1).join(",")}${"]".repeat(16)}`;
    expect(indentJson(wide)).toBeUndefined();
    expect(view(wide).format).toBe("text");
    expect(view(wide).text).toBe(wide);
  });
});

describe("keepBody and viewBody", () => {
  it("shows JSON indented with its digest and size", () => {
    const body = '{"title":"Ship it"}';
    expect(view(body)).toEqual({
      content_type: "application/json",
      size: body.length,
      is_cut: false,
      format: "json",
      text: '{\n  "title": "Ship it"\n}',
      fields: null,
      has_hidden_characters: false,
      sha256: sha(body),
    });
  });

  it("shows a form as its fields, decoded, in order, repeats included", () => {
    const shown = view("to=%2B15551234&body=Hello+there&to=x", "application/x-www-form-urlencoded");
    expect(shown.format).toBe("form");
    expect(shown.fields).toEqual([
      ["to", "+15551234"],
      ["body", "Hello there"],
      ["to", "x"],
    ]);
  });

  it("keeps the first 64 KiB, cut before a character's first byte, and says so", () => {
    const body = `"${"é".repeat(40_000)}"`; // 80,002 bytes: the 64 KiB mark falls inside an é
    const kept = keepBody(Buffer.from(body, "utf8"), "application/json");
    expect(kept.bytes).toBe(80_002);
    expect(Buffer.byteLength(kept.text, "utf8")).toBe(MAX_KEPT_BODY_BYTES - 1);
    expect(kept.text.endsWith("é")).toBe(true);
    const shown = viewBody(kept, sha(body));
    expect(shown).toMatchObject({ is_cut: true, format: "text", size: 80_002, sha256: sha(body) });
  });

  it("shows control and direction-override characters as U+FFFD and flags them", () => {
    const shown = view('{"to":"admin\u202e@evil\u2066"}');
    expect(shown.text).toContain("admin\uFFFD@evil\uFFFD");
    expect(shown.has_hidden_characters).toBe(true);
    const form = view("a=%E2%80%AEx%00", "application/x-www-form-urlencoded");
    expect(form.fields).toEqual([["a", "\uFFFDx\uFFFD"]]);
    expect(form.has_hidden_characters).toBe(true);
    expect(view('{"a":"b"}').has_hidden_characters).toBe(false);
  });

  it.each([
    ["a tag character (invisible ASCII)", "\u{E0041}\u{E0042}"],
    ["a zero-width space", "\u200b"],
    ["a zero-width joiner", "\u200d"],
    ["a word joiner", "\u2060"],
    ["a byte order mark", "\ufeff"],
    ["a left-to-right mark", "\u200e"],
    ["an Arabic letter mark", "\u061c"],
    ["a soft hyphen", "\u00ad"],
    ["a variation selector that carries data", "\ufe01"],
    ["a supplementary variation selector", "\u{e0101}"],
    ["a line separator (a mail client may break the line there)", "\u2028"],
    ["a paragraph separator", "\u2029"],
  ])("flags %s and shows it as U+FFFD", (_name, hidden) => {
    const shown = view(JSON.stringify({ text: `Deploy done${hidden}` }));
    expect(shown.has_hidden_characters).toBe(true);
    expect(shown.text).toContain("Deploy done\uFFFD");
    expect(shown.text).not.toContain(hidden);
  });

  it("leaves visible non-ASCII text alone", () => {
    expect(view(JSON.stringify({ text: "café, 東京, 🙂, ❤️, עברית" })).has_hidden_characters).toBe(false);
  });

  it("keeps markup as text: the view is data, each page writes it as a text node", () => {
    const shown = view('{"html":"<img src=x onerror=alert(1)>"}');
    expect(shown.text).toContain("<img src=x onerror=alert(1)>");
  });
});

describe("bodyExcerpt", () => {
  it("cuts the formatted body at the limit and says it did", () => {
    const shown = view(JSON.stringify({ text: "x".repeat(3000) }));
    const excerpt = bodyExcerpt(shown, 2048);
    expect(excerpt.isShortened).toBe(true);
    expect(excerpt.lines.join("\n").length).toBe(2048);
    expect(bodyExcerpt(view('{"a":1}'), 2048)).toEqual({ lines: ["{", '  "a": 1', "}"], isShortened: false });
  });

  it("writes form fields as name: value lines", () => {
    expect(bodyExcerpt(view("a=1&b=two", "application/x-www-form-urlencoded"), 2048).lines).toEqual([
      "a: 1",
      "b: two",
    ]);
  });
});
