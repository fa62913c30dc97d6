// RFC 8785's own examples, and the ledger's test vector as ARCHITECTURE.md writes it down (read
// from that file, so the document a third party follows cannot drift from the code).
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "./canonical-json.ts";
import { canonicalTemplate, rowHash } from "./ledger-format.ts";

describe("canonicalJson (RFC 8785)", () => {
  it("writes RFC 8785 3.2.2's example exactly", () => {
    const input = JSON.parse(
      '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}',
    );
    expect(canonicalJson(input)).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  it("sorts members by UTF-16 code units (RFC 8785 3.2.3)", () => {
    const input = {
      "\u20ac": "Euro",
      "\r": "CR",
      "\ufb33": "Hebrew",
      "1": "One",
      "\u{1F600}": "Emoji",
      "\u0080": "Control",
      "\u00f6": "Latin",
    };
    expect([...canonicalJson(input).matchAll(/:"([A-Za-z]+)"/g)].map((m) => m[1])).toEqual([
      "CR",
      "One",
      "Control",
      "Latin",
      "Euro",
      "Emoji",
      "Hebrew",
    ]);
  });

  it("writes numbers as ECMAScript does and refuses what JCS cannot write", () => {
    expect(canonicalJson([-0, 1e21, 5e-324, 0.1 + 0.2, 100])).toBe(
      "[0,1e+21,5e-324,0.30000000000000004,100]",
    );
    expect(() => canonicalJson(Number.NaN)).toThrow(TypeError);
    expect(() => canonicalJson(Number.POSITIVE_INFINITY)).toThrow(TypeError);
    expect(() => canonicalJson("lone \ud800")).toThrow(TypeError);
    expect(() => canonicalJson(10n)).toThrow(TypeError);
  });

  it("builds the template the database fills in: literals and holes give the canonical text", () => {
    const row = { b: "x", a: 1, seq: 7, at: "t", prev_hash: "p", z: { y: [1] } };
    const { literals, holes } = canonicalTemplate(row, ["at", "prev_hash", "seq"] as const);
    expect(holes).toEqual(["at", "prev_hash", "seq"]);
    const filled = literals
      .map((literal, i) => literal + (holes[i] ? canonicalJson(row[holes[i]!]) : ""))
      .join("");
    expect(filled).toBe(canonicalJson(row));
  });
});

describe("the ledger's test vector in ARCHITECTURE.md", () => {
  const doc = readFileSync(new URL("../../../ARCHITECTURE.md", import.meta.url), "utf8");
  const after = (marker: string) => {
    const rest = doc.slice(doc.indexOf(`<!-- ledger-vector:${marker} -->`));
    return /```json\n(.*)\n```|`([0-9a-f]{64})`/.exec(rest)!.slice(1).find(Boolean)!;
  };

  it("recomputes to the canonical text and hash written there", () => {
    const row = JSON.parse(after("row"));
    expect(canonicalJson(row)).toBe(after("canonical"));
    expect(createHash("sha256").update(after("canonical"), "utf8").digest("hex")).toBe(after("hash"));
    expect(rowHash(row)).toBe(after("hash"));
  });
});
