// The patterns a policy rule matches with (DECISIONS "Policies"): host patterns (exact or one
// leading `*.`, shared/src/requests/host-pattern.ts), path globs (`*` one segment, `**` any number, both whole segments), and the keys
// agents' names are compared by. Pure: compiled once per version of a list, then only compared.
//
// The attack each piece stops: a call must not slip past a deny or ask rule by spelling the same
// resource differently. So a path is compared segment by segment after percent-decoding (an origin
// reads `/v1/%61dmin` as `/v1/admin`), and for deny and ask rules also without regard to case,
// Unicode compatibility forms or empty segments (`/ADMIN//x/` is `/admin/x` to many servers). An
// allow rule matches only the exact spelling: a looser reading there would widen what it lets
// through. The query is never part of a path glob. Dot segments and encoded separators never reach
// here: the path was validated first (shared/src/requests/path.ts), and that validated path is the
// one the proxy sends.

export { checkHostPattern, isHostMatch } from "@latch/shared/requests/host-pattern";

/** A path segment of a glob: one segment, any number of segments, or a literal. */
const ONE = 0;
const ANY = 1;
type Segment = typeof ONE | typeof ANY | string;

/** A compiled path glob, in both readings. */
export interface PathGlob {
  /** As written, e.g. `/repos/*\/issues/**`. */
  source: string;
  /** Literals percent-decoded; empty segments kept. */
  strict: readonly Segment[];
  /** Literals decoded, NFKC, lowercased; empty segments dropped. */
  loose: readonly Segment[];
}

/** A call's path in both readings (the query dropped). */
export interface PathForms {
  strict: readonly string[];
  /** Computed on first use: most lists have no deny or ask rule with paths. */
  loose(): readonly string[];
}

export const MAX_GLOB_LENGTH = 512;
export const MAX_GLOB_SEGMENTS = 64;

/** Characters a glob's literal may hold: RFC 3986 pchar (escapes checked apart). */
const PCHAR = /^[A-Za-z0-9\-._~!$&'()+,;=:@%]*$/;
const ESCAPE = /%[0-9A-Fa-f]{2}/;
const MALFORMED_ESCAPE = /%(?![0-9A-Fa-f]{2})/;
/** Escapes of "/", "\", "." and ";": a validated path never carries them, so a glob naming one matches nothing. */
const ENCODED_SEPARATOR = /%(?:2f|5c|2e|3b)/i;

export type PatternCheck<T> = { ok: true; value: T } | { ok: false; message: string };

/** How a name is compared without regard to case or Unicode compatibility forms. */
export function nameKey(name: string): string {
  return name.normalize("NFKC").toLowerCase().trim();
}

/** A segment for the loose reading: decoded, NFKC, lowercase. */
function looseSegment(decoded: string): string {
  // ASCII-only segments (nearly all) skip the Unicode work.
  return /^[\x00-\x7f]*$/.test(decoded) ? decoded.toLowerCase() : nameKey(decoded);
}

/** Percent-decodes one segment; undefined when its escapes are not UTF-8. */
function decodeSegment(segment: string): string | undefined {
  if (!segment.includes("%")) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/**
 * Compiles a path glob: it starts with `/`; `*` (one segment) and `**` (any number of segments,
 * none included) are whole segments; no query, no fragment, no dot segments.
 * @example compilePathGlob("/repos/*\/issues/**").ok // true
 */
export function compilePathGlob(raw: string): PatternCheck<PathGlob> {
  if (!raw.startsWith("/")) return { ok: false, message: "a path glob starts with /" };
  if (raw.length > MAX_GLOB_LENGTH)
    return { ok: false, message: `a path glob is at most ${MAX_GLOB_LENGTH} characters` };
  if (raw.includes("?") || raw.includes("#"))
    return { ok: false, message: "a path glob has no query or fragment (the query is never matched)" };
  const parts = raw.slice(1).split("/");
  if (parts.length > MAX_GLOB_SEGMENTS)
    return { ok: false, message: `a path glob has at most ${MAX_GLOB_SEGMENTS} segments` };
  const strict: Segment[] = [];
  for (const part of parts) {
    if (part === "*") strict.push(ONE);
    else if (part === "**") {
      // `**/**` is `**`: collapsing keeps matching linear in the path's length.
      if (strict.at(-1) !== ANY) strict.push(ANY);
    } else if (part.includes("*"))
      return {
        ok: false,
        message: "`*` and `**` are whole segments (write /files/* rather than /files/*.txt)",
      };
    else if (part === "." || part === "..")
      return { ok: false, message: "a path glob has no . or .. segments (calls never carry them)" };
    else if (!PCHAR.test(part) || MALFORMED_ESCAPE.test(part))
      return {
        ok: false,
        message: "a path glob holds URL path characters only (percent-encode others, e.g. %20)",
      };
    else if (ENCODED_SEPARATOR.test(part))
      return { ok: false, message: "a path glob has no encoded /, \\, . or ; (calls never carry them)" };
    else {
      const decoded = ESCAPE.test(part) ? decodeSegment(part) : part;
      if (decoded === undefined) return { ok: false, message: "a path glob's percent escapes must be UTF-8" };
      strict.push(decoded);
    }
  }
  const loose: Segment[] = [];
  for (const segment of strict) {
    if (segment === "") continue;
    if (segment === ANY && loose.at(-1) === ANY) continue;
    loose.push(typeof segment === "string" ? looseSegment(segment) : segment);
  }
  return { ok: true, value: { source: raw, strict, loose } };
}

/**
 * A validated call path (query dropped) in both readings.
 * @example pathForms("/v1/%61dmin?x=1").strict // ["v1", "admin"]
 */
export function pathForms(validatedPath: string): PathForms {
  const queryAt = validatedPath.indexOf("?");
  const path = queryAt === -1 ? validatedPath : validatedPath.slice(0, queryAt);
  // A segment whose escapes do not decode (the validator refuses those) is kept as written.
  const strict = path
    .slice(1)
    .split("/")
    .map((segment) => decodeSegment(segment) ?? segment);
  let loose: string[] | undefined;
  return {
    strict,
    loose: () => {
      loose ??= strict.filter((segment) => segment !== "").map(looseSegment);
      return loose;
    },
  };
}

/**
 * Whether a path's segments match a glob's. `*` takes one segment (a non-empty one: an empty
 * segment is only taken by `**`), `**` any number. Greedy with one backtrack point (the classic
 * wildcard walk): O(path × glob) at worst, with no regular expression to backtrack.
 */
export function isPathMatch(glob: readonly Segment[], path: readonly string[]): boolean {
  let g = 0;
  let p = 0;
  let anyAt = -1;
  let resumeAt = 0;
  while (p < path.length) {
    const segment = glob[g];
    if (segment === ANY) {
      anyAt = g++;
      resumeAt = p;
    } else if (segment !== undefined && (segment === ONE ? path[p] !== "" : segment === path[p])) {
      g++;
      p++;
    } else if (anyAt !== -1) {
      // Let the last `**` take one more segment and try again from there.
      g = anyAt + 1;
      p = ++resumeAt;
    } else return false;
  }
  while (glob[g] === ANY) g++;
  return g === glob.length;
}
