// A browser that opened a page on a loopback address other than BASE_URL's (127.0.0.1 for a
// BASE_URL of localhost, or the other way round) would load the page and then have every request
// of it refused as another site's (spec 5 rule 6): its Origin is not BASE_URL's. Such a page
// request is sent to the same path on BASE_URL instead. The target is always BASE_URL, whatever
// the Host header says, so the redirect can point nowhere else.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { isUnderPrefix } from "./route-path.ts";

/** Paths that are never pages: API callers get their answer, not a redirect. */
const NOT_PAGES = ["/api/", "/mcp", "/oauth/", "/runtime/", "/.well-known/", "/health", "/ready"];

function isLoopbackName(hostname: string): boolean {
  const name = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return name === "localhost" || name === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name);
}

/** The Host header's name without its port ("" when there is none). */
function hostnameOf(request: FastifyRequest): string {
  const host = request.headers.host ?? "";
  return host.startsWith("[") ? host.slice(0, host.indexOf("]") + 1) : (host.split(":")[0] ?? "");
}

export function registerCanonicalHost(app: FastifyInstance, baseUrl: string): void {
  const base = new URL(baseUrl);
  app.addHook("onRequest", async (request, reply) => {
    if (request.method !== "GET" && request.method !== "HEAD") return;
    if (!/\btext\/html\b/.test(request.headers.accept ?? "")) return;
    const hostname = hostnameOf(request);
    if (!isLoopbackName(hostname) || hostname.toLowerCase() === base.hostname.toLowerCase()) return;
    if (isUnderPrefix(request, NOT_PAGES)) return;
    return reply.redirect(`${base.origin}${request.url}`, 302);
  });
}
