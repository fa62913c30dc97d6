// The paths a request can be said to be for. The router decodes percent-escapes before it matches
// ("/%61pi/items" reaches the route "/api/items"), so a wall that judges only the raw text of the
// URL can be walked around. A wall checks every reading: the raw path, its decoded form, and the
// pattern of the route the router actually chose.
import type { FastifyRequest } from "fastify";

export function requestPaths(request: FastifyRequest): string[] {
  const raw = request.url.split("?")[0] ?? "";
  const paths = [raw];
  try {
    paths.push(decodeURIComponent(raw));
  } catch {
    // A malformed escape: the router refuses or 404s it; the raw text is still judged.
  }
  const route = request.routeOptions?.url;
  if (typeof route === "string") paths.push(route);
  return paths;
}

/** True when any reading of the request's path starts with one of `prefixes`. */
export function isUnderPrefix(request: FastifyRequest, prefixes: readonly string[]): boolean {
  return requestPaths(request).some((path) => prefixes.some((prefix) => path.startsWith(prefix)));
}
