// The OAuth endpoints of spec 4.3 on the Fastify app: the two metadata documents answered here,
// every /oauth/* endpoint and /device handed to oidc-provider after our own checks (redirect URI
// rules and the public-client rule at registration, the resource check before a refresh can spend
// anything, JWT revocation by jti, the per-IP and per-browser limits of spec 8). /mcp, the
// well-known documents and /oauth reflect the caller's Origin (spec 5 rule 6).
import type { IncomingMessage } from "node:http";
import { parse as parseQuery } from "node:querystring";
import { sha256Hex } from "@latch/shared/crypto/hash";
import { AppError } from "@latch/shared/errors";
import { unsafeTextReason } from "@latch/shared/text/safe-text";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type Provider from "oidc-provider";
import { z } from "zod";
import {
  DEVICE_ATTEMPTS_PER_BROWSER,
  DEVICE_ATTEMPTS_PER_IP,
  DEVICE_CODE_TYPED,
  OAUTH_REGISTER_PER_IP,
  type RateLimiter,
} from "../limits/rate-limit.ts";
import { pageHeaders } from "../pages/page-headers.ts";
import { looksLikeJwt } from "./access-tokens.ts";
import type { OAuthService } from "./oauth.service.ts";
import type { OAuthKeyReader } from "./oauth-keys.ts";
import { deviceLimitPage, oauthErrorPage } from "./oauth-pages.ts";
import { MCP_SCOPE, mcpResource, OAUTH_ROUTES } from "./oauth-provider.ts";
import { checkRegistration } from "./registration-rules.ts";

export interface OAuthRouteDeps {
  baseUrl: string;
  /** The provider answering now: one made over the key file's current signing key. */
  provider: () => Provider;
  service: OAuthService;
  limiter: RateLimiter;
  /** The trusted keys of the key file, which /oauth/jwks lists (a rotation shows without a restart). */
  keys: Pick<OAuthKeyReader, "view">;
}

/** oidc-provider answers these itself; the schema says only that (the contract is the RFCs'). */
const forwardedGet = {
  querystring: z.looseObject({}).describe("OAuth parameters, checked by the authorization server"),
} as const;
const forwardedSchema = {
  ...forwardedGet,
  body: z.unknown().describe("OAuth parameters, checked by the authorization server"),
} as const;
const metadataSchema = {
  querystring: z.looseObject({}).describe("ignored"),
  response: { 200: z.looseObject({ issuer: z.string() }).describe("RFC 8414 metadata") },
} as const;

/** Form bodies on /oauth are at most what oidc-provider itself reads (56 KiB). */
const FORM_LIMIT_BYTES = 56 * 1024;

export function authorizationServerMetadata(baseUrl: string) {
  const at = (path: string) => `${baseUrl}${path}`;
  return {
    issuer: baseUrl,
    authorization_endpoint: at(OAUTH_ROUTES.authorization),
    token_endpoint: at(OAUTH_ROUTES.token),
    jwks_uri: at(OAUTH_ROUTES.jwks),
    registration_endpoint: at(OAUTH_ROUTES.registration),
    revocation_endpoint: at(OAUTH_ROUTES.revocation),
    device_authorization_endpoint: at(OAUTH_ROUTES.device_authorization),
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: [
      "authorization_code",
      "refresh_token",
      "urn:ietf:params:oauth:grant-type:device_code",
    ],
    code_challenge_methods_supported: ["S256"],
    token_endpoint_auth_methods_supported: ["none"],
    revocation_endpoint_auth_methods_supported: ["none"],
    scopes_supported: [MCP_SCOPE],
    client_id_metadata_document_supported: true,
    authorization_response_iss_parameter_supported: true,
  };
}

function reflectOrigin(request: FastifyRequest, reply: FastifyReply): void {
  const origin = request.headers.origin;
  if (origin) reply.header("access-control-allow-origin", origin).header("vary", "Origin");
}

