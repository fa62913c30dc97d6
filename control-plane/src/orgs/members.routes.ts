// An organisation's members and settings (DECISIONS "Teams"): the listing with pending invitations,
// inviting, changing a role, removing, withdrawing an invitation, leaving, handing ownership over,
// and the settings (name, the two-person rule). Each route declares the action it performs; the
// principal hook judges it against the member's role (auth/permissions.ts).
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { type OrgOperator, requireOrgOperator } from "../auth/operator-guard.ts";
import { MANAGED_ROLES, mayPerform, type RouteAction } from "../auth/permissions.ts";
import { operatorOnly } from "../auth/principal.ts";
import type { SessionsRepo } from "../auth/sessions.ts";
import { bodyField, type StepUpRule } from "../auth/step-up.ts";
import {
  checkedFirst,
  okAnswer,
  stringJudgedByService,
  type ZodTypeProvider,
} from "../http/route-schemas.ts";
import type { InvitesService } from "./invites.service.ts";
import type { MemberActor, MembersService } from "./members.service.ts";
import type { OrgsService } from "./orgs.service.ts";

export interface MembersRouteDeps {
  members: MembersService;
  invites: InvitesService;
  orgs: OrgsService;
  sessions: Pick<SessionsRepo, "updateSessionOrganisation">;
}

const ROLE = "owner, admin, approver or auditor";
const member = z.object({
  operator_id: z.string(),
  email: z.string(),
  role: z.string(),
  joined_at: z.string(),
  last_seen_at: z.string().nullable(),
});
const invite = z.object({
  id: z.string(),
  email: z.string(),
  role: z.string(),
  invited_by: z.object({ operator_id: z.string(), email: z.string().nullable() }),
  created_at: z.string(),
  expires_at: z.string(),
});
const memberList = z.object({
  members: z.array(member),
  invites: z.array(invite),
  /** The roles the caller may invite as, give or take away (none without members.write). */
  assignable_roles: z.array(z.string()),
});
const invitation = z.object({
  email: stringJudgedByService("the address to invite"),
  role: stringJudgedByService(`the role the member gets: ${ROLE}`),
});
const invited = z.object({ invite, notify_failed: z.boolean() });
const memberParams = z.object({ operator_id: z.string() });
const roleChange = z.object({ role: stringJudgedByService(`the new role: ${ROLE}`) });
const memberAnswer = z.object({ member });
const transfer = z.object({ operator_id: stringJudgedByService("the member who becomes the owner") });
const left = z.object({
  ok: z.literal(true),
  organisation: z.object({ id: z.string(), name: z.string(), slug: z.string() }).nullable(),
});
const settings = z.object({
  organisation: z.object({
    id: z.string(),
    name: z.string(),
    slug: z.string(),
    standing_approvals_need: z.number().int(),
    standing_approvals_need_passkey: z.boolean(),
    created_at: z.string(),
  }),
  role: z.string(),
});
const settingsChange = z.object({
  name: stringJudgedByService("the organisation's new name, 1 to 80 characters"),
  standing_approvals_need: z
    .unknown()
    .optional()
    .meta({ type: "integer", description: "1, or 2: a second member confirms every standing approval" }),
  standing_approvals_need_passkey: z.unknown().optional().meta({
    type: "boolean",
    description:
      "true: every step-up in this organisation (standing approvals, members, policies) takes a passkey",
  }),
});

/** Who may do what here is what matters most after the credentials: a step-up first. */
const CHANGES_MEMBERS: StepUpRule = { doing: "changing members or roles" };
/** The two-person rule and the passkey setting guard every standing approval: a step-up first. */
const CHANGES_GUARDS: StepUpRule = {
  doing: "changing how standing approvals are guarded",
  when: (request) =>
    bodyField(request, "standing_approvals_need") !== undefined ||
    bodyField(request, "standing_approvals_need_passkey") !== undefined,
};

function actorOf(operator: OrgOperator): MemberActor {
  return { organisationId: operator.organisationId, operatorId: operator.operatorId, actor: operator.actor };
}

