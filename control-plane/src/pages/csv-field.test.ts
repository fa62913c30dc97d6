// The audit export's CSV field (public/assets/csv-field.js), run as the browser runs it.
import { readFileSync } from "node:fs";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";

const csvField = runInNewContext(
  `${readFileSync(new URL("../../public/assets/csv-field.js", import.meta.url), "utf8")}; csvField`,
  {},
) as (value: unknown) => string;

describe("csvField (OWASP CSV injection)", () => {
  it.each([
    ["=1+1", `"'=1+1"`],
    ["+1", `"'+1"`],
    ["-1", `"'-1"`],
    ["@SUM(A1)", `"'@SUM(A1)"`],
    [" =HYPERLINK(1)", `"' =HYPERLINK(1)"`],
    ["\t=1", `"'\t=1"`],
    ["\r=1", `"'\r=1"`],
    ["\n=1", `"'\n=1"`],
    [" \t\n @x", `"' \t\n @x"`],
    ["\tplain", `"'\tplain"`],
  ])("prefixes a formula: %j", (value, field) => {
    expect(csvField(value)).toBe(field);
  });

  it.each([
    ["plain", "plain"],
    ["a,b", `"a,b"`],
    ['say "hi"', `"say ""hi"""`],
    ["x = 1", "x = 1"],
    ["  spaced", "  spaced"],
    [null, ""],
    [{ a: 1 }, `"{""a"":1}"`],
  ])("leaves other text as it is (quoted where CSV needs it): %j", (value, field) => {
    expect(csvField(value)).toBe(field);
  });
});
