// The patterns a policy rule matches with (DECISIONS "Policies"): host patterns (exact or one
// leading `*.`, shared/src/requests/host-pattern.ts), path globs (`*` one segment, `**` any number, both whole segments), and the keys
// agents' names are compared by. Pure: compiled once per version of a list, then only compared.
//
// The attack each piece stops: a call must not slip past a deny or ask rule by spelling the same
// resource differently. So a path is compared segment by segment after percent-decoding (an origin
// reads `/v1/%61dmin` as `/v1/admin`), and for deny and ask rules in the loosest way an origin may
// read it: decoded until stable (an origin that decodes twice reads `%2561` as `a`), without regard
// to case or Unicode compatibility forms, each segment cut at its first `;` (Tomcat, Spring and
// Jetty drop `;params`), trailing dots and spaces dropped (Windows and IIS do), empty segments
// dropped (`/ADMIN//x/` is `/admin/x` to many servers). A path whose loose reading is not one
// path (a segment that decodes, however deep, into a separator, a dot segment or a control
// character, or keeps changing) matches every deny and ask glob. An allow rule matches only the
// exact spelling: a looser reading there would widen what it lets through. The query is never part
// of a path glob. Dot segments and encoded separators never reach here: the path was validated
// first (shared/src/requests/path.ts), and that validated path is the one the proxy sends.
//
// The matcher's work is bounded (a list is saved by anyone who can sign up): each glob is split at
// its `**` into runs of segments; the first run is compared at the path's start, the last at its
// end, and each run between two `**` is searched for left to right. A run between two `**` costs
// up to (path segments × its length), every other segment one step, so a list caps both
// (MAX_LIST_GLOB_SEGMENTS, MAX_LIST_FLOATING_SEGMENTS) and a decision is a few million steps at most.

export { checkHostPattern, isHostMatch } from "@latch/shared/requests/host-pattern";

/** A path segment of a glob: one segment, any number of segments, or a literal. */
const ONE = 0;
const ANY = 1;
type Segment = typeof ONE | typeof ANY | string;

/** A compiled path glob, in both readings. */
export interface PathGlob {
  /** As written, e.g. `/repos/*\/issues/**`. */
  source: string;
  /** Literals percent-decoded once; empty segments kept. */
  strict: readonly Segment[];
  /** Literals in the loose reading (`looseSegment`); empty segments dropped. */
  loose: readonly Segment[];
}

/** A call's path in both readings (the query dropped). */
export interface PathForms {
  strict: readonly string[];
  /**
   * The loose reading, or `UNREADABLE` when the path is not one path read loosely. Computed on
   * first use: most lists have no deny or ask rule with paths.
   */
  loose(): readonly string[] | typeof UNREADABLE;
}

/** A path whose loose reading is not one path: it matches every deny and ask glob (fail closed). */
export const UNREADABLE = Symbol("unreadable path");

/** Counts the matcher's steps (a segment compared, a rule judged): how its work is bounded and shown. */
export interface MatchMeter {
  steps: number;
}

export const MAX_GLOB_LENGTH = 512;
export const MAX_GLOB_SEGMENTS = 64;
/** Segments of all path globs of one list, in all: each costs a step per glob compared. */
export const MAX_LIST_GLOB_SEGMENTS = 10_000;
/**
 * Segments between two `**` of all path globs of one list, in all: each is searched for along the
 * whole path, so each costs up to one step per path segment (8 KiB of path: up to 8 192).
 */
export const MAX_LIST_FLOATING_SEGMENTS = 128;
/** Percent-decodings the loose reading applies before it calls a segment unreadable. */
const MAX_DECODE_ROUNDS = 4;

/** Characters a glob's literal may hold: RFC 3986 pchar (escapes checked apart). */
const PCHAR = /^[A-Za-z0-9\-._~!$&'()+,;=:@%]*$/;
const ESCAPE = /%[0-9A-Fa-f]{2}/;
const ESCAPE_RUN = /(?:%[0-9A-Fa-f]{2})+/g;
const MALFORMED_ESCAPE = /%(?![0-9A-Fa-f]{2})/;
/** Escapes of "/", "\", "." and ";": a validated path never carries them, so a glob naming one matches nothing. */
const ENCODED_SEPARATOR = /%(?:2f|5c|2e|3b)/i;
/** What a loosely read segment must not hold: a separator or a control character. */
const NOT_ONE_SEGMENT = /[\x00-\x1f\x7f/\\]/;
/** A dot segment as a lenient server reads it: dots, with spaces after them (Windows trims those). */
const DOT_SEGMENT = /^\.+\s*$/u;
/** Trailing dots and whitespace (`%20`, `%C2%A0`, ...), which Windows and IIS drop from a name. */
const TRAILING_DOTS_AND_SPACES = /[.\s]+$/u;
const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true });

export type PatternCheck<T> = { ok: true; value: T } | { ok: false; message: string };