export function registerMembersRoutes(app: FastifyInstance, deps: MembersRouteDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const operatorOf = (request: FastifyRequest) => requireOrgOperator(request);
  /** A route's action, and the statuses its service refuses with beyond the ones every route has. */
  const as = (action: RouteAction, errors: readonly number[] = [], stepUp?: StepUpRule) =>
    checkedFirst({ ...operatorOnly(action), openapi: { errors }, ...(stepUp ? { stepUp } : {}) }, operatorOf);
  const reads = as("org.read");

  api.get("/api/orgs/members", { ...reads, schema: { response: { 200: memberList } } }, async (request) => {
    const { organisationId, role } = await operatorOf(request);
    const [members, invites] = await Promise.all([
      deps.members.listMembers(organisationId),
      deps.invites.listPending(organisationId),
    ]);
    return {
      members,
      invites,
      assignable_roles: mayPerform(role, "members.write") ? [...MANAGED_ROLES[role]] : [],
    };
  });

  api.post(
    "/api/orgs/members/invite",
    // 409 already a member; 429 the 51st invitation of a day.
    {
      ...as("members.write", [409, 429], CHANGES_MEMBERS),
      schema: { body: invitation, response: { 201: invited } },
    },
    async (request, reply) => {
      const operator = await operatorOf(request);
      const outcome = await deps.invites.invite(actorOf(operator), request.body);
      return reply.status(201).send({ invite: outcome.invite, notify_failed: outcome.notifyFailed });
    },
  );

  api.post(
    "/api/orgs/members/:operator_id/role",
    {
      ...as("members.write", [402, 409], CHANGES_MEMBERS),
      schema: { params: memberParams, body: roleChange, response: { 200: memberAnswer } },
    },
    async (request) => {
      const operator = await operatorOf(request);
      return {
        member: await deps.members.changeRole(
          actorOf(operator),
          request.params.operator_id,
          request.body.role,
        ),
      };
    },
  );

  api.delete(
    "/api/orgs/members/:operator_id",
    {
      ...as("members.write", [409], CHANGES_MEMBERS),
      schema: { params: memberParams, response: { 200: okAnswer } },
    },
    async (request) => {
      const operator = await operatorOf(request);
      await deps.members.removeMember(actorOf(operator), request.params.operator_id);
      return { ok: true as const };
    },
  );

  api.delete(
    "/api/orgs/invites/:id",
    {
      ...as("members.write", [409, 410]),
      schema: { params: z.object({ id: z.string() }), response: { 200: okAnswer } },
    },
    async (request) => {
      const operator = await operatorOf(request);
      await deps.invites.withdraw(actorOf(operator), request.params.id);
      return { ok: true as const };
    },
  );

  // Every member may leave (but the last owner); this session then acts in another of theirs.
  api.post(
    "/api/orgs/leave",
    { ...as("org.read", [409]), schema: { response: { 200: left } } },
    async (request) => {
      const operator = await operatorOf(request);
      await deps.members.leave(actorOf(operator));
      const next = await deps.orgs.findDefaultOrganisation(operator.operatorId);
      // A single sign-on session is not moved: leaving ended it (sessions.repo.ts).
      const isMoved = await deps.sessions.updateSessionOrganisation(operator.session.id, next);
      const organisation = next && isMoved ? await deps.orgs.findOrganisation(next) : undefined;
      return { ok: true as const, organisation: organisation ?? null };
    },
  );

  api.post(
    "/api/orgs/transfer",
    { ...as("org.manage", [402], CHANGES_MEMBERS), schema: { body: transfer, response: { 200: okAnswer } } },
    async (request) => {
      const operator = await operatorOf(request);
      await deps.members.transferOwnership(actorOf(operator), request.body.operator_id);
      return { ok: true as const };
    },
  );

  const settingsOf = async (organisationId: string, role: string) => {
    const organisation = await deps.orgs.getSettings(organisationId);
    return { organisation: { ...organisation, created_at: organisation.created_at.toISOString() }, role };
  };
  api.get("/api/orgs/settings", { ...reads, schema: { response: { 200: settings } } }, async (request) => {
    const operator = await operatorOf(request);
    return settingsOf(operator.organisationId, operator.role);
  });
  api.patch(
    "/api/orgs/settings",
    {
      ...as("org.manage", [], CHANGES_GUARDS),
      schema: { body: settingsChange, response: { 200: settings } },
    },
    async (request) => {
      const operator = await operatorOf(request);
      await deps.orgs.updateSettings(operator.organisationId, operator.actor, request.body);
      return settingsOf(operator.organisationId, operator.role);
    },
  );
}
