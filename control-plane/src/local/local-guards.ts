// The walls of `vault serve` (spec 4.4): it answers only to a loopback Host (a DNS-rebinding page
// in a browser names its own host, so it gets nothing), refuses a foreign browser Origin, and
// keeps each bearer on its own surface: operator on /api/*, model on /mcp.
import { AppError } from "@latch/shared/errors";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { bearerOf } from "../http/bearer.ts";
import type { LocalRole } from "./local-tokens.ts";

const LOOPBACK_HOST = /^(127\.0\.0\.1|localhost|\[::1\])(:\d{1,5})?$/;

export function isLoopbackHostHeader(host: string | undefined): boolean {
  return host !== undefined && LOOPBACK_HOST.test(host.toLowerCase());
}

/** An Origin a page on this very server would send; anything else is a foreign page. */
export function isOwnOrigin(origin: string, host: string): boolean {
  return origin.toLowerCase() === `http://${host.toLowerCase()}`;
}

declare module "fastify" {
  interface FastifyRequest {
    localRole?: LocalRole;
  }
}

export function registerLocalGuards(
  app: FastifyInstance,
  checkToken: (presented: string | undefined) => LocalRole | undefined,
): void {
  app.addHook("onRequest", async (request) => {
    const host = request.headers.host;
    if (!isLoopbackHostHeader(host)) {
      throw new AppError(
        "forbidden",
        "this server answers only to a loopback Host (127.0.0.1, localhost, [::1])",
      );
    }
    const origin = request.headers.origin;
    if (origin !== undefined && !isOwnOrigin(origin, host!)) {
      throw new AppError("forbidden", "requests from another site's pages are refused");
    }
    request.localRole = checkToken(bearerOf(request.headers.authorization));
  });
}

/** Requires the bearer of `role`; the other surface's bearer is 403, none or a wrong one 401. */
export function requireRole(request: FastifyRequest, role: LocalRole): void {
  if (request.localRole === role) return;
  if (request.localRole) {
    throw new AppError(
      "forbidden",
      role === "operator"
        ? "the model token cannot call the operator API"
        : "the operator token cannot call MCP; use the model token",
    );
  }
  throw new AppError("unauthorized", `send the ${role} bearer token printed by vault serve`);
}
