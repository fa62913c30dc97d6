// Sign-in and account routes (spec 4.3 "Sign-in and account", 3.3), organisations, and the
// operator and session parts of Access.
import { AppError } from "@latch/shared/errors";
import { showHidden } from "@latch/shared/text/show-hidden";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { OperatorSessionRow } from "../db/schema.ts";
import { checkedFirst, idParams, okAnswer, type ZodTypeProvider } from "../http/route-schemas.ts";
import type { Mailer } from "../mail/mailer.ts";
import {
  accessEvents,
  accessSnapshot,
  backupCodes,
  confirmedTotp,
  createdOrg,
  enrollment,
  me,
  orgDeletion,
  orgInput,
  orgSwitch,
  othersRevoked,
  otpSend,
  otpVerify,
  signedIn,
  totpCode,
  totpStart,
  verifiedTotp,
} from "./auth.schemas.ts";
import type { EmailCodeService } from "./email-code.service.ts";
import { createFactorNotices } from "./factor-notice.ts";
import {
  clearSessionCookies,
  markSessionVerified,
  requireOperator,
  requireOrganisation,
  setSessionCookies,
} from "./operator-guard.ts";
import type { PasskeysService } from "./passkeys.service.ts";
import { actionsOf, isRole, requireManagedRole } from "./permissions.ts";
import { operatorOnly } from "./principal.ts";
import type { SessionsRepo } from "./sessions.ts";
import { refuseInSsoSession } from "./sso-session.ts";
import type { TotpService } from "./totp.service.ts";

/**
 * What these routes need of organisations (orgs/orgs.service.ts answers it): written here, so that
 * auth/ imports no feature (orgs/ builds its routes on auth/'s guard).
 */
export interface OrganisationsPort {
  createOrganisation(operatorId: string, name: unknown): Promise<{ id: string; name: string; slug: string }>;
  deleteOrganisation(operatorId: string, organisationId: string, confirmName: unknown): Promise<void>;
  findDefaultOrganisation(operatorId: string): Promise<string | null>;
  findOrganisation(organisationId: string): Promise<{ id: string; name: string; slug: string } | undefined>;
  findMemberRole(organisationId: string, operatorId: string): Promise<string | undefined>;
  findMembers(
    organisationId: string,
  ): Promise<{ operator_id: string; email: string; role: string; created_at: Date }[]>;
  findOrganisationsOf(
    operatorId: string,
  ): Promise<{ id: string; name: string; slug: string; role: string }[]>;
}

export interface AuthRouteDeps {
  /** The clients and grants parts of the access snapshot, and the issuance ledger. */
  access?: {
    listClients(organisationId: string): Promise<Record<string, unknown>[]>;
    listGrants(organisationId: string): Promise<Record<string, unknown>[]>;
    listLedger(organisationId: string): Promise<Record<string, unknown>[]>;
  };
  emailCodes: EmailCodeService;
  totp: TotpService;
  /** A passkey is a second factor instead of the authenticator code. */
  passkeys: Pick<PasskeysService, "count">;
  sessions: SessionsRepo;
  orgs: OrganisationsPort;
  isSecureCookies: boolean;
  now: () => Date;
  /** The security notice of an authenticator set up or replaced and of new backup codes. */
  mailer: Mailer;
  /** Sign-out also ends the operator's OAuth sign-in sessions (oauth/). */
  onSignOut?: (operatorId: string) => Promise<void>;
  /**
   * Refuses the email-code sign-in of a member whose organisation requires single sign-on for the
   * address (sso/), after the code is proven: only the address's owner learns which organisation.
   */
  checkSignInAllowed?: (operatorId: string, email: string) => Promise<void>;
}

