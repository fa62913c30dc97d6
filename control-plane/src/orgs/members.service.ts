// An organisation's members (DECISIONS "Teams"): the listing (email, role, joined, last seen),
// changing a role, removing a member, leaving, and handing ownership over. Every change runs under
// the organisation's members lock and keeps one owner at least (409 last_owner); an admin never
// touches an owner or makes one (permissions.ts MANAGED_ROLES). A change and its audit row commit
// together: a crash between them can lose neither alone.
import { AppError } from "@latch/shared/errors";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { isRole, mayPerform, type Role, requireManagedRole, requirePermission } from "../auth/permissions.ts";
import type { InvitesRepo } from "./invites.repo.ts";
import type { OrgsRepo } from "./orgs.repo.ts";
import { refuseOwnerOverLimit } from "./orgs.service.ts";

/** The repos of one transaction holding an organisation's members lock, and its audit append. */
export interface MembersLocked {
  orgs: OrgsRepo;
  invites: InvitesRepo;
  /** Appends the audit row in the same transaction: it commits with the change, or neither does. */
  recordEvent(event: AuditEvent): Promise<void>;
  /**
   * Revokes in this transaction the trusted clients (avt_) whose bearer `operatorId`, a member
   * gone, holds, `actor` on each audit row (clients.service.ts revokeHeldBy): a crash after the
   * removal commits cannot leave one live.
   */
  revokeClientsHeldBy(operatorId: string, actor: string): Promise<void>;
}

export interface MembersDeps {
  repo: OrgsRepo;
  /** Runs `fn` in one transaction holding the organisation's members lock (services.ts). */
  inMembersLock<T>(organisationId: string, fn: (locked: MembersLocked) => Promise<T>): Promise<T>;
  /** Each member's last access through a session acting in the organisation. */
  findLastSeen(organisationId: string): Promise<Map<string, Date>>;
  /**
   * A member is gone from the organisation (removed or left), after the removal committed: their
   * sessions there move to `toOrganisationId` (one they still belong to, or none) and the OAuth
   * grants they gave there are destroyed (spec 3.4, as for a client). Their membership is already
   * deleted, which alone ends their sessions' access: the principal hook and /mcp read membership
   * on every request; the trusted clients they hold were revoked with it (`revokeClientsHeldBy`).
   */
  onMemberGone(organisationId: string, operatorId: string, toOrganisationId: string | null): Promise<void>;
  now: () => Date;
}

/** A member as GET /api/orgs/members lists them. */
export interface MemberListing {
  operator_id: string;
  email: string;
  role: string;
  joined_at: string;
  last_seen_at: string | null;
}

/**
 * The caller of a members change. Their role is read again under the lock: a change made at the
 * same moment (another owner demoting them) is judged by the role they hold now.
 */
export interface MemberActor {
  organisationId: string;
  operatorId: string;
  actor: string;
}

function checkRole(raw: unknown): Role {
  if (!isRole(raw)) throw new AppError("invalid_request", "role is one of owner, admin, approver, auditor");
  return raw;
}

/**
 * The standing approvals a member with `role` may no longer give (none: removed): their first
 * approvals of these, on requests still waiting for a second member, stop counting at the change,
 * so a member invited back or promoted again later does not bring them back (DECISIONS "Teams").
 */
function firstApprovalsLost(role: Role | null): string[] {
  const kept = (policy: string) =>
    role !== null &&
    mayPerform(role, policy === "folder_standing" ? "approvals.decide_folder" : "approvals.decide");
  return ["item_standing", "folder_standing"].filter((policy) => !kept(policy));
}

/** Forgets a member's first approvals their change took the right to give; the audit detail it adds. */
async function voidFirstApprovals(
  orgs: OrgsRepo,
  organisationId: string,
  operatorId: string,
  role: Role | null,
): Promise<{ first_approvals_voided?: number }> {
  const voided = await orgs.updateFirstApprovalsVoided(organisationId, operatorId, firstApprovalsLost(role));
  return voided > 0 ? { first_approvals_voided: voided } : {};
}

const LAST_OWNER =
  "an organisation keeps one owner at least: make another member an owner (or transfer ownership) first";

