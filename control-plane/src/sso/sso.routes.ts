// Single sign-on routes (DECISIONS "Passkeys and single sign-on"): an owner's connection
// (GET, PUT, DELETE /api/orgs/sso; changing it needs a step-up), "Sign in with SSO" by address
// (POST /api/auth/sso/discover), and the browser's way through the provider: GET /sso/:org_slug
// sends it there, GET /sso/callback (BASE_URL/sso/callback, the redirect URI) brings it back signed
// in. A sign-in that does not finish answers a page that says why, never a redirect elsewhere.
import { randomBytes } from "node:crypto";
import { AppError } from "@latch/shared/errors";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { requireOrgOperator, setSessionCookies } from "../auth/operator-guard.ts";
import { operatorOnly } from "../auth/principal.ts";
import type { SessionsRepo } from "../auth/sessions.ts";
import type { StepUpRule } from "../auth/step-up.ts";
import {
  checkedFirst,
  okAnswer,
  stringJudgedByService,
  type ZodTypeProvider,
} from "../http/route-schemas.ts";
import type { RateLimit, RateLimiter } from "../limits/rate-limit.ts";
import { readPage, sendPage } from "../pages/page-files.ts";
import { isProviderUnreachable } from "./oidc-relying-party.ts";
import type { SsoConnectionsService } from "./sso-connections.service.ts";
import type { SsoSignInService } from "./sso-sign-in.service.ts";

export const SSO_DISCOVER_PER_IP: RateLimit = {
  name: "sso_discover:ip",
  limit: 30,
  windowMs: 15 * 60_000,
  what: "single sign-on look-ups from one address",
};

/** Sign-ins started from one address: each writes a state row and may fetch discovery. */
export const SSO_START_PER_IP: RateLimit = {
  name: "sso_start:ip",
  // Generous: a company's people may all sign in from one address at nine in the morning.
  limit: 300,
  windowMs: 15 * 60_000,
  what: "single sign-ins started from one address",
};

/** Domain checks from one address: each reads up to 20 TXT records through the egress proxy. */
export const SSO_VERIFY_PER_IP: RateLimit = {
  name: "sso_verify:ip",
  limit: 30,
  windowMs: 15 * 60_000,
  what: "single sign-on domain checks from one address",
};

/** Who signs in to the organisation, and as what: a step-up before it changes. */
const CHANGES_SSO: StepUpRule = { doing: "changing the organisation's single sign-on" };

export interface SsoRouteDeps {
  connections: SsoConnectionsService;
  signIn: SsoSignInService;
  sessions: SessionsRepo;
  /** The organisation's slug, for the sign-in address. */
  slugOf(organisationId: string): Promise<string>;
  limiter: RateLimiter;
  isSecureCookies: boolean;
  baseUrl: string;
  now: () => Date;
}

const connection = z.object({
  issuer: z.string(),
  client_id: z.string(),
  client_secret_last4: z.string(),
  email_domains: z.array(z.string()),
  default_role: z.string(),
  require_sso: z.boolean(),
  redirect_uri: z.string(),
  sign_in_url: z.string(),
  updated_at: z.string(),
  domains: z.array(
    z.object({
      domain: z.string(),
      verified: z.boolean(),
      /** The DNS TXT record that proves the organisation holds the domain. */
      record: z.object({ name: z.string(), value: z.string() }),
      /** Daily checks in a row that missed the record of a proven domain (it lapses at 3). */
      missed_checks: z.number().int().min(0),
    }),
  ),
});
const connectionAnswer = z.object({
  connection: connection.nullable(),
  /** What the identity provider must list as this client's redirect URI. */
  redirect_uri: z.string(),
});
const connectionInput = z.object({
  issuer: stringJudgedByService("the provider's issuer, such as https://login.example.com"),
  client_id: stringJudgedByService("the client ID the provider gave Latch"),
  client_secret: stringJudgedByService(
    "the client secret (sealed at once); leave out to keep the stored one",
  ),
  email_domains: z
    .unknown()
    .meta({ type: "array", items: { type: "string" }, description: "the address domains it signs in" }),
  default_role: stringJudgedByService(
    "admin, approver or auditor (default): the role a new address joins as",
  ),
  require_sso: z.unknown().optional().meta({
    type: "boolean",
    description: "true: members of those domains sign in with it only (no email code)",
  }),
});
const domainsChecked = z.object({
  connection,
  checked: z.array(z.object({ domain: z.string(), verified: z.boolean(), reason: z.string().optional() })),
});
const discoverInput = z.object({ email: stringJudgedByService("the address signing in") });
const discovered = z.object({ sso_url: z.string() });
const slugParams = z.object({ org_slug: z.string() });
const startQuery = z.looseObject({
  return_to: z.string().optional().describe("a path of this site to land on afterwards"),
  login_hint: z.string().optional(),
  step_up: z.string().optional().describe("1: the provider checks the person again (prompt=login)"),
});
const callbackQuery = z.looseObject({
  code: z.string().optional(),
  state: z.string().optional(),
  iss: z.string().optional(),
  error: z.string().optional(),
});

/** The cookie a sign-in in flight is bound to: SameSite=Lax, as the provider's redirect back is a top-level navigation from its site. */
function flowCookie(isSecure: boolean): string {
  return isSecure ? "__Host-latch_sso" : "latch_sso";
}

