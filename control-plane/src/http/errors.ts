// One error envelope for every HTTP route: `{ error: { code, message, ...extra } }`, the status
// from shared/errors' table. The internal cause is logged, never sent.
import { AppError } from "@latch/shared/errors";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { toValidationAppError } from "./route-schemas.ts";

/**
 * On a JSON-RPC route (/mcp, config.isJsonRpc) a body refused before the handler is answered as
 * JSON-RPC, as MCP clients read it: an error object with id null, the HTTP status kept. A body
 * that cannot be read as JSON is "Parse error"; one over the limit is "Invalid Request". The
 * codes are mcp/jsonrpc.ts's RPC_PARSE_ERROR and RPC_INVALID_REQUEST (the edge imports no feature).
 */
const JSON_RPC_BODY_ERRORS: Readonly<Partial<Record<string, number>>> = {
  invalid_json: -32700,
  unsupported_media_type: -32700,
  payload_too_large: -32600,
};

/** Fastify's own failures before a handler runs, mapped to our codes. */
const FASTIFY_ERRORS: Record<string, () => AppError> = {
  FST_ERR_CTP_BODY_TOO_LARGE: () => new AppError("payload_too_large", "the request body is over 128 KiB"),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () =>
    new AppError("unsupported_media_type", "send JSON with Content-Type: application/json"),
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: () =>
    new AppError("invalid_request", "the Content-Length does not match the body"),
  FST_ERR_CTP_EMPTY_JSON_BODY: () => new AppError("invalid_json", "the JSON body is empty"),
  FST_ERR_CTP_INVALID_JSON_BODY: () => new AppError("invalid_json", "the body is not valid JSON"),
  // A path whose percent-encoding is not UTF-8 (`/api/grants/%ED%A0%80/approve`): no id is that.
  FST_ERR_BAD_URL: () => new AppError("invalid_request", "the URL's path is not valid percent-encoded UTF-8"),
  // Both found by schemathesis (CI's API fuzzing) as 500s: a path segment over the router's
  // 100-character limit, and a method with a body (QUERY) sent without a Content-Type.
  FST_ERR_MAX_PARAM_LENGTH: () =>
    new AppError("invalid_request", "a part of the URL's path is over 100 characters"),
  FST_ERR_ROUTE_MISSING_CONTENT_TYPE: () =>
    new AppError("unsupported_media_type", "send a Content-Type header with the body"),
};

export function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  const refused = toValidationAppError(error);
  if (refused) return refused;
  const fastifyError = error as Partial<FastifyError>;
  const mapped = fastifyError.code ? FASTIFY_ERRORS[fastifyError.code] : undefined;
  if (mapped) return mapped();
  // A body JSON.parse refused: Fastify reports it as a SyntaxError with status 400.
  if (error instanceof SyntaxError && fastifyError.statusCode === 400) {
    return new AppError("invalid_json", "the body is not valid JSON");
  }
  // Any other refusal of the request by Fastify itself is the request's fault, never a 500.
  if (fastifyError.code?.startsWith("FST_ERR") && (fastifyError.statusCode ?? 500) < 500) {
    return new AppError("invalid_request", "the request is not valid");
  }
  return new AppError("internal", "something went wrong on our side; it has been logged", { cause: error });
}

/**
 * Fastify's `frameworkErrors` option: failures the router answers before any hook or handler (a
 * path that does not decode), in the same envelope as everything else.
 */
export function answerFrameworkError(
  error: FastifyError,
  _request: FastifyRequest,
  reply: FastifyReply,
): void {
  const appError = toAppError(error);
  void reply.status(appError.status).send(appError.toBody());
}

/** Where an unknown path is answered in JSON even to a browser: the APIs and their callers. */
const JSON_PREFIXES = ["/api/", "/mcp", "/oauth/", "/runtime/", "/.well-known/"];

/**
 * The app's error answers. With `notFoundPage`, a browser asking for an unknown page (GET, HTML
 * accepted, outside the API paths) gets that page with a 404 instead of the JSON envelope.
 */
export function registerErrorHandling(
  app: FastifyInstance,
  options: { notFoundPage?: { html: string; headers: Readonly<Record<string, string>> } } = {},
): void {
  app.setErrorHandler((error, request, reply) => {
    const appError = toAppError(error);
    if (appError.status >= 500) {
      request.log.error({ err: appError.cause ?? appError, code: appError.code }, "request failed");
    } else {
      request.log.info({ code: appError.code }, "request refused");
    }
    const retryAfter = appError.extra.retry_after;
    if (typeof retryAfter === "number") reply.header("retry-after", String(retryAfter));
    const rpcCode = request.routeOptions.config?.isJsonRpc ? JSON_RPC_BODY_ERRORS[appError.code] : undefined;
    if (rpcCode !== undefined) {
      return reply
        .status(appError.status)
        .send({ jsonrpc: "2.0", id: null, error: { code: rpcCode, message: appError.message } });
    }
    // Spec 5 rule 4 spells this one flat: {error: "mfa_required", enroll_url | verify_url}.
    if (appError.code === "mfa_required") {
      return reply.status(403).send({ error: "mfa_required", message: appError.message, ...appError.extra });
    }
    return reply.status(appError.status).send(appError.toBody());
  });
  const page = options.notFoundPage;
  app.setNotFoundHandler((request, reply) => {
    const isBrowserPage =
      (request.method === "GET" || request.method === "HEAD") &&
      /\btext\/html\b/.test(request.headers.accept ?? "") &&
      !JSON_PREFIXES.some((prefix) => request.url.startsWith(prefix));
    if (page && isBrowserPage) return reply.status(404).headers(page.headers).send(page.html);
    return reply.status(404).send(new AppError("not_found", "no such route").toBody());
  });
}
