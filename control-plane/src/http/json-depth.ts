// How deep a JSON value nests. JSON.parse is iterative in V8, but JSON.stringify, zod and every
// recursive walk after it are not: a 128 KiB body of `[[[[...` is 65,000 levels and overflows the
// stack wherever it is next serialised (an audit row, a log line, a forwarded body). The edge
// refuses anything deeper than MAX_JSON_DEPTH, measured here without recursion.

/**
 * The deepest nesting of objects and arrays any body or JSON-RPC frame may have; the top-level
 * object is level 1. Real API bodies and MCP frames stay far below it (a frame's http_request
 * `body` starts at level 4).
 */
export const MAX_JSON_DEPTH = 64;

/** How many names of the path to the too-deep place are kept for the message. */
const PATH_NAMES = 4;

interface Pending {
  value: object;
  depth: number;
  path: string;
}

/**
 * Where `value` first nests deeper than `limit` levels, as a dotted path of its first names
 * ("params.arguments.body.0"), or "" when the top level itself is too deep; undefined when the
 * value is within the limit. Iterative: safe on a value of any depth.
 * @example findTooDeep(JSON.parse('{"a":[[[1]]]}'), 3) // "a.0.0"
 */
export function findTooDeep(value: unknown, limit: number = MAX_JSON_DEPTH): string | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const stack: Pending[] = [{ value, depth: 1, path: "" }];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (node.depth > limit) return node.path;
    const isNamed = node.depth <= PATH_NAMES;
    const entries: Iterable<[string | number, unknown]> = Array.isArray(node.value)
      ? node.value.entries()
      : Object.entries(node.value);
    for (const [key, child] of entries) {
      if (typeof child !== "object" || child === null) continue;
      const path = isNamed ? (node.path ? `${node.path}.${key}` : String(key)) : node.path;
      stack.push({ value: child, depth: node.depth + 1, path });
    }
  }
  return undefined;
}

/** The sentence for a too-deep value: "params.arguments.body nests deeper than 64 levels". */
export function describeTooDeep(path: string, what = "the JSON body"): string {
  return `${path ? shownFieldPath(path) : what} nests deeper than ${MAX_JSON_DEPTH} levels`;
}

/** Longest piece of a caller's field path repeated in a message. */
const SHOWN_PATH = 80;

/**
 * A field path as an error message repeats it: the caller's own key names, cut short, so that a
 * 100 KiB key does not come back as a 100 KiB message.
 */
export function shownFieldPath(path: string): string {
  return path.length > SHOWN_PATH ? `${path.slice(0, SHOWN_PATH)}…` : path;
}
