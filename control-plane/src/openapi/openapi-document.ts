// /openapi.json (OpenAPI 3.1, DECISIONS "Ledger and telemetry"), made from the routes the app
// registered (app.registeredRoutes) and their zod schemas, so the document cannot drift from the
// code: params, query and body from the schemas that validate them, answers from the schemas they
// are checked against, and the refusals every route can give from the walls it sits behind (the
// edge's text check, the JSON body parser, the principal hook, the Origin wall), plus the statuses a
// route's services add (config.openapi, route-docs.ts). A route with nothing to document it by is
// listed in `missing`, with the sentence that says what to add.
import { type ZodType, z } from "zod";
import type { RegisteredRoute } from "../app.ts";
import { WALLED_PREFIXES } from "../auth/operator-guard.ts";
import { routeAnswers, TEXT_TYPES } from "./route-answers.ts";
import type { DocResponse, RouteDocs } from "./route-docs.ts";

type JsonSchema = Record<string, unknown>;

export interface OpenApiDocument {
  openapi: "3.1.0";
  info: { title: string; version: string; description: string };
  servers: { url: string }[];
  paths: Record<string, Record<string, unknown>>;
  components: { schemas: Record<string, JsonSchema>; securitySchemes: Record<string, unknown> };
}

const ERROR_BODY: JsonSchema = {
  type: "object",
  required: ["error"],
  properties: {
    error: {
      type: "object",
      required: ["code", "message"],
      properties: {
        code: { type: "string", description: "machine-readable, e.g. invalid_request, not_found" },
        message: { type: "string", description: "one sentence for a person" },
        methods: {
          type: "array",
          items: { enum: ["passkey", "totp", "sso"] },
          description:
            "step_up_required (403): how to verify within 5 minutes before sending the request again",
        },
      },
    },
  },
  description: "Every refusal: {error: {code, message, ...extra}}",
};

/** Spec 5 rule 4: the authenticator step, spelled flat. */
const MFA_REQUIRED: JsonSchema = {
  type: "object",
  required: ["error"],
  properties: {
    error: { const: "mfa_required" },
    message: { type: "string" },
    enroll_url: { type: "string" },
    verify_url: { type: "string" },
  },
};

/** RFC 6749 5.2 / RFC 7591 3.2.2 / RFC 8628: the OAuth endpoints' error body. */
const OAUTH_ERROR: JsonSchema = {
  type: "object",
  required: ["error"],
  properties: {
    error: { type: "string" },
    error_description: { type: "string" },
    retry_after: { type: "integer" },
  },
};

const STATUS_TEXT: Record<number, string> = {
  200: "OK",
  201: "Created",
  202: "Accepted",
  204: "No content",
  302: "Redirect",
  303: "See other",
  400: "The request is not valid: a parameter, the body or its JSON (the message names the field)",
  401: "No credential, or one that is not valid",
  402: "A plan limit is reached",
  403: "The caller may not do this here (wrong kind of credential, CSRF token, authenticator step, a foreign Origin, or the rule the code names)",
  404: "No such thing in the caller's organisation",
  405: "Method not allowed",
  409: "In conflict with what is stored (the code names it)",
  410: "Expired",
  413: "The body is over its limit",
  431: "The URL or the headers are too large",
  415: "The body is not in a media type this route takes",
  428: "A conditional write sent without If-Match",
  429: "Too many requests: wait retry_after seconds",
  502: "The origin or the network failed",
  503: "Not ready",
};

