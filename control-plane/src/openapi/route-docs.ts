// What a route says about itself for /openapi.json beyond its zod schemas (Fastify `config.openapi`).
// Most routes need nothing here: their params, query, body and responses are their schemas. A route
// whose answer Fastify does not serialize (oidc-provider's, a static file, a stream, a redirect)
// documents its responses here, and a route whose service refuses with codes of its own (409, 410,
// 429 ...) lists those statuses.
import type { ZodType } from "zod";

export interface DocResponse {
  description: string;
  /** Media type -> the body's schema (a zod schema, or nothing for an empty or binary body). */
  content?: Record<string, ZodType | undefined>;
  /** Response headers a client relies on (Location of a redirect, Retry-After). */
  headers?: Record<string, string>;
}

export interface RouteDocs {
  summary?: string;
  /** Responses, for a route whose answers its schema.response does not describe. */
  responses?: Record<number, DocResponse>;
  /** The media type of the route's string answers (default text/html for a page). */
  contentType?: string;
  /** Statuses the route's services answer with the error envelope, beyond those the walk derives. */
  errors?: readonly number[];
  /** Request body media types, when not JSON (the OAuth token endpoint takes a form). */
  bodyTypes?: readonly string[];
  /** The body as documented, when the route's own schema leaves it to another component to judge. */
  requestBody?: ZodType;
  /** Errors in the OAuth shape {error, error_description} (RFC 6749 5.2) rather than our envelope. */
  isOAuth?: boolean;
}

declare module "fastify" {
  interface FastifyContextConfig {
    openapi?: RouteDocs;
  }
}
