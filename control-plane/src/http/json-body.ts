// JSON bodies at the edge of both tiers. Fastify's own parser still parses (its prototype-poisoning
// checks kept); then a body nested deeper than MAX_JSON_DEPTH is 400 invalid_json, and a string
// PostgreSQL cannot store (a NUL, an unpaired surrogate) anywhere in it, keys included, is 400
// naming the field. Per-field rules (one line or free text) stay with each route's schema: this is
// the floor under all of them, so a field a route reads by hand still cannot reach a text or jsonb
// column and come back as a 500. JSON-RPC routes (/mcp) take the parsed frame as it is: the MCP
// server answers depth and argument problems as JSON-RPC errors for the frame's id.
import { AppError } from "@latch/shared/errors";
import { describeUnsafeText, type UnsafeTextReason } from "@latch/shared/text/safe-text";
import type { FastifyInstance } from "fastify";
import { describeTooDeep, findTooDeep, shownFieldPath } from "./json-depth.ts";

declare module "fastify" {
  interface FastifyContextConfig {
    /** The route answers JSON-RPC: its body is judged by the MCP server, not refused here. */
    isJsonRpc?: boolean;
  }
}

/** What PostgreSQL refuses in text and jsonb, whatever the field: a NUL, or invalid Unicode. */
function unstorableReason(text: string): UnsafeTextReason | undefined {
  if (text.includes("\u0000")) return "nul";
  return text.isWellFormed() ? undefined : "unpaired_surrogate";
}

/** The first unstorable string in `value` (depth already bounded), with its dotted path. */
function findUnstorable(
  value: unknown,
  path: string,
): { path: string; reason: UnsafeTextReason } | undefined {
  if (typeof value === "string") {
    const reason = unstorableReason(value);
    return reason ? { path: path || "the body", reason } : undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const entries = Array.isArray(value) ? value.entries() : Object.entries(value);
  for (const [key, child] of entries) {
    const name = path ? `${path}.${key}` : String(key);
    if (typeof key === "string") {
      const reason = unstorableReason(key);
      if (reason) return { path: `a field name${path ? ` in ${path}` : ""}`, reason };
    }
    const found = findUnstorable(child, name);
    if (found) return found;
  }
  return undefined;
}

/** Throws the 400 for a parsed body the edge refuses; returns when it may go on to the route. */
export function checkJsonBody(value: unknown): void {
  const deep = findTooDeep(value);
  if (deep !== undefined) throw new AppError("invalid_json", describeTooDeep(deep));
  const unstorable = findUnstorable(value, "");
  if (unstorable) {
    throw new AppError(
      "invalid_request",
      `${shownFieldPath(unstorable.path)} ${describeUnsafeText(unstorable.reason)}`,
    );
  }
}

/** Replaces Fastify's application/json parser with the same parser plus the checks above. */
export function registerJsonBody(app: FastifyInstance): void {
  const { onProtoPoisoning = "error", onConstructorPoisoning = "error" } = app.initialConfig;
  const parse = app.getDefaultJsonParser(onProtoPoisoning, onConstructorPoisoning);
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    // parseAs "string": the body is text (the Buffer in the type is for parseAs "buffer").
    parse(request, body as string, (error, value) => {
      if (error) return done(error, undefined);
      if (request.routeOptions.config?.isJsonRpc) return done(null, value);
      try {
        checkJsonBody(value);
      } catch (refusal) {
        return done(refusal as AppError, undefined);
      }
      done(null, value);
    });
  });
}