/** Statuses of a route's own service refusals, beside those its walls give (see errorStatuses). */
const SERVICE_ERRORS: Record<string, readonly number[]> = {
  "POST /api/auth/otp/send": [429],
  "POST /api/auth/otp/verify": [401, 403, 429],
  "POST /api/auth/totp/start": [409],
  "POST /api/auth/totp/confirm": [401, 429],
  "POST /api/auth/totp/verify": [401, 429],
  "POST /api/auth/backup-codes/regenerate": [409],
  "POST /api/auth/passkey/sign-in/options": [429],
  "POST /api/auth/passkey/sign-in": [401, 403],
  "POST /api/auth/passkey/verify": [401],
  "POST /api/auth/passkeys/options": [402],
  "POST /api/auth/passkeys": [401, 402, 409],
  "DELETE /api/auth/passkeys/:id": [409],
  "DELETE /api/auth/totp": [409],
  "POST /api/auth/sso/discover": [404, 409, 429],
  "POST /api/orgs/sso/verify-domains": [409, 429],
  "POST /api/orgs": [402],
  "DELETE /api/orgs": [409],
  "POST /api/items": [409],
  "POST /api/items/:id": [409],
  "POST /api/items/:id/meta": [409],
  "POST /api/folders": [409],
  "POST /api/grants/request": [409, 429],
  "POST /api/grants/:id/approve": [409],
  "POST /api/grants/:id/revoke": [409],
  "POST /api/grants/approve-by-code": [409, 410, 429],
  "POST /api/grants/find-by-code": [409, 410, 429],
  "POST /approve": [409, 410],
  "POST /api/need-items/:id/fulfill": [409],
  "POST /api/need-items/:id/deny": [409],
  "POST /api/integrations/:provider/start": [409],
  "POST /runtime/resolve": [409, 502, 503],
  "POST /consent": [409],
};

function docsOf(route: RegisteredRoute): RouteDocs {
  return routeAnswers(route) ?? {};
}

function schemaOf(route: RegisteredRoute, part: "params" | "querystring" | "body"): ZodType | undefined {
  const value = (route.schema as Record<string, unknown> | undefined)?.[part];
  return value instanceof z.ZodType ? value : undefined;
}

function responseSchemas(route: RegisteredRoute): Record<string, ZodType> {
  const response = (route.schema as { response?: Record<string, unknown> } | undefined)?.response ?? {};
  return Object.fromEntries(
    Object.entries(response).filter((entry): entry is [string, ZodType] => entry[1] instanceof z.ZodType),
  );
}

/** The sentence for a route /openapi.json cannot describe, or undefined when it can. */
function missingDocs(route: RegisteredRoute): string | undefined {
  if (Object.keys(responseSchemas(route)).length > 0 || docsOf(route).responses) return undefined;
  return `${route.method} ${route.url} declares no answer: give it schema.response (zod schemas by status, as the other routes in its file do), or, when Fastify does not serialize its answer (a file, a stream, a redirect, oidc-provider), config.openapi.responses (openapi/route-docs.ts) or an entry in openapi/route-answers.ts`;
}

/** Every route is described, or the list of those that are not (the test prints it). */
export function undocumentedRoutes(routes: readonly RegisteredRoute[]): string[] {
  return routes.map(missingDocs).filter((line): line is string => line !== undefined);
}

