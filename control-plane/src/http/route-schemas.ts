// Route schemas at the HTTP edge of both tiers: every route declares zod schemas for its params,
// query, body and responses (the same schemas an OpenAPI document is generated from), checked
// through fastify-type-provider-zod. A refusal keeps our envelope: 400 `invalid_request` naming the
// field, in the words items.service and the local API have always used ("invalid name: ...").
import { AppError } from "@latch/shared/errors";
import { safeString } from "@latch/shared/text/safe-string";
import type {
  FastifyContextConfig,
  FastifyInstance,
  FastifyRequest,
  FastifySchemaCompiler,
  FastifySerializerCompiler,
} from "fastify";
import { hasZodFastifySchemaValidationErrors, validatorCompiler } from "fastify-type-provider-zod";
import { type ZodType, z } from "zod";

export type { ZodTypeProvider } from "fastify-type-provider-zod";

/**
 * A request with no body (or a JSON `null`) is judged as `{}`: a route whose fields are all
 * optional still answers a bare POST, as the hand-read bodies did.
 */
const validateRoutePart: FastifySchemaCompiler<ZodType> = (route) => {
  const validate = validatorCompiler(route);
  return route.httpPart === "body" ? (data) => validate(data ?? {}) : validate;
};

/**
 * A response is checked against its schema, then the handler's own value is sent: a zod object
 * strips keys it does not name, and a serializer must never drop a field a caller reads. A value
 * that does not match is a 500 (logged), as a wrong answer would be.
 */
const serializeResponse: FastifySerializerCompiler<ZodType> = ({ schema, method, url }) => {
  return (data) => {
    const checked = schema.safeParse(data);
    if (!checked.success) {
      throw new Error(`the ${method} ${url} answer does not match its schema`, { cause: checked.error });
    }
    return JSON.stringify(data);
  };
};

/** Requests validated and responses checked by each route's zod schemas. */
export function registerRouteSchemas(app: FastifyInstance): void {
  app.setValidatorCompiler(validateRoutePart);
  app.setSerializerCompiler(serializeResponse);
}

/** Where a refused value was: the query parameter or path id by name, a body field by its path. */
const PART_NAMES: Record<string, string> = { body: "body", querystring: "query", params: "path" };

/**
 * A schema refusal as our 400, or undefined when `error` is not one. Only the field's path and
 * zod's reason go back, never the value (a refused `value` may be a secret).
 */
export function toValidationAppError(error: unknown): AppError | undefined {
  if (!hasZodFastifySchemaValidationErrors(error)) return undefined;
  const first = error.validation[0];
  if (!first) return undefined;
  const issue = closestIssue({
    path: first.instancePath.split("/").filter(Boolean),
    code: first.keyword,
    message: first.message ?? "is not valid",
    errors: (first.params as { errors?: unknown }).errors,
  });
  const path = issue.path.join(".");
  const context = (error as { validationContext?: string }).validationContext ?? "body";
  const field = path || PART_NAMES[context] || context;
  // A value's reason is never zod's own words about what it saw; a length over the limit is the
  // schema's own sentence, which names the limit (items.schemas.ts VALUE_TOO_LONG).
  const isValue = issue.path.at(-1) === "value";
  const reason = !isValue
    ? issue.message
    : issue.code === "too_big"
      ? issue.message
      : "not a string of the allowed length";
  return new AppError("invalid_request", `invalid ${field}: ${reason}`);
}

interface Issue {
  path: PropertyKey[];
  code: string;
  message: string;
  errors?: unknown;
}

/**
 * A body that fits none of a union's forms (the local POST /api/grants: by grant_id, or by
 * item_name and agent_id) is named by the form it came closest to, the one with the fewest
 * issues: `{ grant_id: "a\u0000" }` is refused for its grant_id, not as "Invalid input".
 */
function closestIssue(issue: Issue): Issue {
  if (issue.code !== "invalid_union" || !Array.isArray(issue.errors)) return issue;
  const branches = (issue.errors as Issue[][]).filter((branch) => branch.length > 0);
  const [closest] = branches.sort((a, b) => a.length - b.length);
  const inner = closest?.[0];
  return inner ? closestIssue({ ...inner, path: [...issue.path, ...inner.path] }) : issue;
}

/** A route's `:id`: any text here (the edge's text check has judged it); the service finds it or 404s. */
export const idParams = z.object({ id: z.string() });

/**
 * A string field whose every value goes on to the service, which answers a wrong one with its own
 * code (`invalid_email`, `invalid_host`, a wrong code counted against its limit): documented as a
 * string, refused here never (with `isSafeText`, only a string that is not safe one-line text), so
 * that the schema cannot change which code a bad input gets.
 * @example z.object({ email: stringJudgedByService("the operator's email address") })
 */
export function stringJudgedByService(description: string, options: { isSafeText?: boolean } = {}) {
  const field = z.unknown().optional().meta({ type: "string", description });
  if (!options.isSafeText) return field;
  return field.superRefine((value, ctx) => {
    if (typeof value !== "string") return;
    for (const issue of safeString().safeParse(value).error?.issues ?? []) {
      ctx.addIssue({ code: "custom", message: issue.message });
    }
  });
}

/**
 * An HTML page's route: it reads no parameter (any query a link carries, such as a campaign tag,
 * is ignored, never refused) and answers a page or a redirect.
 */
export const pageSchema = {
  querystring: z.looseObject({}).describe("ignored: the page reads no parameter"),
  response: { 200: z.string().describe("an HTML page") },
} as const;

/** The answer of a route that only acknowledges (a delete, a revoke, a denial). */
export const okAnswer = z.object({ ok: z.literal(true) });

/**
 * A route's `config` with the check of its caller (session, CSRF token, authenticator step,
 * organisation) run as a preValidation hook: a caller the route refuses is answered 401, 403 or
 * 404 before the schemas judge its body, never 400. The handler runs the same check again for the
 * context it returns (a check of the request alone, no query unless it refuses).
 * @example api.post("/api/items", { ...checkedFirst(operatorOnly("credentials.write"), operatorOf), schema }, handler)
 */
export function checkedFirst(
  config: FastifyContextConfig,
  check: (request: FastifyRequest) => Promise<unknown>,
) {
  return {
    config,
    preValidation: async (request: FastifyRequest) => {
      await check(request);
    },
  };
}
