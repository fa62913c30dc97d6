import { describe, expect, it } from "vitest";
import { describeTooDeep, findTooDeep, MAX_JSON_DEPTH } from "./json-depth.ts";

const nestedArrays = (depth: number): unknown => JSON.parse(`${"[".repeat(depth)}${"]".repeat(depth)}`);

describe("findTooDeep", () => {
  it("accepts exactly MAX_JSON_DEPTH levels and refuses one more", () => {
    expect(findTooDeep(nestedArrays(MAX_JSON_DEPTH))).toBeUndefined();
    expect(findTooDeep(nestedArrays(MAX_JSON_DEPTH + 1))).toBe("0.0.0.0");
  });

  it("names the first few keys on the way to the too-deep place", () => {
    expect(findTooDeep(JSON.parse('{"a":[[[1]]]}'), 3)).toBe("a.0.0");
    expect(findTooDeep({ params: { arguments: { body: { x: { y: {} } } } } }, 4)).toBe(
      "params.arguments.body.x",
    );
    expect(findTooDeep({ ok: [1, "two", null], deep: [[[]]] }, 3)).toBe("deep.0.0");
  });

  it("walks without recursion: a million levels is answered, not a stack overflow", () => {
    expect(findTooDeep(nestedArrays(1_000_000))).toBe("0.0.0.0");
  });

  it("leaves scalars and shallow values alone", () => {
    for (const value of [null, 1, "x", true, {}, [], { a: { b: [1, 2, { c: 3 }] } }]) {
      expect(findTooDeep(value)).toBeUndefined();
    }
  });

  it("says where, or what, in the message", () => {
    expect(describeTooDeep("allowed_hosts.0")).toBe(
      `allowed_hosts.0 nests deeper than ${MAX_JSON_DEPTH} levels`,
    );
    expect(describeTooDeep("", "the frame")).toBe(`the frame nests deeper than ${MAX_JSON_DEPTH} levels`);
  });
});

describe("the field path a refusal repeats", () => {
  it("is cut short, so a huge key name does not come back whole", async () => {
    const { checkJsonBody } = await import("./json-body.ts");
    const key = "k".repeat(100_000);
    expect(() => checkJsonBody({ [key]: "a\u0000b" })).toThrow(/^k{80}… contains a NUL character$/);
    expect(describeTooDeep(key)).toBe(`${"k".repeat(80)}… nests deeper than ${MAX_JSON_DEPTH} levels`);
    expect(describeTooDeep("items.0.name")).toBe(`items.0.name nests deeper than ${MAX_JSON_DEPTH} levels`);
  });
});