export function buildOpenApiDocument(
  routes: readonly RegisteredRoute[],
  options: { baseUrl: string; version: string },
): OpenApiDocument {
  const components: Record<string, JsonSchema> = {
    Error: ERROR_BODY,
    MfaRequired: MFA_REQUIRED,
    OAuthError: OAUTH_ERROR,
  };
  const toSchema = (schema: ZodType | undefined): JsonSchema => {
    if (!schema) return {};
    const converted = z.toJSONSchema(schema, {
      target: "draft-2020-12",
      io: "input",
      unrepresentable: "any",
    }) as JsonSchema;
    const { $schema: _schema, $defs, ...rest } = converted;
    // Named schemas (.meta({ id })) become components; their references follow them.
    for (const [name, def] of Object.entries(($defs ?? {}) as Record<string, JsonSchema>))
      components[name] = def;
    return JSON.parse(JSON.stringify(rest).replaceAll('"#/$defs/', '"#/components/schemas/')) as JsonSchema;
  };

  const paths: OpenApiDocument["paths"] = {};
  for (const route of routes) {
    if (route.method === "HEAD") continue;
    const docs = docsOf(route);
    const path = route.url.replace(/:([A-Za-z0-9_]+)/g, "{$1}").replace(/\*$/, "{path}");
    const operation: Record<string, unknown> = {
      operationId: operationId(route),
      tags: [tagOf(route)],
      ...(docs.summary ? { summary: docs.summary } : {}),
    };

    const parameters = [
      ...pathParameters(route, toSchema),
      ...objectParameters(toSchema(schemaOf(route, "querystring")), "query"),
    ];
    if (parameters.length > 0) operation.parameters = parameters;

    const body = docs.requestBody ?? schemaOf(route, "body");
    if (body) {
      const schema = toSchema(body);
      operation.requestBody = {
        required: false,
        content: Object.fromEntries(
          (docs.bodyTypes ?? ["application/json"]).map((type) => [type, { schema }]),
        ),
      };
    }

    const responses: Record<string, unknown> = {};
    for (const [status, schema] of Object.entries(responseSchemas(route))) {
      const isText = schema instanceof z.ZodString;
      const type = isText ? (docs.contentType ?? TEXT_TYPES[route.url] ?? "text/html") : "application/json";
      responses[status] = {
        description: schema.description ?? STATUS_TEXT[Number(status)] ?? "Answer",
        content: { [type]: { schema: toSchema(schema) } },
      };
    }
    for (const [status, response] of Object.entries(docs.responses ?? {})) {
      responses[status] = describeResponse(response, toSchema);
    }
    for (const status of errorStatuses(route)) {
      const own = responses[status] as { content?: Record<string, unknown> } | undefined;
      const refusal = errorResponse(route, status);
      // A page that answers a refusal in words still answers the edge's refusals (a parameter that
      // is not safe text, a body over its limit) as JSON.
      if (own) own.content = { ...refusal.content, ...own.content };
      else responses[status] = refusal;
    }
    operation.responses = responses;

    const security = securityOf(route);
    if (security) operation.security = security;
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = operation;
  }

  return {
    openapi: "3.1.0",
    info: {
      title: "Latch HTTP API",
      version: options.version,
      description:
        "The hosted control plane's HTTP API: the operator API (session cookie, X-CSRF-Token on POST and DELETE), the model client's (avm_ bearer or OAuth access token), trusted resolve (avt_ bearer), the OAuth 2.1 authorization server, and the public pages. Generated from the routes' own schemas. Errors are {error: {code, message}}.",
    },
    servers: [{ url: options.baseUrl }],
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        session: {
          type: "apiKey",
          in: "cookie",
          name: "latch_session",
          description: "The operator's session (named __Host-latch_session when BASE_URL is https)",
        },
        csrf: {
          type: "apiKey",
          in: "header",
          name: "X-CSRF-Token",
          description: "The session's CSRF token, on POST and DELETE",
        },
        bearer: {
          type: "http",
          scheme: "bearer",
          description: "avm_ model client, OAuth access token (JWT), or avt_ trusted client",
        },
      },
    },
  };
}

function operationId(route: RegisteredRoute): string {
  const words = route.url
    .replace(/[:*]/g, "")
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean);
  return [route.method.toLowerCase(), ...words].join("_") || route.method.toLowerCase();
}

/** One tag per caller: operator, model, trusted, oauth, or public (what a fuzzing pass signs in as). */
function tagOf(route: RegisteredRoute): string {
  const principals = route.principals ?? [];
  if (principals.includes("operator")) return "operator";
  if (principals.includes("model")) return "model";
  if (principals.includes("trusted")) return "trusted";
  if (/^\/(oauth|device)(\/|$)|^\/\.well-known\/(oauth|openid)/.test(route.url)) return "oauth";
  return "public";
}

function securityOf(route: RegisteredRoute): Record<string, string[]>[] | undefined {
  const principals = route.principals;
  if (!principals) return undefined;
  const options: Record<string, string[]>[] = [];
  if (principals.includes("operator"))
    options.push(route.method === "GET" ? { session: [] } : { session: [], csrf: [] });
  if (principals.some((p) => p === "model" || p === "trusted")) options.push({ bearer: [] });
  return options;
}

function pathParameters(route: RegisteredRoute, toSchema: (s: ZodType | undefined) => JsonSchema) {
  const schema = toSchema(schemaOf(route, "params"));
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const names = [...route.url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!);
  if (route.url.endsWith("*")) names.push("path");
  return names.map((name) => ({
    name,
    in: "path",
    required: true,
    schema: properties[name === "path" ? "*" : name] ?? { type: "string" },
  }));
}

