// Passkey routes (DECISIONS "Passkeys and single sign-on"): "Sign in with a passkey" (signed out, a
// discoverable credential: no email code at all), a passkey as the second step after the email
// code, a passkey as a fresh verification for a step-up, and Access's list, add and remove. Adding
// or removing a factor needs a verification of the last 5 minutes (step-up, scope "account"), and
// the operator is mailed of every change to how the account signs in.
import { randomBytes } from "node:crypto";
import { AppError } from "@latch/shared/errors";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { checkedFirst, idParams, okAnswer, type ZodTypeProvider } from "../http/route-schemas.ts";
import type { RateLimit, RateLimiter } from "../limits/rate-limit.ts";
import type { Mailer } from "../mail/mailer.ts";
import { createFactorNotices } from "./factor-notice.ts";
import { markSessionVerified, requireOperator, setSessionCookies } from "./operator-guard.ts";
import {
  addedPasskey,
  assertionInput,
  creationOptions,
  passkeyList,
  passkeySignedIn,
  passkeyVerified,
  registrationInput,
  requestOptions,
} from "./passkeys.schemas.ts";
import type { PasskeysService } from "./passkeys.service.ts";
import { operatorOnly } from "./principal.ts";
import type { SessionsRepo } from "./sessions.ts";
import { refuseInSsoSession } from "./sso-session.ts";
import type { StepUpRule } from "./step-up.ts";
import type { TotpService } from "./totp.service.ts";

/** Signed-out ceremonies started from one address: a page asks once per click. */
export const PASSKEY_SIGN_IN_PER_IP: RateLimit = {
  name: "passkey_sign_in:ip",
  limit: 30,
  windowMs: 15 * 60_000,
  what: "passkey sign-ins from one address",
};

export interface PasskeyRouteDeps {
  passkeys: PasskeysService;
  sessions: SessionsRepo;
  totp: Pick<TotpService, "getOperator" | "disable">;
  /** The organisation a new session acts in. */
  defaultOrganisation(operatorId: string): Promise<string | null>;
  /** Refuses a passkey sign-in the operator's organisation keeps for its single sign-on. */
  checkSignInAllowed?(operatorId: string, email: string): Promise<void>;
  limiter: RateLimiter;
  mailer: Mailer;
  isSecureCookies: boolean;
  now: () => Date;
}

/** Managing how the account signs in: its own factors, whatever the organisation's settings. */
const CHANGES_FACTORS: StepUpRule = { doing: "changing how you sign in", scope: "account" };

/** The cookie a signed-out ceremony is bound to: only this browser may answer its challenge. */
function ceremonyCookie(isSecure: boolean): string {
  return isSecure ? "__Host-latch_passkey" : "latch_passkey";
}

