// The answers of routes whose answer Fastify does not serialize, so no schema.response can say it:
// the OAuth endpoints oidc-provider serves (schemas written here from RFC 6749, 7009, 7591, 7517
// and 8628), MCP's transport, pages that redirect, static files and CORS preflights. Kept in one
// place, keyed by route, beside what route-docs.ts lets a route declare for itself.
import { z } from "zod";
import type { RegisteredRoute } from "../app.ts";
import { assetHeaders } from "../pages/page-headers.ts";
import type { DocResponse, RouteDocs } from "./route-docs.ts";

const html = (description: string): DocResponse => ({ description, content: { "text/html": z.string() } });
const redirect = (description: string): DocResponse => ({
  description,
  headers: { Location: "where to go" },
});
const SIGN_IN_FIRST = redirect(
  "Not signed in (or not past the authenticator step): to /sign-in, coming back here after",
);

const tokenAnswer = z.object({
  access_token: z.string().describe("RS256 JWT for the resource BASE_URL/mcp, 600 s"),
  token_type: z.literal("Bearer"),
  expires_in: z.number().int(),
  refresh_token: z.string().optional().describe("rotated on every use"),
  scope: z.string().optional(),
});

const tokenRequest = z.object({
  grant_type: z.enum(["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"]),
  client_id: z.string(),
  code: z.string().optional(),
  code_verifier: z.string().optional().describe("PKCE S256 (RFC 7636)"),
  redirect_uri: z.string().optional(),
  refresh_token: z.string().optional(),
  device_code: z.string().optional(),
  resource: z.string().optional().describe("only BASE_URL/mcp"),
});

const registrationRequest = z.object({
  redirect_uris: z
    .array(z.string())
    .describe("https, loopback http, or a reverse-domain app scheme (RFC 8252)"),
  client_name: z.string().optional(),
  token_endpoint_auth_method: z.literal("none").optional().describe("public clients only"),
  grant_types: z.array(z.string()).optional(),
  response_types: z.array(z.string()).optional(),
  scope: z.string().optional(),
});

const registrationAnswer = z.looseObject({
  client_id: z.string(),
  client_id_issued_at: z.number().int().optional(),
  redirect_uris: z.array(z.string()),
  token_endpoint_auth_method: z.literal("none"),
});

const deviceAnswer = z.object({
  device_code: z.string(),
  user_code: z.string(),
  verification_uri: z.string(),
  verification_uri_complete: z.string().optional(),
  expires_in: z.number().int(),
  interval: z.number().int().optional(),
});

const jwks = z.object({
  keys: z.array(z.looseObject({ kty: z.literal("RSA"), kid: z.string(), n: z.string(), e: z.string() })),
});

const json = (schema: z.ZodType, description: string): DocResponse => ({
  description,
  content: { "application/json": schema },
});

const OAUTH: RouteDocs = { isOAuth: true, errors: [400, 401] };

