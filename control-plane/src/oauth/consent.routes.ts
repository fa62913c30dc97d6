// The consent page (spec 4.3 "/consent, /device"): the operator, signed in with Latch's own email
// code and authenticator, sees which client asks, where it returns to and what it may do, picks the
// organisation and the environment it will act in, and approves or denies. The script contract of
// the spec: POST /consent {uid, decision} (DECISIONS: plus organisation_id and environment) with X-CSRF-Token and Accept: application/json answers 200 {location};
// with the CSRF header and no such Accept, a 303 to the same place; without the header (a plain
// form), 403 before the body is read.
import { AppError } from "@latch/shared/errors";
import { safeString } from "@latch/shared/text/safe-string";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { requireOperator } from "../auth/operator-guard.ts";
import { operatorOnly } from "../auth/principal.ts";
import { signInFirst } from "../auth/sign-in-first.ts";
import { ENVIRONMENTS } from "../config.ts";
import type { ZodTypeProvider } from "../http/route-schemas.ts";
import { readPage, sendPage } from "../pages/page-files.ts";
import type { OAuthService } from "./oauth.service.ts";
import { CONSENT_PATH } from "./oauth-provider.ts";

export interface ConsentRouteDeps {
  service: OAuthService;
}

const uid = safeString()
  .max(128)
  .regex(/^[A-Za-z0-9_-]+$/, "an interaction id");

const consentDetails = z.object({
  uid: z.string(),
  flow: z.enum(["authorization", "device"]),
  client: z.object({
    name: z.string(),
    metadata_host: z.string().nullable(),
    redirect_host: z.string().nullable(),
    redirect_target: z.string().nullable(),
  }),
  abilities: z.array(z.string()),
  organisations: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      current: z.boolean(),
      /** The environments the agent may be bound to there (spec 1.4); the operator picks one. */
      environments: z.array(z.string()),
    }),
  ),
});

const decisionBody = z.object({
  uid,
  decision: z.enum(["approve", "deny"]),
  organisation_id: safeString().max(64).optional(),
  /** Where the agent acts (spec 1.4); the plane's first environment when left out. */
  environment: z.enum(ENVIRONMENTS).optional(),
});

export function registerConsentRoutes(app: FastifyInstance, deps: ConsentRouteDeps): void {
  const page = readPage("pages/consent.html");
  const api = app.withTypeProvider<ZodTypeProvider>();

  api.get(
    CONSENT_PATH,
    {
      schema: { querystring: z.object({ uid }), response: { 200: z.string().describe("the consent page") } },
    },
    async (request, reply) => {
      if (!request.operatorSession?.is_mfa_passed) {
        return signInFirst(request, reply, request.raw.url ?? CONSENT_PATH);
      }
      return sendPage(reply, "consent", page.fill({}));
    },
  );

  api.get(
    `${CONSENT_PATH}/details`,
    {
      // The organisation is the one chosen on the page: oauth.service checks the role there.
      config: operatorOnly("account"),
      schema: { querystring: z.object({ uid }), response: { 200: consentDetails } },
    },
    async (request, reply) => {
      const context = await requireOperator(request, { mfa: true });
      return deps.service.describe(request.raw, reply.raw, request.query.uid, context);
    },
  );

  api.post(
    CONSENT_PATH,
    {
      config: operatorOnly("account"),
      // Before the body is read: a form post (no header) is 403 whatever its content type.
      onRequest: async (request) => {
        if (typeof request.headers["x-csrf-token"] !== "string") {
          throw new AppError("csrf_failed", "send the X-CSRF-Token header of this session");
        }
      },
      schema: {
        body: decisionBody,
        response: { 200: z.object({ location: z.string() }), 303: z.string().describe("empty") },
      },
    },
    async (request, reply) => {
      const context = await requireOperator(request, { mfa: true });
      const location = await deps.service.decide(
        request.raw,
        reply.raw,
        {
          uid: request.body.uid,
          decision: request.body.decision,
          organisationId: request.body.organisation_id,
          environment: request.body.environment,
        },
        context,
      );
      const wantsJson = /\bapplication\/json\b/i.test(request.headers.accept ?? "");
      if (wantsJson) return { location };
      return reply.redirect(location, 303);
    },
  );
}