export function registerPasskeyRoutes(app: FastifyInstance, deps: PasskeyRouteDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const signedInOnly = checkedFirst(operatorOnly("account"), (request: FastifyRequest) =>
    requireOperator(request, { mfa: false }),
  );
  const readyOnly = checkedFirst(operatorOnly("account"), (request: FastifyRequest) =>
    requireOperator(request, { mfa: true }),
  );
  const changesFactors = checkedFirst(
    { ...operatorOnly("account"), stepUp: CHANGES_FACTORS },
    (request: FastifyRequest) => requireOperator(request, { mfa: true }),
  );
  const cookieName = ceremonyCookie(deps.isSecureCookies);

  /** The security notice of a change already saved (factor-notice.ts). */
  const mailOperator = createFactorNotices({
    mailer: deps.mailer,
    getOperator: deps.totp.getOperator,
    now: deps.now,
  });

  // "Sign in with a passkey": the browser gets a challenge bound to a cookie of its own, so an
  // answer made for one browser's challenge cannot be posted from another.
  api.post(
    "/api/auth/passkey/sign-in/options",
    { schema: { response: { 200: requestOptions } } },
    async (request, reply) => {
      await deps.limiter.takeForAddress(PASSKEY_SIGN_IN_PER_IP, request.ip);
      const browserToken = randomBytes(32).toString("base64url");
      reply.setCookie(cookieName, browserToken, {
        path: "/",
        httpOnly: true,
        sameSite: "strict",
        secure: deps.isSecureCookies,
        maxAge: 300,
      });
      return deps.passkeys.assertionOptions("sign_in", { browserToken });
    },
  );

  api.post(
    "/api/auth/passkey/sign-in",
    { schema: { body: assertionInput, response: { 200: passkeySignedIn } } },
    async (request, reply) => {
      const browserToken = request.cookies[cookieName];
      if (!browserToken) throw new AppError("passkey_invalid", "start the passkey sign-in again");
      const { operatorId } = await deps.passkeys.verifyAssertion(
        ["sign_in"],
        { browserToken },
        request.body.response,
      );
      reply.clearCookie(cookieName, { path: "/", secure: deps.isSecureCookies });
      const operator = await deps.totp.getOperator(operatorId);
      await deps.checkSignInAllowed?.(operatorId, operator.email);
      return startSession(request, reply, operatorId);
    },
  );

  /** A passkey answer proves both steps at once: the new session is ready and freshly verified. */
  async function startSession(request: FastifyRequest, reply: FastifyReply, operatorId: string) {
    const now = deps.now();
    // A new sign-in replaces the session this browser had.
    if (request.operatorSession) await deps.sessions.updateSessionRevoked(request.operatorSession.id, now);
    const created = await deps.sessions.insertSession(
      operatorId,
      await deps.defaultOrganisation(operatorId),
      request.headers["user-agent"],
      now,
      { method: "passkey", at: now },
    );
    setSessionCookies(reply, created, deps.isSecureCookies);
    return { ok: true as const, csrf_token: created.csrfToken };
  }

  // Signed in: after the email code, the second step; once ready, a fresh verification.
  api.post(
    "/api/auth/passkey/options",
    { ...signedInOnly, schema: { response: { 200: requestOptions } } },
    async (request) => {
      const { session, operatorId } = await requireOperator(request, { mfa: false });
      const purpose = session.is_mfa_passed ? "step_up" : "second_factor";
      return deps.passkeys.assertionOptions(purpose, { sessionId: session.id }, operatorId);
    },
  );

  api.post(
    "/api/auth/passkey/verify",
    { ...signedInOnly, schema: { body: assertionInput, response: { 200: passkeyVerified } } },
    async (request, reply) => {
      const { session, operatorId } = await requireOperator(request, { mfa: false });
      const { purpose } = await deps.passkeys.verifyAssertion(
        ["second_factor", "step_up"],
        { sessionId: session.id },
        request.body.response,
        operatorId,
      );
      // The second step of sign-in renews the session's tokens; a step-up keeps them.
      await markSessionVerified(deps.sessions, reply, session, {
        method: "passkey",
        at: deps.now(),
        isSecureCookies: deps.isSecureCookies,
      });
      return {
        ok: true as const,
        purpose: purpose === "second_factor" ? ("second_factor" as const) : ("step_up" as const),
      };
    },
  );

  api.get(
    "/api/auth/passkeys",
    { ...readyOnly, schema: { response: { 200: passkeyList } } },
    async (request) => {
      const { operatorId } = await requireOperator(request, { mfa: true });
      return { passkeys: await deps.passkeys.list(operatorId) };
    },
  );

  // Adding: the options need the step-up; the answer is bound to the challenge those options gave
  // this session (single use, 5 minutes), so it needs no second one.
  api.post(
    "/api/auth/passkeys/options",
    { ...changesFactors, schema: { response: { 200: creationOptions } } },
    async (request) => {
      const { session, operatorId } = await requireOperator(request, { mfa: true });
      refuseInSsoSession(session, "adding a passkey");
      const operator = await deps.totp.getOperator(operatorId);
      return deps.passkeys.registrationOptions({ id: operatorId, email: operator.email }, session.id);
    },
  );

  api.post(
    "/api/auth/passkeys",
    { ...readyOnly, schema: { body: registrationInput, response: { 201: addedPasskey } } },
    async (request, reply) => {
      const { session, operatorId } = await requireOperator(request, { mfa: true });
      const passkey = await deps.passkeys.register(operatorId, session.id, {
        name: request.body.name,
        response: request.body.response,
      });
      await mailOperator(request, operatorId, `the passkey "${passkey.name}" was added`);
      return reply.status(201).send({ passkey });
    },
  );

  api.delete(
    "/api/auth/passkeys/:id",
    { ...changesFactors, schema: { params: idParams, response: { 200: okAnswer } } },
    async (request) => {
      const { session, operatorId } = await requireOperator(request, { mfa: true });
      refuseInSsoSession(session, "removing a passkey");
      const named = (await deps.passkeys.list(operatorId)).find((p) => p.id === request.params.id);
      await deps.passkeys.remove(operatorId, request.params.id);
      await mailOperator(request, operatorId, `the passkey "${named?.name ?? "?"}" was removed`);
      return { ok: true as const };
    },
  );

  // With a passkey, the authenticator app may go: it is the phishable factor.
  api.delete(
    "/api/auth/totp",
    { ...changesFactors, schema: { response: { 200: okAnswer } } },
    async (request) => {
      const { session, operatorId } = await requireOperator(request, { mfa: true });
      refuseInSsoSession(session, "removing the authenticator app");
      await deps.totp.disable(operatorId);
      await mailOperator(request, operatorId, "the authenticator app was removed");
      return { ok: true as const };
    },
  );
}