export function createMembersService(deps: MembersDeps) {
  /** The member `operatorId` as read under the lock, or 404. */
  async function loadMember(orgs: OrgsRepo, organisationId: string, operatorId: string) {
    const member = await orgs.findMembership(organisationId, operatorId);
    if (!member || !isRole(member.role)) throw new AppError("not_found", "no such member");
    return { ...member, role: member.role };
  }

  /**
   * Deletes a membership under the lock, unless it is the last owner's, with its audit row; the
   * invitations they sent and nobody used yet go with them (accepting one also checks its sender,
   * invites.service.ts).
   */
  async function deleteMember(
    locked: MembersLocked,
    actor: MemberActor,
    gone: { operatorId: string; email: string; role: Role },
  ): Promise<void> {
    const { organisationId } = actor;
    if (gone.role === "owner" && (await locked.orgs.countOwners(organisationId)) <= 1) {
      throw new AppError("last_owner", LAST_OWNER);
    }
    await locked.orgs.deleteMembership(organisationId, gone.operatorId);
    // After the delete: an issue holding the membership row FOR SHARE has committed, so its client is seen.
    await locked.revokeClientsHeldBy(gone.operatorId, actor.actor);
    const voided = await voidFirstApprovals(locked.orgs, organisationId, gone.operatorId, null);
    const withdrawn = await locked.invites.updateInvitesWithdrawnBySender(
      organisationId,
      gone.operatorId,
      deps.now(),
    );
    for (const invite of withdrawn) {
      await locked.recordEvent({
        organisationId,
        actor: actor.actor,
        action: "invite_withdrawn",
        detail: { email: invite.email, role: invite.role, invite_id: invite.id, reason: "sender_removed" },
      });
    }
    await locked.recordEvent({
      organisationId,
      actor: actor.actor,
      action: "member_removed",
      detail: {
        operator_id: gone.operatorId,
        email: gone.email,
        role: gone.role,
        ...(gone.operatorId === actor.operatorId ? { left: true } : {}),
        ...voided,
      },
    });
  }

  /**
   * After a membership is gone (committed with its audit row and the revoke of its trusted
   * clients): its sessions and OAuth grants. The deleted membership alone already ends the
   * sessions' access, should this not run.
   */
  async function afterGone(actor: MemberActor, operatorId: string): Promise<void> {
    const elsewhere = await deps.repo.findDefaultOrganisationId(operatorId);
    await deps.onMemberGone(actor.organisationId, operatorId, elsewhere);
  }

  return {
    async listMembers(organisationId: string): Promise<MemberListing[]> {
      const [members, lastSeen] = await Promise.all([
        deps.repo.findMembers(organisationId),
        deps.findLastSeen(organisationId),
      ]);
      return members.map((member) => ({
        operator_id: member.operator_id,
        email: member.email,
        role: member.role,
        joined_at: member.created_at.toISOString(),
        last_seen_at: lastSeen.get(member.operator_id)?.toISOString() ?? null,
      }));
    },

    /** Gives `operatorId` another role; the last owner cannot be demoted. */
    async changeRole(actor: MemberActor, operatorId: string, rawRole: unknown): Promise<MemberListing> {
      const role = checkRole(rawRole);
      await deps.inMembersLock(actor.organisationId, async ({ orgs, recordEvent }) => {
        const me = await loadMember(orgs, actor.organisationId, actor.operatorId);
        const member = await loadMember(orgs, actor.organisationId, operatorId);
        requireManagedRole(me.role, member.role, "changing the role of");
        requireManagedRole(me.role, role, "making someone");
        if (member.role === role) return;
        if (member.role === "owner" && (await orgs.countOwners(actor.organisationId)) <= 1) {
          throw new AppError("last_owner", LAST_OWNER);
        }
        if (role === "owner") await refuseOwnerOverLimit(orgs, operatorId);
        await orgs.updateMembershipRole(actor.organisationId, operatorId, role);
        const voided = await voidFirstApprovals(orgs, actor.organisationId, operatorId, role);
        await recordEvent({
          organisationId: actor.organisationId,
          actor: actor.actor,
          action: "member_role_changed",
          detail: { operator_id: operatorId, email: member.email, from: member.role, to: role, ...voided },
        });
      });
      const listed = (await this.listMembers(actor.organisationId)).find((m) => m.operator_id === operatorId);
      if (!listed) throw new AppError("not_found", "no such member");
      return listed;
    },

    /**
     * Removes `operatorId`: their access to the organisation ends at once (sessions, OAuth grants);
     * what they approved stays in force and in the audit, under their operator id and email.
     */
    async removeMember(actor: MemberActor, operatorId: string): Promise<void> {
      await deps.inMembersLock(actor.organisationId, async (locked) => {
        const me = await loadMember(locked.orgs, actor.organisationId, actor.operatorId);
        const member = await loadMember(locked.orgs, actor.organisationId, operatorId);
        // Removing oneself is leaving, which every member may do.
        if (operatorId !== actor.operatorId) requireManagedRole(me.role, member.role, "removing");
        await deleteMember(locked, actor, { operatorId, email: member.email, role: member.role });
      });
      await afterGone(actor, operatorId);
    },

    /** The caller leaves the organisation (the last owner cannot). */
    async leave(actor: MemberActor): Promise<void> {
      await deps.inMembersLock(actor.organisationId, async (locked) => {
        const member = await loadMember(locked.orgs, actor.organisationId, actor.operatorId);
        await deleteMember(locked, actor, {
          operatorId: actor.operatorId,
          email: member.email,
          role: member.role,
        });
      });
      await afterGone(actor, actor.operatorId);
    },

    /** Makes `operatorId` an owner and the caller (an owner: the route's action) an admin. */
    async transferOwnership(actor: MemberActor, rawOperatorId: unknown): Promise<void> {
      if (typeof rawOperatorId !== "string" || rawOperatorId === "") {
        throw new AppError("invalid_request", "operator_id names the member who becomes the owner");
      }
      const operatorId = rawOperatorId;
      if (operatorId === actor.operatorId) {
        throw new AppError("invalid_request", "you own this organisation already: name another member");
      }
      await deps.inMembersLock(actor.organisationId, async ({ orgs, recordEvent }) => {
        requirePermission(
          (await loadMember(orgs, actor.organisationId, actor.operatorId)).role,
          "org.manage",
        );
        const member = await loadMember(orgs, actor.organisationId, operatorId);
        if (member.role !== "owner") await refuseOwnerOverLimit(orgs, operatorId);
        await orgs.updateMembershipRole(actor.organisationId, operatorId, "owner");
        await orgs.updateMembershipRole(actor.organisationId, actor.operatorId, "admin");
        const voided = await voidFirstApprovals(orgs, actor.organisationId, actor.operatorId, "admin");
        await recordEvent({
          organisationId: actor.organisationId,
          actor: actor.actor,
          action: "ownership_transferred",
          detail: {
            to_operator_id: operatorId,
            to_email: member.email,
            to_was: member.role,
            from_operator_id: actor.operatorId,
            ...voided,
          },
        });
      });
    },
  };
}

export type MembersService = ReturnType<typeof createMembersService>;
