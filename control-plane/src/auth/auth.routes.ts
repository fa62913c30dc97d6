// Sign-in and account routes (spec 4.3 "Sign-in and account", 3.3), organisations, and the
// operator and session parts of Access.
import { AppError } from "@latch/shared/errors";
import type { FastifyInstance } from "fastify";
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import type { OrgsService } from "../orgs/orgs.service.ts";
import type { EmailCodeService } from "./email-code.service.ts";
import {
  clearSessionCookies,
  requireOperator,
  requireOrganisation,
  setSessionCookies,
} from "./operator-guard.ts";
import { OPERATOR_ONLY } from "./principal.ts";
import type { SessionsRepo } from "./sessions.ts";
import type { TotpService } from "./totp.service.ts";

export interface AuthRouteDeps {
  /** The clients and grants parts of the access snapshot, and the issuance ledger. */
  access?: {
    listClients(organisationId: string): Promise<Record<string, unknown>[]>;
    listGrants(organisationId: string): Promise<Record<string, unknown>[]>;
    listLedger(organisationId: string): Promise<Record<string, unknown>[]>;
  };
  db: Kysely<Database>;
  emailCodes: EmailCodeService;
  totp: TotpService;
  sessions: SessionsRepo;
  orgs: OrgsService;
  isSecureCookies: boolean;
  now: () => Date;
}

type Body = Record<string, unknown>;

function bodyOf(raw: unknown): Body {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== "object" || Array.isArray(raw))
    throw new AppError("invalid_request", "the body must be a JSON object");
  return raw as Body;
}

export function registerAuthRoutes(app: FastifyInstance, deps: AuthRouteDeps): void {
  const { db } = deps;

  app.post("/api/auth/otp/send", async (request) => {
    await deps.emailCodes.sendCode(bodyOf(request.body).email);
    return { ok: true };
  });

  app.post("/api/auth/otp/verify", async (request, reply) => {
    const body = bodyOf(request.body);
    const { operatorId, isNew } = await deps.emailCodes.verifyCode(body.email, body.otp);
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
    return {
      ok: true,
      enroll: !operator.totp_enabled,
      verify: operator.totp_enabled,
      csrf_token: created.csrfToken,
    };
  });

  app.post("/api/auth/totp/start", { config: OPERATOR_ONLY }, async (request) => {
    const context = await requireOperator(request, db, { mfa: false });
    return deps.totp.start(context.operatorId, {
      isSessionReady: context.session.is_mfa_passed,
      currentCode: bodyOf(request.body).current_code,
    });
  });

  app.get("/api/auth/totp/pending", { config: OPERATOR_ONLY }, async (request) => {
    const context = await requireOperator(request, db, { mfa: false });
    return deps.totp.pending(context.operatorId, { isSessionReady: context.session.is_mfa_passed });
  });

  app.post("/api/auth/totp/confirm", { config: OPERATOR_ONLY }, async (request) => {
    const context = await requireOperator(request, db, { mfa: false });
    const backupCodes = await deps.totp.confirm(context.operatorId, bodyOf(request.body).code, {
      isSessionReady: context.session.is_mfa_passed,
    });
    await deps.sessions.updateSessionMfaPassed(context.session.id);
    return { ok: true, backup_codes: backupCodes };
  });

  app.post("/api/auth/totp/verify", { config: OPERATOR_ONLY }, async (request) => {
    const context = await requireOperator(request, db, { mfa: false });
    const { usedBackupCode } = await deps.totp.verify(context.operatorId, bodyOf(request.body).code);
    await deps.sessions.updateSessionMfaPassed(context.session.id);
    return { ok: true, used_backup_code: usedBackupCode };
  });

  app.get("/api/auth/me", { config: OPERATOR_ONLY }, async (request) => {
    const context = await requireOperator(request, db, { mfa: false });
    const operator = await deps.totp.getOperator(context.operatorId);
    const organisation = context.organisationId
      ? await deps.orgs.findOrganisation(context.organisationId)
      : undefined;
    return {
      email: operator.email,
      totp_enabled: operator.totp_enabled,
      backup_codes_remaining: await deps.totp.countUnusedBackupCodes(context.operatorId),
      created_at: operator.created_at.toISOString(),
      session_ready: context.session.is_mfa_passed,
      organisation: organisation ?? null,
    };
  });

  app.post("/api/auth/backup-codes/regenerate", { config: OPERATOR_ONLY }, async (request) => {
    const context = await requireOperator(request, db, { mfa: true });
    return {
      backup_codes: await deps.totp.regenerateBackupCodes(context.operatorId, bodyOf(request.body).code),
    };
  });

  app.post("/api/auth/logout", { config: OPERATOR_ONLY }, async (request, reply) => {
    const context = await requireOperator(request, db, { mfa: false });
    await deps.sessions.updateSessionRevoked(context.session.id, deps.now());
    clearSessionCookies(reply, deps.isSecureCookies);
    return { ok: true };
  });

  app.post("/api/orgs", { config: OPERATOR_ONLY }, async (request, reply) => {
    const context = await requireOperator(request, db, { mfa: true });
    const organisation = await deps.orgs.createOrganisation(context.operatorId, bodyOf(request.body).name);
    await deps.sessions.updateSessionOrganisation(context.session.id, organisation.id);
    return reply.status(201).send({ organisation });
  });

  app.delete("/api/orgs", { config: OPERATOR_ONLY }, async (request) => {
    const context = await requireOperator(request, db, { mfa: true });
    const organisationId = requireOrganisation(context);
    await deps.orgs.deleteOrganisation(context.operatorId, organisationId, bodyOf(request.body).confirm_name);
    await deps.sessions.updateSessionOrganisation(
      context.session.id,
      await deps.orgs.findDefaultOrganisation(context.operatorId),
    );
    return { ok: true };
  });

  app.get("/api/access", { config: OPERATOR_ONLY }, async (request) => {
    const context = await requireOperator(request, db, { mfa: true });
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
        user_agent: s.user_agent,
        created_at: s.created_at.toISOString(),
        last_access_at: s.last_seen_at.toISOString(),
        ready: s.is_mfa_passed,
        current: s.id === context.session.id,
      })),
    };
  });

  app.get("/api/access/events", { config: OPERATOR_ONLY }, async (request) => {
    const context = await requireOperator(request, db, { mfa: true });
    return { events: (await deps.access?.listLedger(requireOrganisation(context))) ?? [] };
  });

  app.post<{ Params: { id: string } }>(
    "/api/sessions/:id/revoke",
    { config: OPERATOR_ONLY },
    async (request) => {
      const context = await requireOperator(request, db, { mfa: true });
      const organisationId = requireOrganisation(context);
      if (request.params.id === context.session.id) {
        throw new AppError("cannot_revoke_current", "this is your current session; sign out instead");
      }
      const listed = await deps.sessions.findSessionsInOrganisation(organisationId);
      if (!listed.some((s) => s.id === request.params.id)) throw new AppError("not_found", "no such session");
      await deps.sessions.updateSessionRevoked(request.params.id, deps.now());
      return { ok: true };
    },
  );

  app.post("/api/sessions/revoke-others", { config: OPERATOR_ONLY }, async (request) => {
    const context = await requireOperator(request, db, { mfa: true });
    const organisationId = requireOrganisation(context);
    const revoked = await deps.sessions.updateOtherSessionsRevoked(
      organisationId,
      context.session.id,
      deps.now(),
    );
    return { ok: true, revoked };
  });
}