/** An OAuth error body (RFC 6749 5.2 / RFC 7591 3.2.2), with retry_after on a 429. */
function sendOAuthError(
  reply: FastifyReply,
  error: AppError | { status: number; error: string; description: string },
) {
  if (error instanceof AppError) {
    const retryAfter = error.extra.retry_after;
    if (typeof retryAfter === "number") reply.header("retry-after", String(retryAfter));
    return reply.status(error.status).send({
      error: error.code === "rate_limited" ? "rate_limited" : "invalid_request",
      error_description: error.message,
      ...(typeof retryAfter === "number" ? { retry_after: retryAfter } : {}),
    });
  }
  return reply.status(error.status).send({ error: error.error, error_description: error.description });
}

/** A form body as one object of strings (a repeated parameter becomes an array, refused upstream). */
function parseForm(text: string): Record<string, string | string[]> {
  const parsed = parseQuery(text);
  for (const [name, value] of Object.entries(parsed)) {
    for (const v of [value ?? ""].flat()) {
      const reason = unsafeTextReason(`${name}${v}`);
      if (reason)
        throw new AppError("invalid_request", `the form field ${name.slice(0, 40)} has unsafe text`);
    }
  }
  return parsed as Record<string, string | string[]>;
}

const single = (value: unknown): string | undefined =>
  typeof value === "string" ? value : Array.isArray(value) ? undefined : undefined;

/** A form field the code provider counts as given: present and not empty (a repeated one too). */
const isGiven = (value: unknown): boolean => value !== undefined && value !== "";

/**
 * A user code as the provider looks it up (oidc-provider's helpers/user_codes.js normalize, to the
 * letter: a coarser one would let a confirmation of another code go uncounted).
 */
function normalizeUserCode(code: string): string {
  return code.replace(/[a-z]/g, (letter) => letter.toUpperCase()).replace(/\W/g, "");
}