const ANSWERS: Record<string, RouteDocs> = {
  "GET /oauth/authorize": {
    summary: "Authorization request (code, PKCE S256): the operator signs in and consents in the browser",
    responses: {
      302: redirect("To the consent page, or back to the client's redirect_uri with a code or an error"),
      303: redirect("As 302"),
      400: html("The request cannot be returned to the client (an unknown client or redirect_uri)"),
    },
    errors: [429],
  },
  "GET /oauth/authorize/:uid": {
    summary: "Resumes an authorization after consent",
    responses: {
      302: redirect("Back to the client's redirect_uri"),
      303: redirect("As 302"),
      400: html("The interaction is unknown or expired"),
    },
  },
  "GET /oauth/jwks": {
    summary: "RS256 public keys (RFC 7517)",
    responses: { 200: { description: "The keys", content: { "application/jwk-set+json": jwks } } },
  },
  "POST /oauth/token": {
    ...OAUTH,
    summary: "Code, refresh token or device code for a JWT access token (RFC 6749, 8628)",
    bodyTypes: ["application/x-www-form-urlencoded"],
    requestBody: tokenRequest,
    responses: { 200: json(tokenAnswer, "The tokens") },
    errors: [400, 401, 429],
  },
  "POST /oauth/register": {
    ...OAUTH,
    summary: "Dynamic client registration of a public client (RFC 7591)",
    requestBody: registrationRequest,
    responses: { 201: json(registrationAnswer, "The registered client") },
    errors: [400, 429],
  },
  "POST /oauth/revoke": {
    ...OAUTH,
    summary: "Token revocation (RFC 7009); a refresh token takes its access tokens with it",
    bodyTypes: ["application/x-www-form-urlencoded"],
    requestBody: z.object({
      token: z.string(),
      token_type_hint: z.string().optional(),
      client_id: z.string().optional(),
    }),
    responses: {
      200: { description: "Revoked, or nothing to revoke", content: { "text/plain": undefined } },
    },
  },
  "POST /oauth/device/auth": {
    ...OAUTH,
    summary: "Device authorization (RFC 8628); the operator finishes at /device",
    bodyTypes: ["application/x-www-form-urlencoded"],
    requestBody: z.object({
      client_id: z.string(),
      scope: z.string().optional(),
      resource: z.string().optional(),
    }),
    responses: { 200: json(deviceAnswer, "The codes") },
  },
  "GET /device": {
    summary: "The device code page",
    responses: {
      200: html("The page"),
      302: SIGN_IN_FIRST,
      303: redirect("To the next step"),
      400: html("A refusal, in words"),
    },
  },
  "GET /device/:uid": {
    summary: "Resumes a device authorization after consent",
    responses: {
      200: html("The result"),
      302: redirect("To the next step"),
      303: redirect("To the next step"),
      400: html("Unknown or expired"),
    },
  },
  "POST /device": {
    summary: "The device code page's answer (a user code, or its confirmation)",
    bodyTypes: ["application/x-www-form-urlencoded"],
    requestBody: z.object({
      xsrf: z.string().optional(),
      user_code: z.string().optional(),
      confirm: z.string().optional(),
      abort: z.string().optional(),
    }),
    responses: {
      200: html("The next page"),
      302: redirect("To consent"),
      303: redirect("To consent"),
      400: html("A refusal, in words"),
      429: html("Too many attempts: wait, then enter the code again"),
    },
  },
  "GET /consent": { responses: { 302: SIGN_IN_FIRST } },
  "GET /sign-in": { responses: { 302: redirect("Already signed in: to the console or the next step") } },
  "GET /sign-up": { responses: { 302: redirect("Already signed in: to the console or the next step") } },
  "GET /enroll-totp": {
    responses: { 302: redirect("Not at this step: to sign-in, verification or the console") },
  },
  "GET /verify-totp": {
    responses: { 302: redirect("Not at this step: to sign-in, enrolment or the console") },
  },
  "GET /console": { responses: { 302: redirect("Not signed in or not past the authenticator step") } },
  "GET /collect/:id": {
    responses: { 200: html("The collect page (its details load for a signed-in operator)") },
  },
  "GET /approve": {
    summary: "The email approval link: approves for a signed-in operator of the organisation",
    responses: {
      200: html("The result, in words"),
      302: SIGN_IN_FIRST,
      400: html("Not approved, and why"),
      403: html("Not approved, and why"),
      404: html("Not approved, and why"),
      409: html("Not approved, and why"),
      410: html("Not approved, and why"),
      429: html("Not approved, and why"),
    },
  },
  "GET /sso/:org_slug": {
    summary:
      "Single sign-on: sends the browser to the organisation's identity provider (code flow, PKCE, nonce)",
    responses: {
      302: redirect("To the provider's authorization endpoint; a cookie binds the sign-in to this browser"),
      404: html("The organisation does not sign in with single sign-on"),
      429: html("Too many sign-ins started from this address: wait (Retry-After)"),
      502: html("The provider's discovery document could not be read"),
    },
  },
  "GET /sso/callback": {
    summary:
      "The identity provider's redirect back (BASE_URL/sso/callback): signs in and lands on the console",
    responses: {
      303: redirect("Signed in: to the console, or the page that asked for sign-in"),
      401: html("Not signed in, and why (state, nonce, audience, issuer, expiry, signature, address)"),
      403: html("The address has an account outside the organisation: not signed in"),
    },
  },
  "GET /connect/callback": {
    summary: "The provider's redirect back after connect (spec 4.3)",
    responses: { 302: SIGN_IN_FIRST, 303: redirect("To /console#vault with connected or connect_error") },
  },
  "GET /integrations/:provider/callback": {
    summary: "Alias of /connect/callback",
    responses: { 302: SIGN_IN_FIRST, 303: redirect("To /console#vault with connected or connect_error") },
  },
  "POST /mcp": {
    summary: "MCP over Streamable HTTP: one JSON-RPC 2.0 frame (spec 4.1)",
    requestBody: z.looseObject({
      jsonrpc: z.literal("2.0"),
      method: z.string().optional(),
      id: z.union([z.string(), z.number()]).optional(),
      params: z.unknown().optional(),
    }),
    responses: {
      200: json(
        z.looseObject({ jsonrpc: z.literal("2.0") }),
        "The JSON-RPC answer (a result or an error with the frame's id)",
      ),
      202: { description: "A notification: nothing to answer" },
    },
  },
  "GET /mcp": {
    summary: "The server-sent event stream (keepalives only)",
    responses: {
      200: {
        description: "An endless stream of keepalive comments",
        content: { "text/event-stream": undefined },
      },
    },
  },
};

const preflight: RouteDocs = {
  summary: "CORS preflight",
  responses: { 204: { description: "The methods and headers this path allows, for the asking Origin" } },
};

/** What /openapi.json says about a route beyond its schemas: its own config.openapi, else the above. */
export function routeAnswers(route: RegisteredRoute): RouteDocs | undefined {
  const key = `${route.method} ${route.url}`;
  const own = route.config?.openapi;
  const here = ANSWERS[key];
  if (own || here) return { ...here, ...own, responses: { ...here?.responses, ...own?.responses } };
  if (route.method === "OPTIONS") return preflight;
  const file = /\.(js|css|svg|png|ico|webmanifest)$/.exec(route.url);
  if (route.method === "GET" && file) {
    const type = assetHeaders(route.url)["content-type"]!.split(";")[0]!;
    return {
      responses: {
        200: { description: "The file", content: { [type]: undefined } },
        304: { description: "Not modified (If-None-Match)" },
      },
    };
  }
  return undefined;
}

/** The media type of each public text file (the site's string answers that are not pages). */
export const TEXT_TYPES: Record<string, string> = {
  "/robots.txt": "text/plain",
  "/sitemap.xml": "application/xml",
  "/.well-known/security.txt": "text/plain",
  "/security.txt": "text/plain",
  "/llms.txt": "text/markdown",
  "/llms-full.txt": "text/markdown",
  "/api/audit/ledger": "application/jsonl",
  "/openapi.json": "application/json",
};