/** How a name is compared without regard to case or Unicode compatibility forms. */
export function nameKey(name: string): string {
  return name.normalize("NFKC").toLowerCase().trim();
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

/** One round of decoding every run of escapes; undefined when a run is not UTF-8. */
function decodeRuns(text: string): string | undefined {
  let isUtf8 = true;
  const decoded = text.replace(ESCAPE_RUN, (run) => {
    try {
      return STRICT_UTF8.decode(Uint8Array.from(run.slice(1).split("%"), (hex) => Number.parseInt(hex, 16)));
    } catch {
      isUtf8 = false;
      return run;
    }
  });
  return isUtf8 ? decoded : undefined;
}

/**
 * A raw (still encoded) segment as the loosest origin reads it: decoded and NFKC-folded until
 * stable, cut at its first `;`, trailing dots and spaces dropped, lowercase. Answers "" for a
 * segment that reads as empty, or `UNREADABLE` when it is not one segment (it keeps changing, or
 * decodes into a separator, a dot segment, a control character or bytes that are not UTF-8).
 * @example looseSegment("%2541DMIN.;x") // "admin"
 */
export function looseSegment(raw: string): string | typeof UNREADABLE {
  let text = raw;
  for (let round = 0; ; round++) {
    let next = text.includes("%") ? decodeRuns(text) : text;
    if (next === undefined) return UNREADABLE;
    // ASCII-only text (nearly all) skips the Unicode work.
    if (!/^[\x00-\x7f]*$/.test(next)) next = next.normalize("NFKC");
    if (next === text) break;
    if (round === MAX_DECODE_ROUNDS) return UNREADABLE;
    text = next;
  }
  if (NOT_ONE_SEGMENT.test(text)) return UNREADABLE;
  const cut = text.split(";", 1)[0] ?? "";
  if (DOT_SEGMENT.test(cut)) return UNREADABLE;
  return cut.replace(TRAILING_DOTS_AND_SPACES, "").toLowerCase();
}

/** What a glob costs to match: its segments, and those between two `**` (searched for). */
export function globCost(glob: PathGlob): { segments: number; floating: number } {
  let floating = 0;
  for (const reading of [glob.strict, glob.loose]) {
    const first = reading.indexOf(ANY);
    const last = reading.lastIndexOf(ANY);
    let between = 0;
    for (let at = first + 1; at < last; at++) if (reading[at] !== ANY) between++;
    floating = Math.max(floating, between);
  }
  return { segments: Math.max(glob.strict.length, glob.loose.length), floating };
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
  const loose: Segment[] = [];
  /** Adds a segment to a reading; `**` after `**` is `**`, so a run between them is never empty. */
  const push = (reading: Segment[], segment: Segment) => {
    if (segment !== ANY || reading.at(-1) !== ANY) reading.push(segment);
  };
  for (const part of parts) {
    if (part === "*" || part === "**") {
      push(strict, part === "*" ? ONE : ANY);
      push(loose, part === "*" ? ONE : ANY);
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
      const loosely = looseSegment(part);
      if (loosely === UNREADABLE)
        return {
          ok: false,
          message:
            "a path glob's segment must not decode, however often, into /, \\, a dot segment or a control character",
        };
      strict.push(decoded);
      if (loosely !== "") push(loose, loosely);
    }
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
  const raw = path.slice(1).split("/");
  // A segment whose escapes do not decode (the validator refuses those) is kept as written.
  const strict = raw.map((segment) => decodeSegment(segment) ?? segment);
  let loose: string[] | typeof UNREADABLE | undefined;
  return {
    strict,
    loose: () => {
      if (loose !== undefined) return loose;
      const segments: string[] = [];
      for (const segment of raw) {
        const loosely = looseSegment(segment);
        if (loosely === UNREADABLE) {
          loose = UNREADABLE;
          return loose;
        }
        if (loosely !== "") segments.push(loosely);
      }
      loose = segments;
      return loose;
    },
  };
}

/** Whether `path` holds the glob's run `glob[from, to)` at `at`; counts a step per segment compared. */
function isRunAt(
  glob: readonly Segment[],
  from: number,
  to: number,
  path: readonly string[],
  at: number,
  meter: MatchMeter,
): boolean {
  for (let g = from, p = at; g < to; g++, p++) {
    meter.steps++;
    const segment = glob[g];
    // `*` takes one segment, a non-empty one: an empty segment is only taken by `**`.
    if (segment === ONE ? path[p] === "" : segment !== path[p]) return false;
  }
  return true;
}

/**
 * Whether a path's segments match a glob's. `*` takes one non-empty segment, `**` any number.
 * The glob is runs of segments between its `**`: the first run is compared at the path's start,
 * the last at its end, and each run between two `**` at its leftmost place after the run before
 * (the leftmost place leaves the most room for the runs after it, so no other place need be
 * tried). Steps: the glob's length, plus (path length × length) for each run between two `**`.
 */
export function isPathMatch(
  glob: readonly Segment[],
  path: readonly string[],
  meter: MatchMeter = { steps: 0 },
): boolean {
  const first = glob.indexOf(ANY);
  if (first === -1) return glob.length === path.length && isRunAt(glob, 0, glob.length, path, 0, meter);
  const last = glob.lastIndexOf(ANY);
  const tail = glob.length - last - 1;
  const end = path.length - tail;
  if (first > end) return false;
  if (!isRunAt(glob, 0, first, path, 0, meter) || !isRunAt(glob, last + 1, glob.length, path, end, meter))
    return false;
  let p = first;
  let g = first + 1;
  while (g < last) {
    let runEnd = g;
    while (glob[runEnd] !== ANY) runEnd++;
    const length = runEnd - g;
    let at = p;
    for (;;) {
      if (at + length > end) return false;
      if (isRunAt(glob, g, runEnd, path, at, meter)) break;
      at++;
    }
    p = at + length;
    g = runEnd + 1;
  }
  return true;
}
