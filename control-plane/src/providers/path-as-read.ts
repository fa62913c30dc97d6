// A literal piece of a provider's path as a regular expression that matches every spelling the
// provider reads as that literal (`normalisePathForMatch` in shared/requests/path.ts): an
// unreserved character may arrive percent-encoded in either hex case (`%74` is `t`), and a "/" may
// be repeated. A rule keyed on the plain spelling alone is skipped by `/%74racks` or `//tracks`,
// which the provider still serves as the path the rule was written for.

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * @example new RegExp(`^${pathAsRead("/v1/me")}$`).test("/v1//%6De") // true
 */
export function pathAsRead(literal: string): string {
  return [...literal]
    .map((char) => {
      if (char === "/") return "\\/+";
      const escaped = char.replace(/[.*+?^${}()|[\]\\-]/g, "\\$&");
      if (!UNRESERVED.test(char)) return escaped;
      const hex = char.charCodeAt(0).toString(16).padStart(2, "0");
      const [high, low] = [hex[0]!, hex[1]!];
      const lowEither = low.toUpperCase() === low.toLowerCase() ? low : `[${low.toUpperCase()}${low}]`;
      return `(?:${escaped}|%${high}${lowEither})`;
    })
    .join("");
}
