// Who an operator request is from (spec 5): the session cookie (read again once a state-changing
// request's body has arrived), then CSRF on POST and DELETE, then the authenticator step, then the
// step-up a route declares (step-up.ts). Also the Origin wall of rule 6 for /api, /console,
// /collect, auth pages.
import type {} from "@fastify/cookie";
import { sha256Hex } from "@latch/shared/crypto/hash";
import { AppError } from "@latch/shared/errors";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ClientRow, OperatorSessionRow, VerifiedMethod } from "../db/schema.ts";
import { bearerOf } from "../http/bearer.ts";
import { isUnderPrefix } from "../http/route-path.ts";
import { isSameHash } from "./codes.ts";
import { type Role, roleRefusal } from "./permissions.ts";
import { enforceRouteAccess, refusalFor, resolvePrincipal } from "./principal.ts";
import { type LiveSession, SESSION_COOKIE_NAMES, type SessionsRepo, sessionCookieNames } from "./sessions.ts";
import {
  isFreshlyVerified,
  isStepUpNeeded,
  type StepUpFactors,
  type StepUpRule,
  stepUpMethods,
  stepUpRefusal,
} from "./step-up.ts";

export interface OperatorContext {
  session: OperatorSessionRow;
  operatorId: string;
  organisationId: string | null;
  /** The operator's role in that organisation; null when the session acts in none. */
  role: Role | null;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The cookie's session whatever else was sent: pages (which no bearer reaches) read it. */
    operatorSession?: OperatorSessionRow | null;
  }
}

/** Paths where a foreign browser Origin is refused outright (spec 5 rule 6). */
export const WALLED_PREFIXES = [
  "/api/",
  "/console",
  "/collect",
  "/sign-in",
  "/sign-up",
  "/enroll-totp",
  "/verify-totp",
  "/approve",
  "/invite",
  "/sso",
  "/consent",
  "/device",
];

/** Methods that change something: each needs the session's X-CSRF-Token (spec 4.3 names POST and DELETE). */
const SAFE_METHODS = ["GET", "HEAD", "OPTIONS"];

/** Last-seen is written at most once a minute per session, not on every request. */
const SEEN_WRITE_INTERVAL_MS = 60_000;

