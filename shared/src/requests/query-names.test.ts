import { describe, expect, it } from "vitest";
import { readsAsQueryName } from "./query-names.ts";

describe("readsAsQueryName", () => {
  it.each([
    ["api_key=mine", true],
    ["API%5FKEY=mine", true],
    ["api_key[]=mine", true],
    ["api_key%00=mine", true],
    // Origins that fold case by uppercasing (Java equalsIgnoreCase, Python .upper()) read these
    // as API_KEY: a dotless i (U+0131) and a long s (U+017F) uppercase to I and S.
    ["ap%C4%B1_key=mine", true],
    ["api_key%C4%B1=mine", false],
    ["%C5%BFecret=mine", true],
    ["ap%C4%B1_key[x]=mine", true],
    ["api_keys=mine", false],
    ["apikey=mine", false],
  ])("%s reads as api_key or secret: %s", (pair, expected) => {
    expect(readsAsQueryName(pair, "api_key") || readsAsQueryName(pair, "secret")).toBe(expected);
  });

  it("reads ß as the ss it uppercases to", () => {
    expect(readsAsQueryName("stra%C3%9Fe=1", "strasse")).toBe(true);
  });
});
