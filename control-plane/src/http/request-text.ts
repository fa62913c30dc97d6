// Path and query parameters at the HTTP edge of both tiers (DECISIONS "Approvals"): one hook judges
// every path parameter and query parameter of every route before its handler runs. An id or a
// filter holding a NUL, an unpaired surrogate or a control character is 400 naming it, never a
// database error (a NUL in a text comparison is a PostgreSQL error, so
// `GET /api/audit?item_name=%00` used to answer 500).
import { AppError } from "@latch/shared/errors";
import { refuseUnsafeText } from "@latch/shared/text/safe-string";
import type { FastifyInstance, FastifyRequest } from "fastify";

/** Longest piece of a caller's parameter name repeated in a message. */
const SHOWN_NAME = 64;

/**
 * A query whose percent-encoding is not UTF-8 (`%ED%A0%80` is a lone surrogate) is kept undecoded
 * by Fastify's parser and would reach the route as "%ED%A0%80": refuse it instead.
 */
function checkQueryEncoding(url: string): void {
  const start = url.indexOf("?");
  if (start < 0 || !url.includes("%", start)) return;
  for (const pair of url.slice(start + 1).split("&")) {
    const equals = pair.indexOf("=");
    const [rawName, rawValue] = equals < 0 ? [pair, ""] : [pair.slice(0, equals), pair.slice(equals + 1)];
    const name = decodeQueryPart(rawName);
    if (name === undefined || decodeQueryPart(rawValue) === undefined) {
      const shown = name === undefined ? "a query parameter name" : name.slice(0, SHOWN_NAME);
      throw new AppError("invalid_request", `${shown} is not valid percent-encoded UTF-8`);
    }
  }
}

function decodeQueryPart(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw.replaceAll("+", " "));
  } catch {
    return undefined;
  }
}

function checkParamsAndQuery(request: FastifyRequest): void {
  for (const [name, value] of Object.entries((request.params ?? {}) as Record<string, unknown>)) {
    refuseUnsafeText(name, value);
  }
  checkQueryEncoding(request.url);
  for (const [name, value] of Object.entries((request.query ?? {}) as Record<string, unknown>)) {
    refuseUnsafeText("a query parameter name", name);
    const shown = name.slice(0, SHOWN_NAME);
    // A repeated parameter arrives as an array, which no route expects (a database driver would
    // bind it as an array where a text was meant).
    if (Array.isArray(value)) throw new AppError("invalid_request", `${shown} is given more than once`);
    refuseUnsafeText(shown, value);
  }
}

/** Every route of `app`: path and query parameters are safe one-line text, given once. */
export function registerRequestTextCheck(app: FastifyInstance): void {
  app.addHook("preValidation", async (request) => checkParamsAndQuery(request));
}