export function registerAuthRoutes(app: FastifyInstance, deps: AuthRouteDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  /** Any signed-in session: the authenticator steps themselves, the account, sign-out. */
  const signedInOnly = checkedFirst(operatorOnly("account"), (request: FastifyRequest) =>
    requireOperator(request, { mfa: false }),
  );
  /** A session past the authenticator step, acting on its own account. */
  const readyOnly = checkedFirst(operatorOnly("account"), (request: FastifyRequest) =>
    requireOperator(request, { mfa: true }),
  );
  /** A session past the authenticator step whose role in its organisation allows `action`. */
  const ready = (action: Parameters<typeof operatorOnly>[0]) =>
    checkedFirst(operatorOnly(action), (request: FastifyRequest) => requireOperator(request, { mfa: true }));
  /** The session proved its user with the authenticator (operator-guard.ts markSessionVerified). */
  const markVerified = (reply: FastifyReply, session: OperatorSessionRow, totpStep?: number) =>
    markSessionVerified(deps.sessions, reply, session, {
      method: "totp",
      at: deps.now(),
      totpStep,
      isSecureCookies: deps.isSecureCookies,
    });
  /** The security notice of a change to how the account signs in (factor-notice.ts). */
  const mailOperator = createFactorNotices({
    mailer: deps.mailer,
    getOperator: deps.totp.getOperator,
    now: deps.now,
  });

  api.post(
    "/api/auth/otp/send",
    { schema: { body: otpSend, response: { 200: okAnswer } } },
    async (request) => {
      // request.ip as Fastify judged it (TRUST_PROXY included), like the other per-address limits.
      await deps.emailCodes.sendCode(request.body.email, request.ip);
      return { ok: true as const };
    },
  );

  api.post(
    "/api/auth/otp/verify",
    { schema: { body: otpVerify, response: { 200: signedIn } } },
    async (request, reply) => {
      const body = request.body;
      const { operatorId, isNew } = await deps.emailCodes.verifyCode(body.email, body.otp);
      if (!isNew) await deps.checkSignInAllowed?.(operatorId, String(body.email).trim().toLowerCase());
      if (isNew) {
        const email = String(body.email).trim().toLowerCase();
        await deps.orgs.createOrganisation(operatorId, `${email.split("@")[0]!.slice(0, 60)}'s organisation`);
      }
      // A new sign-in replaces the session this browser had.
      if (request.operatorSession)
        await deps.sessions.updateSessionRevoked(request.operatorSession.id, deps.now());
      const organisationId = await deps.orgs.findDefaultOrganisation(operatorId);
      const created = await deps.sessions.insertSession(
        operatorId,
        organisationId,
        request.headers["user-agent"],
        deps.now(),
      );
      setSessionCookies(reply, created, deps.isSecureCookies);
      const operator = await deps.totp.getOperator(operatorId);
      const hasSecondFactor = operator.totp_enabled || (await deps.passkeys.count(operatorId)) > 0;
      return {
        ok: true as const,
        enroll: !hasSecondFactor,
        verify: hasSecondFactor,
        csrf_token: created.csrfToken,
      };
    },
  );

  // Adding an authenticator beside a passkey changes how the account signs in: a step-up first.
  const addsAuthenticator = checkedFirst(
    {
      ...operatorOnly("account"),
      stepUp: {
        doing: "adding an authenticator app",
        scope: "account",
        when: async (request) =>
          Boolean(request.operatorSession?.is_mfa_passed) &&
          (await deps.passkeys.count(request.operatorSession!.operator_id)) > 0,
      },
    },
    (request: FastifyRequest) => requireOperator(request, { mfa: false }),
  );

  api.post(
    "/api/auth/totp/start",
    { ...addsAuthenticator, schema: { body: totpStart, response: { 200: enrollment } } },
    async (request) => {
      const context = await requireOperator(request, { mfa: false });
      refuseInSsoSession(context.session, "setting up an authenticator app");
      return deps.totp.start(context.operatorId, {
        isSessionReady: context.session.is_mfa_passed,
        currentCode: request.body.current_code,
        sessionId: context.session.id,
      });
    },
  );

  api.get(
    "/api/auth/totp/pending",
    { ...signedInOnly, schema: { response: { 200: enrollment } } },
    async (request) => {
      const context = await requireOperator(request, { mfa: false });
      // The pending secret is the account's next second factor: not an SSO session's to read.
      refuseInSsoSession(context.session, "setting up an authenticator app");
      // Only the session that started it: another one answers as if none were pending.
      return deps.totp.pending(context.operatorId, {
        isSessionReady: context.session.is_mfa_passed,
        sessionId: context.session.id,
      });
    },
  );

  api.post(
    "/api/auth/totp/confirm",
    { ...signedInOnly, schema: { body: totpCode, response: { 200: confirmedTotp } } },
    async (request, reply) => {
      const context = await requireOperator(request, { mfa: false });
      refuseInSsoSession(context.session, "setting up an authenticator app");
      const confirmed = await deps.totp.confirm(context.operatorId, request.body.code, {
        isSessionReady: context.session.is_mfa_passed,
        sessionId: context.session.id,
      });
      // A live code of the new app: the session is verified with the step it spent.
      await markVerified(reply, context.session, confirmed.totpStep);
      // A change to how an existing account signs in is mailed; a sign-up's first factor is not one.
      if (confirmed.change !== "first") {
        await mailOperator(
          request,
          context.operatorId,
          confirmed.change === "replaced"
            ? "the authenticator app was replaced, and new backup codes were made"
            : "an authenticator app was added, and new backup codes were made",
        );
      }
      return { ok: true as const, backup_codes: confirmed.backupCodes };
    },
  );

  api.post(
    "/api/auth/totp/verify",
    { ...signedInOnly, schema: { body: totpCode, response: { 200: verifiedTotp } } },
    async (request, reply) => {
      const context = await requireOperator(request, { mfa: false });
      const hasPasskey = (await deps.passkeys.count(context.operatorId)) > 0;
      // A session begun with single sign-on uses the account's authenticator only where its step-up
      // is that code (no passkey): its wrong codes would lock the account in every organisation.
      if (hasPasskey || !(await deps.totp.getOperator(context.operatorId)).totp_enabled) {
        refuseInSsoSession(context.session, "an authenticator code");
      }
      const { usedBackupCode, totpStep } = await deps.totp.verify(context.operatorId, request.body.code, {
        hasPasskey,
        // On a ready session this is a step-up, which a backup code is not.
        isSessionReady: context.session.is_mfa_passed,
      });
      // The second step of sign-in, or on a ready session a fresh verification for a step-up;
      // with the authenticator step it spent (a backup code records none).
      await markVerified(reply, context.session, totpStep);
      return { ok: true as const, used_backup_code: usedBackupCode };
    },
  );

  api.get("/api/auth/me", { ...signedInOnly, schema: { response: { 200: me } } }, async (request) => {
    const context = await requireOperator(request, { mfa: false });
    const operator = await deps.totp.getOperator(context.operatorId);
    if (!context.session.is_mfa_passed) {
      // Spec 5 rule 4: before its authenticator step a session reads nothing of the account's
      // organisations, roles or codes; only what the verify and enrol pages need.
      return {
        permissions: [],
        email: operator.email,
        totp_enabled: operator.totp_enabled,
        passkeys: await deps.passkeys.count(context.operatorId),
        backup_codes_remaining: 0,
        created_at: operator.created_at.toISOString(),
        session_ready: false,
        organisation: null,
        organisations: [],
        signed_in_with_sso: context.session.sso_organisation_id !== null,
      };
    }
    const organisation = context.organisationId
      ? await deps.orgs.findOrganisation(context.organisationId)
      : undefined;
    return {
      permissions: actionsOf(context.role),
      email: operator.email,
      totp_enabled: operator.totp_enabled,
      passkeys: await deps.passkeys.count(context.operatorId),
      backup_codes_remaining: await deps.totp.countUnusedBackupCodes(context.operatorId),
      created_at: operator.created_at.toISOString(),
      session_ready: context.session.is_mfa_passed,
      organisation: organisation && context.role ? { ...organisation, role: context.role } : null,
      // A session begun with single sign-on acts in its organisation alone (auth/sso-session.ts).
      organisations: (await deps.orgs.findOrganisationsOf(context.operatorId)).filter(
        (o) => !context.session.sso_organisation_id || o.id === context.session.sso_organisation_id,
      ),
      signed_in_with_sso: context.session.sso_organisation_id !== null,
    };
  });

  // New backup codes stand in for the second factor: a step-up first, so that a phished
  // authenticator code alone cannot mint them (and void the owner's own).
  const regeneratesCodes = checkedFirst(
    { ...operatorOnly("account"), stepUp: { doing: "making new backup codes", scope: "account" } },
    (request: FastifyRequest) => requireOperator(request, { mfa: true }),
  );
  api.post(
    "/api/auth/backup-codes/regenerate",
    { ...regeneratesCodes, schema: { body: totpCode, response: { 200: backupCodes } } },
    async (request) => {
      const context = await requireOperator(request, { mfa: true });
      refuseInSsoSession(context.session, "making new backup codes");
      const codes = await deps.totp.regenerateBackupCodes(
        context.operatorId,
        request.body.code,
        context.session,
      );
      await mailOperator(
        request,
        context.operatorId,
        "new backup codes were made; the old ones no longer work",
      );
      return { backup_codes: codes };
    },
  );

  api.post(
    "/api/auth/logout",
    { ...signedInOnly, schema: { response: { 200: okAnswer } } },
    async (request, reply) => {
      const context = await requireOperator(request, { mfa: false });
      await deps.sessions.updateSessionRevoked(context.session.id, deps.now());
      await deps.onSignOut?.(context.operatorId);
      clearSessionCookies(reply, deps.isSecureCookies);
      return { ok: true as const };
    },
  );

  api.post(
    "/api/orgs",
    { ...readyOnly, schema: { body: orgInput, response: { 201: createdOrg } } },
    async (request, reply) => {
      const context = await requireOperator(request, { mfa: true });
      refuseInSsoSession(context.session, "creating another organisation");
      const organisation = await deps.orgs.createOrganisation(context.operatorId, request.body.name);
      await deps.sessions.updateSessionOrganisation(context.session.id, organisation.id);
      return reply.status(201).send({ organisation: { ...organisation, role: "owner" } });
    },
  );

  // The console's organisation switcher: this session acts in another organisation the operator
  // belongs to. A stranger's organisation is 404, as if it did not exist.
  api.post(
    "/api/orgs/switch",
    { ...readyOnly, schema: { body: orgSwitch, response: { 200: createdOrg } } },
    async (request) => {
      const context = await requireOperator(request, { mfa: true });
      const organisationId = request.body.organisation_id;
      if (organisationId !== context.session.sso_organisation_id) {
        refuseInSsoSession(context.session, "acting in another organisation");
      }
      const role = await deps.orgs.findMemberRole(organisationId, context.operatorId);
      const organisation = role ? await deps.orgs.findOrganisation(organisationId) : undefined;
      if (!organisation || !role) throw new AppError("not_found", "no such organisation");
      await deps.sessions.updateSessionOrganisation(context.session.id, organisation.id);
      return { organisation: { ...organisation, role } };
    },
  );

  api.delete(
    "/api/orgs",
    { ...ready("org.manage"), schema: { body: orgDeletion, response: { 200: okAnswer } } },
    async (request) => {
      const context = await requireOperator(request, { mfa: true });
      const organisationId = requireOrganisation(context);
      await deps.orgs.deleteOrganisation(context.operatorId, organisationId, request.body.confirm_name);
      await deps.sessions.updateSessionOrganisation(
        context.session.id,
        await deps.orgs.findDefaultOrganisation(context.operatorId),
      );
      return { ok: true as const };
    },
  );

  api.get(
    "/api/access",
    { ...ready("org.read"), schema: { response: { 200: accessSnapshot } } },
    async (request) => {
      const context = await requireOperator(request, { mfa: true });
      const organisationId = requireOrganisation(context);
      const [members, sessions, clients, grants, accessed] = await Promise.all([
        deps.orgs.findMembers(organisationId),
        deps.sessions.findSessionsInOrganisation(organisationId),
        deps.access?.listClients(organisationId) ?? [],
        deps.access?.listGrants(organisationId) ?? [],
        deps.sessions.findAccessByOperator(organisationId),
      ]);
      const accessOf = new Map(accessed.map((a) => [a.operator_id, a]));
      const isoOrNull = (at: unknown) => (at ? new Date(at as string | Date).toISOString() : null);
      return {
        clients,
        grants,
        operators: members.map((m) => ({
          ...m,
          created_at: m.created_at.toISOString(),
          first_access_at: isoOrNull(accessOf.get(m.operator_id)?.first_access_at),
          last_access_at: isoOrNull(accessOf.get(m.operator_id)?.last_access_at),
        })),
        sessions: sessions.map((s) => ({
          session_id: s.id,
          operator_id: s.operator_id,
          email: s.email,
          // The browser's own words: a session signed in elsewhere must not pose as this device.
          user_agent: s.user_agent === null ? null : showHidden(s.user_agent).text,
          created_at: s.created_at.toISOString(),
          last_access_at: s.last_seen_at.toISOString(),
          ready: s.is_mfa_passed,
          current: s.id === context.session.id,
        })),
      };
    },
  );

  api.get(
    "/api/access/events",
    { ...ready("org.read"), schema: { response: { 200: accessEvents } } },
    async (request) => {
      const context = await requireOperator(request, { mfa: true });
      return { events: (await deps.access?.listLedger(requireOrganisation(context))) ?? [] };
    },
  );

  // Ending one of the caller's own other sessions is revoke-others one session at a time: the same
  // fresh step-up (below), or a session that only signed in (a backup code) would sign the owner
  // out of each, switching organisations to reach them. Another member's session is a manager's
  // to end, by role; the current one is refused in the handler (400), as before.
  const revokesSession = checkedFirst(
    {
      ...operatorOnly("org.read"),
      stepUp: {
        doing: "signing out your other sessions",
        scope: "account",
        when: async (request) => {
          const session = request.operatorSession;
          const id = (request.params as { id?: unknown } | undefined)?.id;
          if (!session || typeof id !== "string" || id === session.id) return false;
          return (await deps.sessions.findSessionOperatorId(id)) === session.operator_id;
        },
      },
    },
    (request: FastifyRequest) => requireOperator(request, { mfa: true }),
  );
  api.post(
    "/api/sessions/:id/revoke",
    { ...revokesSession, schema: { params: idParams, response: { 200: okAnswer } } },
    async (request) => {
      const context = await requireOperator(request, { mfa: true });
      const organisationId = requireOrganisation(context);
      if (request.params.id === context.session.id) {
        throw new AppError("cannot_revoke_current", "this is your current session; sign out instead");
      }
      const listed = await deps.sessions.findSessionsInOrganisation(organisationId);
      const session = listed.find((s) => s.id === request.params.id);
      if (!session) throw new AppError("not_found", "no such session");
      // Another member's session is theirs to end, or a manager's of their role (never an owner's
      // by an admin): the same rule as removing them.
      if (session.operator_id !== context.operatorId) {
        const role = await deps.orgs.findMemberRole(organisationId, session.operator_id);
        requireManagedRole(context.role ?? "auditor", isRole(role) ? role : "owner", "ending the session of");
      }
      await deps.sessions.updateSessionRevoked(request.params.id, deps.now());
      return { ok: true as const };
    },
  );

  // Signing every other session out locks out whoever holds them: a fresh step-up first, as for a
  // change of factors, so that a session that only signed in (a backup code) cannot.
  const revokesOthers = checkedFirst(
    {
      ...operatorOnly("account"),
      stepUp: {
        doing: "signing out your other sessions",
        scope: "account",
        // A session begun with single sign-on is refused it outright (below), not asked to verify.
        when: (request) => !request.operatorSession?.sso_organisation_id,
      },
    },
    (request: FastifyRequest) => requireOperator(request, { mfa: true }),
  );
  api.post(
    "/api/sessions/revoke-others",
    { ...revokesOthers, schema: { response: { 200: othersRevoked } } },
    async (request) => {
      const context = await requireOperator(request, { mfa: true });
      // An SSO session acts in its organisation alone; signing the account out everywhere is not its.
      refuseInSsoSession(context.session, "signing out your sessions in every organisation");
      // The caller's own other sessions, wherever they act: other members' sessions are theirs.
      const revoked = await deps.sessions.updateOtherSessionsRevoked(
        context.operatorId,
        context.session.id,
        deps.now(),
      );
      return { ok: true as const, revoked };
    },
  );
}