export function registerSsoRoutes(app: FastifyInstance, deps: SsoRouteDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const operatorOf = (request: FastifyRequest) => requireOrgOperator(request);
  const reads = checkedFirst(operatorOnly("org.read"), operatorOf);
  const manages = checkedFirst({ ...operatorOnly("org.manage"), stepUp: CHANGES_SSO }, operatorOf);
  const cookieName = flowCookie(deps.isSecureCookies);
  const page = readPage("pages/sso-result.html", ["heading", "sentence"]);
  const refusal = (reply: FastifyReply, status: number, sentence: string) =>
    sendPage(
      reply.status(status),
      "sso-result",
      page.fill({ heading: "Single sign-on did not finish", sentence: sentenceOf(sentence) }),
    );

  api.get("/api/orgs/sso", { ...reads, schema: { response: { 200: connectionAnswer } } }, async (request) => {
    const { organisationId } = await operatorOf(request);
    return {
      connection: await deps.connections.get(organisationId, await deps.slugOf(organisationId)),
      redirect_uri: deps.connections.redirectUri,
    };
  });

  api.put(
    "/api/orgs/sso",
    { ...manages, schema: { body: connectionInput, response: { 200: connectionAnswer } } },
    async (request) => {
      const { organisationId, actor } = await operatorOf(request);
      const slug = await deps.slugOf(organisationId);
      return {
        connection: await deps.connections.put(organisationId, slug, actor, request.body),
        redirect_uri: deps.connections.redirectUri,
      };
    },
  );

  // Looks for the TXT record of each listed domain not proven yet (through the egress proxy).
  api.post(
    "/api/orgs/sso/verify-domains",
    { ...manages, schema: { response: { 200: domainsChecked } } },
    async (request) => {
      await deps.limiter.takeForAddress(SSO_VERIFY_PER_IP, request.ip);
      const { organisationId, actor } = await operatorOf(request);
      return deps.connections.verifyDomains(organisationId, await deps.slugOf(organisationId), actor);
    },
  );

  api.delete("/api/orgs/sso", { ...manages, schema: { response: { 200: okAnswer } } }, async (request) => {
    const { organisationId, actor } = await operatorOf(request);
    await deps.connections.remove(organisationId, actor);
    return { ok: true as const };
  });

  api.post(
    "/api/auth/sso/discover",
    { schema: { body: discoverInput, response: { 200: discovered } } },
    async (request) => {
      await deps.limiter.takeForAddress(SSO_DISCOVER_PER_IP, request.ip);
      return deps.signIn.discover(request.body.email);
    },
  );

  const continuePage = readPage("pages/sso-continue.html", ["organisation", "href"]);

  api.get(
    "/sso/:org_slug",
    { schema: { params: slugParams, querystring: startQuery } },
    async (request, reply) => {
      // Login CSRF: another site's page must not start a sign-in that lands this browser in an
      // account of the attacker's provider. A navigation from elsewhere (Fetch Metadata) gets a
      // page whose Continue is a same-origin navigation; typed, bookmarked or our own links go on.
      const site = request.headers["sec-fetch-site"];
      if (site === "cross-site" || site === "same-site") {
        return sendPage(
          reply.status(200).header("referrer-policy", "no-referrer"),
          "sso-result",
          continuePage.fill({ organisation: request.params.org_slug, href: request.url }),
        );
      }
      const browserToken = randomBytes(32).toString("base64url");
      let url: URL;
      try {
        await deps.limiter.takeForAddress(SSO_START_PER_IP, request.ip);
        url = await deps.signIn.start({
          slug: request.params.org_slug,
          browserToken,
          returnTo: request.query.return_to,
          loginHint: request.query.login_hint,
          isStepUp: request.query.step_up === "1",
        });
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        const retryAfter = error.extra.retry_after;
        if (typeof retryAfter === "number") reply.header("retry-after", String(retryAfter));
        return refusal(reply, error.status === 401 ? 502 : error.status, error.message);
      }
      reply.setCookie(cookieName, browserToken, {
        path: "/",
        httpOnly: true,
        sameSite: "lax",
        secure: deps.isSecureCookies,
        maxAge: 600,
      });
      return reply.header("referrer-policy", "no-referrer").redirect(url.href, 302);
    },
  );

  api.get("/sso/callback", { schema: { querystring: callbackQuery } }, async (request, reply) => {
    const browserToken = request.cookies[cookieName];
    let signedIn: Awaited<ReturnType<SsoSignInService["finish"]>>;
    try {
      signedIn = await deps.signIn.finish({
        browserToken,
        callbackUrl: new URL(request.url, deps.baseUrl),
      });
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      request.log.info({ code: error.code, reason: error.message }, "single sign-on refused");
      return refusal(reply, isProviderUnreachable(error) ? 502 : error.status, error.message);
    }
    // Spent: the flow's cookie goes (kept after a refusal, which may be a stranger's link that must
    // not end this browser's own sign-in in flight).
    reply.clearCookie(cookieName, { path: "/", secure: deps.isSecureCookies });
    const now = deps.now();
    // A new sign-in replaces the session this browser had.
    if (request.operatorSession) await deps.sessions.updateSessionRevoked(request.operatorSession.id, now);
    const created = await deps.sessions.insertSession(
      signedIn.operatorId,
      signedIn.organisationId,
      request.headers["user-agent"],
      now,
      // The provider owns the second factor: a whole sign-in, verified when it says it last checked
      // (auth_time); without it the session passes no step-up until one through the provider.
      { method: "sso", at: signedIn.verifiedAt },
      signedIn.organisationId,
    );
    setSessionCookies(reply, created, deps.isSecureCookies);
    return reply.header("referrer-policy", "no-referrer").redirect(signedIn.returnTo ?? "/console", 303);
  });
}

function sentenceOf(text: string): string {
  const first = text.charAt(0).toUpperCase() + text.slice(1);
  return /[.!?]$/.test(first) ? first : `${first}.`;
}