export function registerOAuthRoutes(app: FastifyInstance, deps: OAuthRouteDeps): void {
  const resource = mcpResource(deps.baseUrl);
  /** Each provider's request handler, made once (a key rotation brings a new provider). */
  const callbacks = new WeakMap<Provider, ReturnType<Provider["callback"]>>();
  const callbackNow = () => {
    const provider = deps.provider();
    let callback = callbacks.get(provider);
    if (!callback) {
      callback = provider.callback();
      callbacks.set(provider, callback);
    }
    return callback;
  };
  const protocol = new URL(deps.baseUrl).protocol.replace(":", "");
  const baseHost = new URL(deps.baseUrl).host;

  /** Hands the request to oidc-provider; resolves when it has answered. */
  function forward(request: FastifyRequest, reply: FastifyReply, options: { html?: boolean } = {}) {
    const callback = callbackNow();
    reply.hijack();
    const raw = request.raw as IncomingMessage & { body?: unknown };
    if (request.body !== undefined && request.body !== null) raw.body = request.body;
    for (const name of ["x-forwarded-host", "x-forwarded-port", "forwarded"]) {
      delete raw.headers[name];
    }
    raw.headers["x-forwarded-proto"] = protocol;
    // The caller's address as Fastify judged it (TRUST_PROXY), for the provider's per-IP counts.
    raw.headers["x-forwarded-for"] = request.ip;
    // Every URL oidc-provider hands out (verification_uri, the resume location, registration URIs)
    // is BASE_URL's, never the Host a caller or a load balancer sent.
    raw.headers.host = baseHost;
    const res = reply.raw;
    res.setHeader("x-content-type-options", "nosniff");
    res.setHeader("referrer-policy", "no-referrer");
    if (options.html) {
      for (const [name, value] of Object.entries(pageHeaders("device"))) {
        if (name !== "content-type") res.setHeader(name, value);
      }
    }
    if (request.headers.origin) {
      res.setHeader("access-control-allow-origin", request.headers.origin);
      res.setHeader("vary", "Origin");
    }
    return new Promise<void>((resolve) => {
      res.once("finish", resolve);
      res.once("close", resolve);
      callback(raw, res);
    });
  }

  // The two metadata documents (RFC 8414; OpenID Connect Discovery reads the second).
  const metadata = authorizationServerMetadata(deps.baseUrl);
  app.get("/.well-known/oauth-authorization-server", { schema: metadataSchema }, async (request, reply) => {
    reflectOrigin(request, reply);
    reply.header("cache-control", "public, max-age=300");
    return metadata;
  });
  app.get("/.well-known/openid-configuration", { schema: metadataSchema }, async (request, reply) => {
    reflectOrigin(request, reply);
    reply.header("cache-control", "public, max-age=300");
    return {
      ...metadata,
      subject_types_supported: ["public"],
      id_token_signing_alg_values_supported: ["RS256"],
    };
  });

  // CORS preflights for everything a browser-based client calls (MCP Inspector, claude.ai).
  const preflightSchema = { querystring: z.looseObject({}).describe("ignored") } as const;
  for (const path of [
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    OAUTH_ROUTES.token,
    OAUTH_ROUTES.registration,
    OAUTH_ROUTES.revocation,
    OAUTH_ROUTES.jwks,
    OAUTH_ROUTES.device_authorization,
  ]) {
    app.options(path, { schema: preflightSchema }, async (request, reply) => {
      reflectOrigin(request, reply);
      return reply
        .header("access-control-allow-methods", "GET, POST, OPTIONS")
        .header("access-control-allow-headers", "authorization, content-type, mcp-protocol-version")
        .header("access-control-max-age", "600")
        .status(204)
        .send();
    });
  }

  app.register(async (scope) => {
    scope.addContentTypeParser(
      "application/x-www-form-urlencoded",
      { parseAs: "string", bodyLimit: FORM_LIMIT_BYTES },
      (_request, body, done) => {
        try {
          done(null, parseForm(String(body)));
        } catch (error) {
          done(error as Error, undefined);
        }
      },
    );

    scope.get(OAUTH_ROUTES.authorization, { schema: forwardedGet }, async (request, reply) => {
      const url = new URL(request.raw.url ?? "/", deps.baseUrl);
      // Only `query` is advertised (response_modes_supported), so only `query` is accepted: a code
      // in a fragment or a self-posting form is a channel the client never asked us about.
      const modes = url.searchParams.getAll("response_mode");
      if (modes.some((mode) => mode !== "query")) {
        return reply
          .status(400)
          .headers(pageHeaders("device"))
          .send(oauthErrorPage("unsupported_response_mode", "the only response_mode is query"));
      }
      // A client that names no scope asks for the one there is (its token then says scope "mcp").
      if (!url.searchParams.get("scope")) {
        url.searchParams.set("scope", MCP_SCOPE);
        request.raw.url = `${url.pathname}${url.search}`;
      }
      await forward(request, reply, { html: true });
    });
    // Where the browser resumes after /consent (the authorization, then the redirect to the client).
    scope.get(`${OAUTH_ROUTES.authorization}/:uid`, { schema: forwardedGet }, async (request, reply) => {
      await forward(request, reply, { html: true });
    });

    // Ours, not oidc-provider's (which lists the keys of its start for ever): the keys /mcp trusts
    // now, so a key retired longer than a token lives leaves the list on every replica.
    scope.get(OAUTH_ROUTES.jwks, { schema: forwardedGet }, async (request, reply) => {
      reflectOrigin(request, reply);
      return reply
        .header("x-content-type-options", "nosniff")
        .header("referrer-policy", "no-referrer")
        .type("application/jwk-set+json; charset=utf-8")
        .send(JSON.stringify({ keys: deps.keys.view().keys }));
    });

    scope.post(OAUTH_ROUTES.token, { schema: forwardedSchema }, async (request, reply) => {
      const body = (request.body ?? {}) as Record<string, unknown>;
      // DECISIONS: a resource other than BASE_URL/mcp is invalid_target and spends nothing (the
      // provider would spend a refresh token before looking at the resource).
      const asked = [body.resource ?? []].flat();
      if (asked.some((r) => r !== resource)) {
        return sendOAuthError(reply, {
          status: 400,
          error: "invalid_target",
          description: `the only resource is ${resource}`,
        });
      }
      await forward(request, reply);
    });

    scope.post(OAUTH_ROUTES.registration, { schema: forwardedSchema }, async (request, reply) => {
      try {
        await deps.limiter.takeForAddress(OAUTH_REGISTER_PER_IP, request.ip);
      } catch (error) {
        return sendOAuthError(reply, error as AppError);
      }
      const checked = checkRegistration(request.body);
      if (!checked.ok) {
        return sendOAuthError(reply, { status: 400, error: checked.error, description: checked.description });
      }
      request.body = checked.metadata;
      await forward(request, reply);
    });

    scope.post(OAUTH_ROUTES.revocation, { schema: forwardedSchema }, async (request, reply) => {
      const body = (request.body ?? {}) as Record<string, unknown>;
      const token = single(body.token);
      if (token && looksLikeJwt(token)) {
        await deps.service.revokeAccessToken(token, single(body.client_id));
        reflectOrigin(request, reply);
        return reply.status(200).send("");
      }
      await forward(request, reply);
    });

    scope.post(OAUTH_ROUTES.device_authorization, { schema: forwardedSchema }, async (request, reply) => {
      const body = (request.body ?? {}) as Record<string, unknown>;
      if (!single(body.scope)) request.body = { ...body, scope: MCP_SCOPE };
      await forward(request, reply);
    });

    // RFC 8628 verification: the code page, its answers, and the resume after /consent.
    scope.get(OAUTH_ROUTES.code_verification, { schema: forwardedGet }, async (request, reply) => {
      await forward(request, reply, { html: true });
    });
    scope.get(`${OAUTH_ROUTES.code_verification}/:uid`, { schema: forwardedGet }, async (request, reply) => {
      await forward(request, reply, { html: true });
    });
    scope.post(OAUTH_ROUTES.code_verification, { schema: forwardedSchema }, async (request, reply) => {
      const body = (request.body ?? {}) as Record<string, unknown>;
      // Every post that names a code is an attempt (spec 8), whatever else it carries: the code
      // provider reads the code, and answers whether it exists, on a confirm or abort post too. The
      // one exception is the confirmation of a code this browser typed and was counted for.
      const userCode = single(body.user_code);
      if (userCode) {
        const browser = request.cookies.latch_oauth_session;
        const typed = browser ? sha256Hex(`${browser}\0${normalizeUserCode(userCode)}`) : undefined;
        const isAnswer = isGiven(body.confirm) || isGiven(body.abort);
        const isConfirmingTyped =
          isAnswer && typed !== undefined && (await deps.limiter.holds(DEVICE_CODE_TYPED, typed));
        if (!isConfirmingTyped) {
          try {
            await deps.limiter.takeForAddress(DEVICE_ATTEMPTS_PER_IP, request.ip);
            if (browser) await deps.limiter.take(DEVICE_ATTEMPTS_PER_BROWSER, sha256Hex(browser));
          } catch (error) {
            const appError = error as AppError;
            const retryAfter = appError.extra.retry_after;
            if (typeof retryAfter === "number") reply.header("retry-after", String(retryAfter));
            return reply.status(429).headers(pageHeaders("device")).send(deviceLimitPage(appError.message));
          }
          // Typed again within the window, the mark is there already: nothing more to keep.
          if (typed !== undefined && !(await deps.limiter.holds(DEVICE_CODE_TYPED, typed))) {
            await deps.limiter.take(DEVICE_CODE_TYPED, typed);
          }
        }
      }
      await forward(request, reply, { html: true });
    });
  });
}
