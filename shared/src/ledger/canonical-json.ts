// RFC 8785 (JSON Canonicalization Scheme): the one byte string a ledger row or checkpoint is hashed
// and signed as, so that a third party recomputes it from the export with any JCS library.
// Object members sorted by their names' UTF-16 code units, no whitespace, strings and numbers as
// ECMAScript's JSON.stringify writes them (RFC 8785 3.2.2.2 and 3.2.2.3 are defined that way).

/** A value JCS can write: JSON's, with finite numbers only. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * The canonical JSON text of `value`. Refuses what JCS refuses: a number that is not finite, a
 * string with an unpaired surrogate (RFC 8785 3.2.2.2: no such string has one canonical form), and
 * anything that is not JSON (undefined, a function, a bigint).
 * @example canonicalJson({ b: [1, "é"], a: null }) // '{"a":null,"b":[1,"é"]}'
 */
export function canonicalJson(value: unknown): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new TypeError("JCS has no form for a number that is not finite");
      // ECMAScript's Number-to-string: -0 is "0", 1e21 is "1e+21", 0.1 + 0.2 is "0.30000000000000004".
      return JSON.stringify(value);
    case "string":
      if (!value.isWellFormed())
        throw new TypeError("JCS has no form for a string with an unpaired surrogate");
      return JSON.stringify(value);
    case "object": {
      if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
      const members = Object.keys(value)
        .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
        // Array.prototype.sort compares UTF-16 code units, which is JCS's order (3.2.3).
        .sort()
        .map((key) => `${canonicalJson(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
      return `{${members.join(",")}}`;
    }
    default:
      throw new TypeError(`JCS has no form for a ${typeof value}`);
  }
}
