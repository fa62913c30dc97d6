// GET /invite?token= and POST /invite (DECISIONS "Teams"): the link in an invitation mail. The page
// shows the invitation; signed out, it offers sign-in and sign-up, which come back to it; signed in
// with the invited address, its Join button posts the token (X-CSRF-Token) and the session switches
// to the organisation. Opening the page spends nothing, so a mail scanner that fetches the link
// changes nothing. The token never reaches a log: the request logger drops query strings, and the
// page sends no Referer.
import { AppError } from "@latch/shared/errors";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { requireOperator } from "../auth/operator-guard.ts";
import { operatorOnly } from "../auth/principal.ts";
import type { SessionsRepo } from "../auth/sessions.ts";
import { signInFirst } from "../auth/sign-in-first.ts";
import { refuseInSsoSession } from "../auth/sso-session.ts";
import { checkedFirst, stringJudgedByService, type ZodTypeProvider } from "../http/route-schemas.ts";
import { oneLine } from "../mail/mail-text.ts";
import { readPage, sendPage } from "../pages/page-files.ts";
import { ROLE_SUMMARIES } from "./invite-text.ts";
import { INVITE_TOKEN, type InvitesService, maskEmail } from "./invites.service.ts";
import type { OrgsService } from "./orgs.service.ts";

export interface InviteRouteDeps {
  invites: InvitesService;
  orgs: Pick<OrgsService, "findOrganisation">;
  sessions: Pick<SessionsRepo, "updateSessionOrganisation">;
  /** The signed-in operator's address (the invitation is for one address). */
  findOperatorEmail(operatorId: string): Promise<string | undefined>;
}

const inviteQuery = z.object({ token: z.string().optional() });
const inviteAcceptance = z.object({ token: stringJudgedByService("the token of the invitation link") });
const joined = z.object({
  organisation: z.object({ id: z.string(), name: z.string(), slug: z.string(), role: z.string() }),
});

type Slots =
  | "state"
  | "heading"
  | "sentence"
  | "organisation"
  | "role"
  | "inviter"
  | "email"
  | "expires"
  | "roleSummary"
  | "signIn"
  | "signUp";

export function registerInviteRoutes(app: FastifyInstance, deps: InviteRouteDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const page = readPage<Slots>("pages/invite.html", [
    "state",
    "heading",
    "sentence",
    "organisation",
    "role",
    "inviter",
    "email",
    "expires",
    "roleSummary",
    "signIn",
    "signUp",
  ]);
  const blank: Record<Slots, string> = {
    state: "",
    heading: "",
    sentence: "",
    organisation: "",
    role: "",
    inviter: "",
    email: "",
    expires: "",
    roleSummary: "",
    signIn: "/sign-in",
    signUp: "/sign-up",
  };
  const answer = (reply: FastifyReply, values: Partial<Record<Slots, string>>) =>
    sendPage(reply, "invitation", page.fill({ ...blank, ...values }));
  const refused = (reply: FastifyReply, error: AppError) =>
    answer(reply.code(error.status), {
      state: "closed",
      heading: "Invitation",
      sentence: `${error.message.charAt(0).toUpperCase()}${error.message.slice(1)}.`,
    });

  const htmlAnswer = (description: string) => ({ description, content: { "text/html": z.string() } });
  api.get(
    "/invite",
    {
      config: {
        openapi: {
          summary: "The invitation link: shows the invitation, offers sign-in and sign-up, or Join",
          responses: {
            200: htmlAnswer("The invitation, with sign-in and sign-up or with Join"),
            302: {
              description: "Part-way through sign-in: to the step it lacks, coming back here",
              headers: { Location: "where to go" },
            },
            403: htmlAnswer("Opened by another account than the one invited, said in words"),
            404: htmlAnswer("An unknown or malformed link, said in words"),
            409: htmlAnswer("Used already, said in words"),
            410: htmlAnswer("Expired or withdrawn, said in words"),
          },
        },
      },
      schema: { querystring: inviteQuery },
    },
    async (request, reply) => {
      const token = request.query.token;
      const session = request.operatorSession;
      // A session part-way through sign-in finishes it first, then comes back here.
      if (session && !session.is_mfa_passed && typeof token === "string" && INVITE_TOKEN.test(token)) {
        return signInFirst(request, reply, `/invite?token=${token}`);
      }
      let invitation: Awaited<ReturnType<InvitesService["describe"]>>;
      try {
        invitation = await deps.invites.describe(token);
      } catch (error) {
        if (error instanceof AppError) return refused(reply, error);
        throw error;
      }
      if (invitation.refusal) return refused(reply, invitation.refusal);
      // Written by people: shown as the invitation mail shows them (invite-text.ts), so a direction
      // override or a zero-width character cannot make the name read as another one.
      const organisationName = oneLine(invitation.organisation.name);
      const shown = {
        organisation: organisationName,
        role: invitation.role,
        inviter: oneLine(invitation.invited_by_email ?? "a member"),
        email: maskEmail(invitation.email),
        expires: invitation.expires_at.toISOString(),
        roleSummary: `An ${invitation.role} may ${ROLE_SUMMARIES[invitation.role]}.`,
      };
      if (!session) {
        const back = encodeURIComponent(`/invite?token=${token}`);
        return answer(reply, {
          ...shown,
          state: "signed_out",
          heading: `Join ${organisationName}`,
          sentence: `You are invited to ${organisationName} on Latch. Sign in, or sign up, with the address the invitation was sent to; you come back here to join.`,
          signIn: `/sign-in?return_to=${back}`,
          signUp: `/sign-up?return_to=${back}`,
        });
      }
      const email = await deps.findOperatorEmail(session.operator_id);
      if (email?.toLowerCase() !== invitation.email) {
        return refused(
          reply,
          new AppError(
            "invite_wrong_account",
            `this invitation was sent to ${maskEmail(invitation.email)}, and you are signed in as ${email ?? "another account"}: sign out, then sign in or sign up with the invited address`,
          ),
        );
      }
      return answer(reply, {
        ...shown,
        state: "accept",
        heading: `Join ${organisationName}`,
        sentence: `${shown.inviter} invites you to ${organisationName} as an ${invitation.role}.`,
      });
    },
  );

  const operatorOf = (request: FastifyRequest) => requireOperator(request, { mfa: true });
  api.post(
    "/invite",
    {
      // The organisation is the invitation's, not the session's: no role is needed to join.
      ...checkedFirst({ ...operatorOnly("account"), openapi: { errors: [402, 409, 410] } }, operatorOf),
      schema: { body: inviteAcceptance, response: { 200: joined } },
    },
    async (request) => {
      const operator = await operatorOf(request);
      refuseInSsoSession(operator.session, "joining another organisation");
      const email = await deps.findOperatorEmail(operator.operatorId);
      if (!email) throw new AppError("unauthorized", "sign in first");
      const { organisationId, role } = await deps.invites.accept(
        { operatorId: operator.operatorId, email },
        request.body.token,
      );
      // The member lands in the organisation: this session acts there from now on.
      await deps.sessions.updateSessionOrganisation(operator.session.id, organisationId);
      const organisation = await deps.orgs.findOrganisation(organisationId);
      if (!organisation) throw new AppError("not_found", "no such organisation");
      return { organisation: { ...organisation, role } };
    },
  );
}