function objectParameters(schema: JsonSchema, where: "query") {
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((schema.required ?? []) as string[]);
  return Object.entries(properties).map(([name, property]) => ({
    name,
    in: where,
    required: required.has(name),
    schema: property,
  }));
}

function describeResponse(response: DocResponse, toSchema: (s: ZodType | undefined) => JsonSchema) {
  return {
    description: response.description,
    ...(response.headers
      ? {
          headers: Object.fromEntries(
            Object.entries(response.headers).map(([name, description]) => [
              name,
              { description, schema: { type: "string" } },
            ]),
          ),
        }
      : {}),
    ...(response.content
      ? {
          content: Object.fromEntries(
            Object.entries(response.content).map(([type, schema]) => [
              type,
              schema ? { schema: toSchema(schema) } : {},
            ]),
          ),
        }
      : {}),
  };
}

/**
 * The refusals a route can give because of where it stands: every path and query parameter is
 * judged as one line of safe text (400); a body is parsed as JSON of at most 128 KiB (400, 413,
 * 415); a route with principals is behind the principal hook (401, 403) and an operator's acts in
 * one organisation (404 for anything of another's); a walled path refuses a foreign Origin (403).
 */
function errorStatuses(route: RegisteredRoute): number[] {
  const statuses = new Set<number>([400]);
  const takesBody =
    route.method === "POST" ||
    route.method === "DELETE" ||
    route.method === "PUT" ||
    route.method === "PATCH";
  if (takesBody) {
    statuses.add(413);
    statuses.add(415);
  }
  if (route.principals) {
    statuses.add(401);
    statuses.add(403);
    // Anything of another organisation, a client revoked meanwhile, an MCP session ended.
    statuses.add(404);
    // Ten wrong authenticator codes lock the account's authenticator steps for 15 minutes.
    if (route.url.startsWith("/api/auth/")) statuses.add(429);
  }
  // The HTTP server's own refusal of a URL or headers over its limit (16 KiB).
  statuses.add(431);
  if (/:[A-Za-z]/.test(route.url)) statuses.add(404);
  if (WALLED_PREFIXES.some((prefix) => route.url.startsWith(prefix))) statuses.add(403);
  for (const status of SERVICE_ERRORS[`${route.method} ${route.url}`] ?? []) statuses.add(status);
  for (const status of docsOf(route).errors ?? []) statuses.add(status);
  return [...statuses].sort();
}

function errorResponse(route: RegisteredRoute, status: number) {
  const docs = docsOf(route);
  if (status === 431) {
    return {
      description: "The URL or the headers are over the HTTP server's limit",
      content: { "application/json": { schema: { type: "object" } } },
    };
  }
  const envelope = { $ref: "#/components/schemas/Error" };
  let schema: JsonSchema = envelope;
  if (docs.isOAuth) schema = { anyOf: [{ $ref: "#/components/schemas/OAuthError" }, envelope] };
  else if ([400, 413, 415].includes(status) && route.config?.isJsonRpc) {
    // A body refused before the handler is a JSON-RPC error with id null: not JSON or another
    // media type (-32700), over the size limit (-32600).
    schema = {
      anyOf: [
        envelope,
        {
          type: "object",
          required: ["jsonrpc", "id", "error"],
          properties: {
            jsonrpc: { const: "2.0" },
            id: { type: "null" },
            error: {
              type: "object",
              required: ["code", "message"],
              properties: { code: { enum: [-32700, -32600] }, message: { type: "string" } },
            },
          },
        },
      ],
    };
  } else if (status === 403 && route.principals?.includes("operator")) {
    schema = { anyOf: [envelope, { $ref: "#/components/schemas/MfaRequired" }] };
  }
  return {
    description: STATUS_TEXT[status] ?? "Refused",
    ...(status === 429
      ? { headers: { "Retry-After": { description: "seconds to wait", schema: { type: "string" } } } }
      : {}),
    content: { "application/json": { schema } },
  };
}
