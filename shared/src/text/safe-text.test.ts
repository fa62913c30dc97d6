// The text rule both tiers apply to what agents and people type.
import { describe, expect, it } from "vitest";
import { toSafeJson, toSafeText, unsafeTextReason } from "./safe-text.ts";

describe("unsafeTextReason", () => {
  const rows: [string, boolean, string | undefined][] = [
    ["plain name", false, undefined],
    ["émoji 😀 ok", false, undefined],
    ["x\u0000y", false, "nul"],
    ["x\u0000y", true, "nul"],
    ["\ud800", false, "unpaired_surrogate"],
    ["a\udc00b", false, "unpaired_surrogate"],
    ["\ud83d\ude00", false, undefined],
    ["\ud83d\ud83d\ude00", false, "unpaired_surrogate"],
    ["line\nbreak", false, "control_character"],
    ["line\nbreak\tand tab\r\n", true, undefined],
    ["bell\u0007", true, "control_character"],
    ["esc\u001b[31m", true, "control_character"],
    ["del\u007f", false, "control_character"],
    ["c1\u0085", true, "control_character"],
  ];
  it.each(rows)("%j (multiline %s) -> %s", (text, multiline, reason) => {
    expect(unsafeTextReason(text, { multiline })).toBe(reason);
  });
});

describe("toSafeText", () => {
  it("replaces each unsafe character with U+FFFD and keeps the rest", () => {
    expect(toSafeText("x\u0000y\ud800z\ud83d\ude00")).toBe("x\uFFFDy\uFFFDz\ud83d\ude00");
    expect(toSafeText("a\nb", { multiline: true })).toBe("a\nb");
    expect(toSafeText("a\nb")).toBe("a\uFFFDb");
  });
  it("makes keys and nested strings of a JSON value safe", () => {
    expect(toSafeJson({ "k\u0000": ["\ud800", 1, null, { x: "ok" }] })).toEqual({
      "k\uFFFD": ["\uFFFD", 1, null, { x: "ok" }],
    });
  });
});
