// GET /sign-in, /sign-up, /enroll-totp, /verify-totp and /console (spec 4.3 "Sign-in and account",
// 3.3): each page first sends the browser where its session belongs, by the session's state and
// whether the operator has an authenticator; then answers the page (public/pages/) with the
// headers of page-headers.ts. Also every file of public/assets/ at /assets/<name>.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { TotpService } from "../auth/totp.service.ts";
import { pageSchema } from "../http/route-schemas.ts";
import { readPage, registerAssets, sendPage } from "./page-files.ts";

export interface PageRouteDeps {
  totp: Pick<TotpService, "findOperator" | "countUnusedBackupCodes">;
  /** The organisation's name (orgs/ answers it; pages/ imports no feature that imports it). */
  orgs: { findOrganisation(organisationId: string): Promise<{ name: string } | undefined> };
}

/** Where a browser is in sign-in (spec 3.3): no session, pending (enrol or verify next), or ready. */
export type SignInState =
  | { kind: "none" }
  | { kind: "needs_enrollment"; operator: PageOperator }
  | { kind: "needs_verification"; operator: PageOperator }
  | { kind: "ready"; operator: PageOperator; organisationId: string | null };

interface PageOperator {
  id: string;
  email: string;
  totp_enabled: boolean;
}

const ENROLL = "/enroll-totp";
const VERIFY = "/verify-totp";
const CONSOLE = "/console";
const SIGN_IN = "/sign-in";

export function registerPageRoutes(app: FastifyInstance, deps: PageRouteDeps): void {
  async function stateOf(request: FastifyRequest): Promise<SignInState> {
    const session = request.operatorSession;
    if (!session) return { kind: "none" };
    const row = await deps.totp.findOperator(session.operator_id);
    if (!row) return { kind: "none" };
    const operator: PageOperator = { id: row.id, email: row.email, totp_enabled: row.totp_enabled };
    if (session.is_mfa_passed) return { kind: "ready", operator, organisationId: session.organisation_id };
    return operator.totp_enabled
      ? { kind: "needs_verification", operator }
      : { kind: "needs_enrollment", operator };
  }

  const pages = {
    signIn: readPage("pages/sign-in.html"),
    signUp: readPage("pages/sign-up.html"),
    enroll: readPage("pages/enroll-totp.html", ["reenroll", "heading"]),
    verify: readPage("pages/verify-totp.html"),
    console: readPage("pages/console.html", ["email", "organisation", "backupCodesRemaining"]),
  };
  const html = (reply: FastifyReply, page: string): FastifyReply => sendPage(reply, "account", page);

  const redirect = (reply: FastifyReply, to: string) => reply.redirect(to, 302);

  for (const [path, page] of [
    ["/sign-in", pages.signIn],
    ["/sign-up", pages.signUp],
  ] as const) {
    app.get(path, { schema: pageSchema }, async (request, reply) => {
      const state = await stateOf(request);
      if (state.kind === "ready") return redirect(reply, CONSOLE);
      if (state.kind === "needs_enrollment") return redirect(reply, ENROLL);
      if (state.kind === "needs_verification") return redirect(reply, VERIFY);
      return html(reply, page.fill({}));
    });
  }

  app.get(ENROLL, { schema: pageSchema }, async (request, reply) => {
    const state = await stateOf(request);
    if (state.kind === "none") return redirect(reply, SIGN_IN);
    // Replacing an active authenticator needs this session past the step first.
    if (state.kind === "needs_verification") return redirect(reply, VERIFY);
    // An active authenticator is replaced only after a current code from it (the script asks).
    const isReenrolment = state.kind === "ready" && state.operator.totp_enabled;
    return html(
      reply,
      pages.enroll.fill({
        reenroll: String(isReenrolment),
        heading: isReenrolment ? "Replace your authenticator" : "Set up your authenticator app",
      }),
    );
  });

  app.get(VERIFY, { schema: pageSchema }, async (request, reply) => {
    const state = await stateOf(request);
    if (state.kind === "none") return redirect(reply, SIGN_IN);
    if (state.kind === "needs_enrollment") return redirect(reply, ENROLL);
    if (state.kind === "ready") return redirect(reply, CONSOLE);
    return html(reply, pages.verify.fill({}));
  });

  app.get(CONSOLE, { schema: pageSchema }, async (request, reply) => {
    const state = await stateOf(request);
    if (state.kind === "none") return redirect(reply, SIGN_IN);
    if (state.kind === "needs_enrollment") return redirect(reply, ENROLL);
    if (state.kind === "needs_verification") return redirect(reply, VERIFY);
    const [organisation, backupCodes] = await Promise.all([
      state.organisationId ? deps.orgs.findOrganisation(state.organisationId) : undefined,
      deps.totp.countUnusedBackupCodes(state.operator.id),
    ]);
    return html(
      reply,
      pages.console.fill({
        email: state.operator.email,
        organisation: organisation?.name ?? "None yet",
        backupCodesRemaining: String(backupCodes),
      }),
    );
  });

  registerAssets(app, "assets", "/assets/");
}
