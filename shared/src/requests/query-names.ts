// How an origin may read the names of a query string: the one rule the proxy's query inject (drop
// every caller pair it could read as the credential's parameter) and the SigV4 presign refusal
// (no caller pair it could read as X-Amz-Signature) both rely on.

/**
 * True when an origin could read the name of the `name=value` pair as `wanted` (lowercase):
 * - equal after `+` and percent-decoding, ignoring case (`KEY`, `k%65y`, `api%5Fkey`, and `ap%C4%B1_key`,
 *   whose dotless i uppercases to `I`): frameworks decode names and some fold case;
 * - or `wanted` followed by `[` (`key[]`, `key[a]`, `key%5b%5d`): PHP, Rack and `qs` parse these
 *   into `key` itself (a list or a map), so the agent's value lands beside or instead of ours;
 * - or `wanted` followed by NUL (`key%00`): C-string parsers stop at the NUL and see `key`.
 * A name that is not valid UTF-8 once decoded fails closed: it matches when its bytes start with
 * `wanted`, since a lenient decoder may drop or replace whatever follows.
 *
 * @example readsAsQueryName("API%5FKEY=mine", "api_key") // true
 */
export function readsAsQueryName(pair: string, wanted: string): boolean {
  const equals = pair.indexOf("=");
  const raw = (equals === -1 ? pair : pair.slice(0, equals)).replaceAll("+", " ");
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    return foldings(decodeBytewise(raw)).some((name) => name.startsWith(wanted));
  }
  return foldings(decoded).some(
    (name) => name === wanted || name.startsWith(`${wanted}[`) || name.startsWith(`${wanted}\0`),
  );
}

/**
 * A name as origins that ignore case may read it: folded to lowercase, and to uppercase (then
 * lowercase, to compare with `wanted`). The two differ: `ı` (U+0131) and `ſ` (U+017F) uppercase to
 * `I` and `S`, and `ß` to `SS`, so a Java `equalsIgnoreCase` or a Python `.upper()` reads
 * `ap%C4%B1_key` as `API_KEY`.
 */
function foldings(name: string): string[] {
  const lower = name.toLowerCase();
  const upper = name.toUpperCase().toLowerCase();
  return upper === lower ? [lower] : [lower, upper];
}

/**
 * The pairs of the query of `path` (after `?`), split on `&` and on `;` (some origin frameworks
 * split on it too), as they are written.
 */
export function queryPairs(path: string): string[] {
  const mark = path.indexOf("?");
  if (mark === -1) return [];
  return path
    .slice(mark + 1)
    .split("&")
    .flatMap((pair) => pair.split(";"))
    .filter((pair) => pair.length > 0);
}

/** Each valid `%XX` as the one character of that byte value; used only when UTF-8 decoding fails. */
function decodeBytewise(raw: string): string {
  return raw.replace(/%([0-9A-Fa-f]{2})/g, (_match, hex: string) =>
    String.fromCharCode(Number.parseInt(hex, 16)),
  );
}