export function registerOperatorSessions(
  app: FastifyInstance,
  deps: {
    sessions: SessionsRepo;
    baseUrl: string;
    now: () => Date;
    /** The live client a bearer belongs to (hosted: avm_ and avt_ tokens). */
    authenticateBearer?: (token: string) => Promise<ClientRow | undefined>;
    /** A bearer found live within the last minutes (principal.ts recallBearer). */
    recallBearer?: (token: string) => Promise<{ client: ClientRow; bearerHash: string } | undefined>;
    /** Whether an operator has a second factor: the mfa_required answer says enroll or verify. */
    hasAuthenticator: (operatorId: string) => Promise<boolean>;
    /** What a step-up of this session may be made with (step-up.ts); none: no route needs one. */
    stepUpFactors?: (session: OperatorSessionRow) => Promise<StepUpFactors>;
  },
): void {
  const ownOrigin = new URL(deps.baseUrl).origin;
  const isSecure = new URL(deps.baseUrl).protocol === "https:";
  const cookieName = sessionCookieNames(isSecure).session;
  // Over https only the __Host- name can be ours, and no other site can set it: an unprefixed
  // latch_session planted by a sibling subdomain or an http page is ignored, never a lockout.
  // Over http both spellings count, since either could be planted beside the real one.
  const countedNames = isSecure ? [cookieName] : SESSION_COOKIE_NAMES;
  async function judgeStepUp(session: OperatorSessionRow, rule: StepUpRule) {
    if (!deps.stepUpFactors) return new AppError("internal", "this plane has no step-up");
    const factors = await deps.stepUpFactors(session);
    const methods = stepUpMethods(factors, rule.scope);
    return isFreshlyVerified(session, methods, deps.now())
      ? undefined
      : stepUpRefusal(rule, methods, factors);
  }
  app.addHook("onRequest", async (request) => {
    const origin = request.headers.origin;
    // Judged on every reading of the path: the router decodes "/%61pi/..." to "/api/...".
    if (origin !== undefined && origin !== ownOrigin && isUnderPrefix(request, WALLED_PREFIXES)) {
      throw new AppError("forbidden", "requests from another site's pages are refused");
    }
    // Two session cookies are one planted beside the real one (a sibling subdomain or an http page
    // can set a cookie the browser then sends along): refused, since whichever a parser keeps
    // first could be the attacker's session. Counted on the raw header, before any parser merges.
    if (countSessionCookies(request.headers.cookie, countedNames) > 1) {
      throw new AppError(
        "duplicate_session_cookie",
        "this request carries more than one Latch session cookie; clear this site's cookies and sign in again",
      );
    }
    const live = await findLive(request);
    const session = live?.session;
    request.operatorSession = session ?? null;
    // One principal per request, from the bearer if one was sent, else from this session.
    request.principal = await resolvePrincipal({
      bearer: deps.authenticateBearer ? bearerOf(request.headers.authorization) : undefined,
      ...sessionSources(live),
      authenticateBearer: deps.authenticateBearer ?? (async () => undefined),
      // Only where the route confirms the bearer itself before acting (POST /mcp).
      recallBearer: request.routeOptions.config.confirmsBearer === true ? deps.recallBearer : undefined,
    });
    const now = deps.now();
    if (session && now.getTime() - session.last_seen_at.getTime() > SEEN_WRITE_INTERVAL_MS) {
      await deps.sessions.updateSessionSeen(session.id, now);
    }
  });
  // Each route's declared principals, judged before its body is read.
  app.addHook("onRequest", enforceRouteAccess);
  // The headers above arrive before the body, and a client may hold the body back for as long as
  // the server waits: a member removed or demoted meanwhile must not finish what their headers
  // began (DECISIONS "Teams": removing a member ends their sessions' access to the organisation).
  // So once the body is read (preValidation: before any route's own check and its handler), an
  // operator's state-changing request reads its session and membership again, one indexed read,
  // and is judged by what it finds. A read (GET) changes nothing a removal must stop; a bearer has
  // no role and is not read again.
  app.addHook("preValidation", async (request) => {
    const before = request.principal;
    const action = request.routeOptions.config.action;
    if (before.kind !== "operator" || !action || SAFE_METHODS.includes(request.method)) return;
    const live = await findLive(request);
    request.operatorSession = live?.session ?? null;
    // No session any more (signed out, revoked): anonymous, so requireOperator answers 401.
    request.principal = await resolvePrincipal({
      bearer: undefined,
      ...sessionSources(live),
      authenticateBearer: async () => undefined,
    });
    const after = request.principal;
    // The organisation the request was sent to is the one it acts in or nowhere: a session moved
    // out of it (its member removed, or switched in another tab) does not carry the body elsewhere.
    const wasMember = action !== "account" && before.session.organisation_id && before.role;
    if (
      wasMember &&
      after.kind === "operator" &&
      (after.session.organisation_id !== before.session.organisation_id || !after.role)
    ) {
      throw new AppError(
        "forbidden",
        "this session no longer acts as a member of the organisation this request was sent to; nothing was done",
      );
    }
  });

  /** The live session of the cookie this plane sets, with the operator's role where it acts. */
  async function findLive(request: FastifyRequest): Promise<LiveSession | undefined> {
    // Only the name this plane sets counts: over https an unprefixed latch_session is not ours.
    const token = request.cookies[cookieName];
    return token ? await deps.sessions.findLiveSessionByToken(token, deps.now()) : undefined;
  }

  /** What resolvePrincipal reads of a session (none: no cookie, or not a live one). */
  function sessionSources(live: LiveSession | undefined) {
    return {
      session: live?.session,
      role: live?.role ?? null,
      ssoRequiredSlug: live?.ssoRequiredSlug ?? null,
      hasAuthenticator: deps.hasAuthenticator,
      refuseStepUp: async (session: OperatorSessionRow, rule: StepUpRule) => judgeStepUp(session, rule),
    };
  }
}

/** How many cookies in a raw Cookie header carry one of `names`. */
function countSessionCookies(header: string | undefined, names: readonly string[]): number {
  if (!header) return 0;
  let count = 0;
  for (const pair of header.split(";")) {
    const name = pair.slice(0, pair.includes("=") ? pair.indexOf("=") : pair.length).trim();
    if (names.includes(name)) count += 1;
  }
  return count;
}

/**
 * An operator session lasts until sign-out or revoke (spec 8), so its cookies outlive a browser
 * restart: they carry a Max-Age of 400 days, the longest a browser keeps a cookie (RFC 6265bis).
 * The server's session row, not the cookie, decides whether it still works.
 */
export const SESSION_COOKIE_MAX_AGE_S = 400 * 24 * 60 * 60;

// No Domain attribute on either cookie: `__Host-` requires it absent, and host-only is the intent.
export function setSessionCookies(
  reply: FastifyReply,
  tokens: { token: string; csrfToken: string },
  isSecure: boolean,
): void {
  const names = sessionCookieNames(isSecure);
  const common = {
    path: "/",
    sameSite: "lax" as const,
    secure: isSecure,
    maxAge: SESSION_COOKIE_MAX_AGE_S,
  };
  reply.setCookie(names.session, tokens.token, { ...common, httpOnly: true });
  // Readable by our pages so they can echo it in X-CSRF-Token; useless to another site.
  reply.setCookie(names.csrf, tokens.csrfToken, { ...common, httpOnly: false });
}

/** A browser drops a `__Host-` cookie only when told so with the same Secure and Path. */
export function clearSessionCookies(reply: FastifyReply, isSecure: boolean): void {
  const names = sessionCookieNames(isSecure);
  reply.clearCookie(names.session, { path: "/", secure: isSecure });
  reply.clearCookie(names.csrf, { path: "/", secure: isSecure });
}

/** Requests whose declared step-up passed (requireOperator runs twice per request). */
const stepUpJudged = new WeakSet<FastifyRequest>();

/**
 * The operator behind a request. `mfa: true` needs the authenticator step passed this session
 * (else 403 mfa_required with where to go); every method but GET, HEAD and OPTIONS needs the
 * session's X-CSRF-Token. Then the action the route declares (`config.action`, permissions.ts):
 * an organisation's action needs the session to act in one, as a member whose role allows it
 * (else 403 forbidden_role naming the roles that may). A route that declares none is refused:
 * a new route cannot forget to say what it does.
 */
export async function requireOperator(
  request: FastifyRequest,
  options: { mfa: boolean },
): Promise<OperatorContext> {
  // Spec 5 rule 7: an invalid bearer on /api is 401 and a valid client token on an operator route
  // is the wrong channel (403), whether or not a session cookie rides along.
  const refusal = refusalFor(request.principal, { principals: ["operator"] });
  if (refusal) throw refusal;
  if (request.principal.kind !== "operator") throw new AppError("unauthorized", "sign in first");
  const { session, hasAuthenticator } = request.principal;
  if (!SAFE_METHODS.includes(request.method)) {
    const presented = request.headers["x-csrf-token"];
    if (typeof presented !== "string" || !isSameHash(sha256Hex(presented), session.csrf_hash)) {
      throw new AppError("csrf_failed", "send the X-CSRF-Token header of this session");
    }
  }
  if (options.mfa && !session.is_mfa_passed) {
    const isEnrolled = await hasAuthenticator();
    throw new AppError(
      "mfa_required",
      isEnrolled ? "pass the authenticator step first" : "enroll an authenticator app first",
      { extra: isEnrolled ? { verify_url: "/verify-totp" } : { enroll_url: "/enroll-totp" } },
    );
  }
  const { role } = request.principal;
  const action = request.routeOptions.config?.action;
  if (!action)
    throw new AppError("internal", "this route declares no action", { cause: request.routeOptions.url });
  if (action !== "account") {
    if (!session.organisation_id || !role) {
      throw new AppError("not_found", "no organisation: create one with POST /api/orgs");
    }
    // "Require SSO": a member whose address is in the organisation's domains acts there only in a
    // session begun with its single sign-on (an email-code session keeps its own account's pages).
    const slug = request.principal.ssoRequiredSlug;
    if (slug) {
      throw new AppError(
        "sso_required",
        `this organisation requires its single sign-on for your address: sign in at /sso/${slug}`,
        { extra: { sso_url: `/sso/${slug}` } },
      );
    }
    const refusal = roleRefusal(role, action);
    if (refusal) throw refusal;
  }
  // What the route declares it guards with a step-up, judged once per request (the route's own
  // preValidation check and its handler both come through here), after the role: a member who may
  // not do it at all is told so, not asked to verify first.
  const rule = request.routeOptions.config?.stepUp;
  if (rule && !stepUpJudged.has(request) && (await isStepUpNeeded(rule, request))) {
    const refusal = await request.principal.refuseStepUp(rule);
    if (refusal) throw refusal;
    stepUpJudged.add(request);
  }
  return { session, operatorId: session.operator_id, organisationId: session.organisation_id, role };
}

/** The organisation the session acts in; without one, org-scoped routes answer 404. */
export function requireOrganisation(context: OperatorContext): string {
  if (!context.organisationId)
    throw new AppError("not_found", "no organisation: create one with POST /api/orgs");
  return context.organisationId;
}

/** An operator past the authenticator step, acting in an organisation: every org-scoped route's caller. */
export interface OrgOperator extends OperatorContext {
  organisationId: string;
  role: Role;
  /** How the audit names this operator. */
  actor: string;
}

/** requireOperator with the authenticator step, then requireOrganisation: one call per route. */
export async function requireOrgOperator(request: FastifyRequest): Promise<OrgOperator> {
  const context = await requireOperator(request, { mfa: true });
  const organisationId = requireOrganisation(context);
  if (!context.role) throw new AppError("not_found", "no organisation: create one with POST /api/orgs");
  return { ...context, organisationId, role: context.role, actor: `operator:${context.operatorId}` };
}

/**
 * The session proved its user with a second factor (`method`; `totpStep`: the time step a code
 * spent, none for a backup code or a passkey). A pending session becoming ready gets a new token
 * and CSRF token in new cookies (sessions.repo.ts updateSessionReady): whoever knew the pending one
 * (a cookie planted in the operator's browser) holds nothing after the step. A ready session (a
 * step-up) only records the verification, so its other tabs keep working.
 */
export async function markSessionVerified(
  sessions: Pick<SessionsRepo, "updateSessionReady" | "updateSessionVerified">,
  reply: FastifyReply,
  session: OperatorSessionRow,
  verified: { method: VerifiedMethod; at: Date; totpStep?: number | undefined; isSecureCookies: boolean },
): Promise<void> {
  if (!session.is_mfa_passed) {
    const renewed = await sessions.updateSessionReady(
      session.id,
      verified.method,
      verified.at,
      verified.totpStep,
    );
    if (renewed) {
      setSessionCookies(reply, renewed, verified.isSecureCookies);
      return;
    }
  }
  await sessions.updateSessionVerified(session.id, verified.method, verified.at, verified.totpStep);
}
