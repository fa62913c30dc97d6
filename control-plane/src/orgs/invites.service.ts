// Invitations (DECISIONS "Teams"): an owner or admin invites an address with a role; the mail
// carries BASE_URL/invite?token=..., a single-use token valid 7 days and stored only as its
// SHA-256; 50 a day per organisation. The invitee signs in or signs up with that address (any
// other is refused, with a sentence) and lands in the organisation. Pending ones can be withdrawn.
import { randomBytes } from "node:crypto";
import { sha256Hex } from "@latch/shared/crypto/hash";
import { AppError } from "@latch/shared/errors";
import { newId } from "@latch/shared/ids";
import { normaliseEmail } from "../auth/email-code.service.ts";
import { isRole, MANAGED_ROLES, mayPerform, type Role, requireManagedRole } from "../auth/permissions.ts";
import type { Mail } from "../mail/mailer.ts";
import { inviteMail } from "./invite-text.ts";
import type { InvitesRepo, InviteWithNames } from "./invites.repo.ts";
import type { MemberActor, MembersLocked } from "./members.service.ts";
import { refuseOwnerOverLimit } from "./orgs.service.ts";

/** DECISIONS "Teams": an invitation is good for 7 days. */
export const INVITE_TTL_MS = 7 * 24 * 60 * 60 * 1000;
/** DECISIONS "Teams": 50 invitations a day per organisation; the 51st is 429 with retry_after. */
export const MAX_INVITES_PER_DAY = 50;
const DAY_MS = 24 * 60 * 60 * 1000;
/** The form of an invitation token: 32 random bytes, base64url. */
export const INVITE_TOKEN = /^[A-Za-z0-9_-]{43}$/;

export interface InvitesDeps {
  repo: InvitesRepo;
  inMembersLock<T>(organisationId: string, fn: (locked: MembersLocked) => Promise<T>): Promise<T>;
  sendMail(mail: Mail): Promise<void>;
  baseUrl: string;
  now: () => Date;
}

/** An invitation as the members listing shows it. */
export interface InviteListing {
  id: string;
  email: string;
  role: string;
  invited_by: { operator_id: string; email: string | null };
  created_at: string;
  expires_at: string;
}

/** What an invitation link shows before it is accepted (the invitation page). */
export interface InvitationView {
  organisation: { id: string; name: string };
  email: string;
  role: Role;
  invited_by_email: string | null;
  expires_at: Date;
  /** Why it can no longer be accepted, as a code and a sentence; undefined while it can. */
  refusal?: AppError;
}

function toListing(invite: InviteWithNames): InviteListing {
  return {
    id: invite.id,
    email: invite.email,
    role: invite.role,
    invited_by: { operator_id: invite.invited_by, email: invite.invited_by_email },
    created_at: invite.created_at.toISOString(),
    expires_at: invite.expires_at.toISOString(),
  };
}

/** "a…@example.com": enough for its owner to recognise, little for anyone else holding the link. */
export function maskEmail(email: string): string {
  const at = email.lastIndexOf("@");
  return at < 1 ? "…" : `${email[0]}…${email.slice(at)}`;
}

/** Why an invitation cannot be accepted any more at `now`, or undefined while it can. */
function closedReason(invite: InviteWithNames, now: Date): AppError | undefined {
  if (invite.accepted_at)
    return new AppError("invite_used", "this invitation was used already; ask for a new one");
  if (invite.withdrawn_at)
    return new AppError("invite_withdrawn", "this invitation was withdrawn; ask for a new one");
  if (invite.expires_at <= now) {
    return new AppError(
      "invite_expired",
      "this invitation has expired (they last 7 days); ask for a new one",
    );
  }
  return undefined;
}

const UNKNOWN =
  "this invitation link is not valid: check that the whole link was opened, or ask for a new one";

/**
 * Why an invitation read open before the members lock is closed now that the lock is held: used,
 * withdrawn or expired meanwhile, or 404 when it went with its organisation.
 */
async function closedNow(invites: InvitesRepo, invite: InviteWithNames, at: Date): Promise<AppError> {
  const now = await invites.findInviteById(invite.organisation_id, invite.id);
  if (!now) return new AppError("not_found", UNKNOWN);
  return closedReason(now, at) ?? new AppError("invite_used", "this invitation was used already");
}

export function createInvitesService(deps: InvitesDeps) {
  async function findByToken(token: unknown): Promise<InviteWithNames> {
    const invite =
      typeof token === "string" && INVITE_TOKEN.test(token)
        ? await deps.repo.findInviteByTokenHash(sha256Hex(token))
        : undefined;
    if (!invite) throw new AppError("not_found", UNKNOWN);
    return invite;
  }

  return {
    /**
     * Invites `email` as `role` and mails the link. A member's address is 409 already_member; a
     * pending invitation of the same address is replaced (its link stops working).
     */
    async invite(
      actor: MemberActor,
      input: { email?: unknown; role?: unknown },
    ): Promise<{ invite: InviteListing; notifyFailed: boolean }> {
      const email = normaliseEmail(input.email);
      if (!isRole(input.role)) {
        throw new AppError("invalid_request", "role is one of owner, admin, approver, auditor");
      }
      const role = input.role;
      const token = randomBytes(32).toString("base64url");
      const at = deps.now();
      const created = await deps.inMembersLock(
        actor.organisationId,
        async ({ orgs, invites, recordEvent }) => {
          const me = await orgs.findMembership(actor.organisationId, actor.operatorId);
          if (!me || !isRole(me.role)) throw new AppError("not_found", "no such organisation");
          requireManagedRole(me.role, role, "inviting");
          if (await orgs.findMemberByEmail(actor.organisationId, email)) {
            throw new AppError("already_member", `${email} is a member of this organisation already`);
          }
          const { count, oldest } = await invites.countInvitesSince(
            actor.organisationId,
            new Date(at.getTime() - DAY_MS),
          );
          if (count >= MAX_INVITES_PER_DAY) {
            const from = oldest && oldest < at ? oldest : at;
            const retryAfter = Math.max(Math.ceil((from.getTime() + DAY_MS - at.getTime()) / 1000), 1);
            throw new AppError(
              "rate_limited",
              `an organisation sends at most ${MAX_INVITES_PER_DAY} invitations a day; try again later`,
              { extra: { retry_after: retryAfter } },
            );
          }
          const id = newId("inv");
          const replaced = await invites.updateInvitesWithdrawnForEmail(
            actor.organisationId,
            email,
            actor.operatorId,
            at,
          );
          for (const old of replaced) {
            // Replacing is withdrawing: an admin may not end an owner's invitation by inviting the
            // same address again (the throw rolls the whole change back, withdrawals included).
            requireManagedRole(me.role, isRole(old.role) ? old.role : "owner", "replacing the invitation of");
            await recordEvent({
              organisationId: actor.organisationId,
              actor: actor.actor,
              action: "invite_withdrawn",
              detail: { email, role: old.role, invite_id: old.id, replaced_by: id },
            });
          }
          await invites.insertInvite({
            id,
            organisation_id: actor.organisationId,
            email,
            role,
            token_hash: sha256Hex(token),
            invited_by: actor.operatorId,
            created_at: at,
            expires_at: new Date(at.getTime() + INVITE_TTL_MS),
            accepted_at: null,
            accepted_by: null,
            withdrawn_at: null,
            withdrawn_by: null,
          });
          const row = await invites.findInviteById(actor.organisationId, id);
          if (!row) throw new AppError("internal", "the invitation was not stored");
          await recordEvent({
            organisationId: actor.organisationId,
            actor: actor.actor,
            action: "member_invited",
            detail: { email, role, invite_id: id },
          });
          return row;
        },
      );
      const mail = inviteMail({
        organisationName: created.organisation_name,
        inviterEmail: created.invited_by_email ?? "A member",
        role,
        link: `${deps.baseUrl}/invite?token=${token}`,
        expiresAt: created.expires_at,
      });
      // As for approvals (spec 6): sending is attempted, its outcome reported, never fatal.
      const notifyFailed = await deps.sendMail({ to: email, ...mail }).then(
        () => false,
        () => true,
      );
      return { invite: toListing(created), notifyFailed };
    },

    listPending: async (organisationId: string): Promise<InviteListing[]> =>
      (await deps.repo.findPendingInvites(organisationId, deps.now())).map(toListing),

    /** Withdraws a pending invitation: its link stops working. */
    async withdraw(actor: MemberActor, id: string): Promise<void> {
      await deps.inMembersLock(actor.organisationId, async ({ orgs, invites, recordEvent }) => {
        const invite = await invites.findInviteById(actor.organisationId, id);
        if (!invite || !isRole(invite.role)) throw new AppError("not_found", "no such invitation");
        const me = await orgs.findMembership(actor.organisationId, actor.operatorId);
        if (!me || !isRole(me.role)) throw new AppError("not_found", "no such organisation");
        requireManagedRole(me.role, invite.role, "withdrawing the invitation of");
        const refusal = closedReason(invite, deps.now());
        if (refusal && refusal.code !== "invite_expired") throw refusal;
        if (!(await invites.updateInviteWithdrawn(actor.organisationId, id, actor.operatorId, deps.now()))) {
          throw new AppError("invite_used", "this invitation was used or withdrawn a moment ago");
        }
        await recordEvent({
          organisationId: actor.organisationId,
          actor: actor.actor,
          action: "invite_withdrawn",
          detail: { email: invite.email, role: invite.role, invite_id: invite.id },
        });
      });
    },

    /** The invitation a link names, for its page; 404 for a token that names none. */
    async describe(token: unknown): Promise<InvitationView> {
      const invite = await findByToken(token);
      if (!isRole(invite.role)) throw new AppError("not_found", UNKNOWN);
      const refusal = closedReason(invite, deps.now());
      return {
        organisation: { id: invite.organisation_id, name: invite.organisation_name },
        email: invite.email,
        role: invite.role,
        invited_by_email: invite.invited_by_email,
        expires_at: invite.expires_at,
        ...(refusal ? { refusal } : {}),
      };
    },

    /**
     * Accepts the invitation for the signed-in operator, whose address must be the one invited.
     * The invitation is spent and the membership added in one transaction; the caller's session
     * then switches to the organisation (the route's work).
     */
    async accept(
      operator: { operatorId: string; email: string },
      token: unknown,
    ): Promise<{ organisationId: string; role: Role }> {
      const invite = await findByToken(token);
      const at = deps.now();
      const refusal = closedReason(invite, at);
      if (refusal) throw refusal;
      if (invite.email !== operator.email.toLowerCase()) {
        throw new AppError(
          "invite_wrong_account",
          `this invitation was sent to ${maskEmail(invite.email)}, and you are signed in as ${operator.email}: sign out, then sign in or sign up with the invited address`,
        );
      }
      if (!isRole(invite.role)) throw new AppError("not_found", UNKNOWN);
      const joined = await deps.inMembersLock(
        invite.organisation_id,
        async ({ orgs, invites, recordEvent }): Promise<{ role: Role } | { refusal: AppError }> => {
          // The invitation speaks for the member who sent it: once they are gone, or may no longer
          // give that role (removed, demoted), it is void. A removed admin cannot come back in
          // through an invitation they sent to another address of theirs.
          const inviter = await orgs.findMembership(invite.organisation_id, invite.invited_by);
          const inviterRole = isRole(inviter?.role) ? inviter.role : undefined;
          if (
            !inviterRole ||
            !mayPerform(inviterRole, "members.write") ||
            !MANAGED_ROLES[inviterRole].includes(invite.role as Role)
          ) {
            // Answered, not thrown: the withdrawal commits, so a later promotion of the sender
            // does not bring the invitation back, and the members list stops showing it. Closed
            // while this waited for the lock (another tab spent it, it was withdrawn, or it went
            // with its organisation): answered as it is now, and the ledger records no withdrawal.
            if (
              !(await invites.updateInviteWithdrawn(invite.organisation_id, invite.id, invite.invited_by, at))
            ) {
              throw await closedNow(invites, invite, at);
            }
            await recordEvent({
              organisationId: invite.organisation_id,
              actor: "system",
              action: "invite_withdrawn",
              detail: {
                email: invite.email,
                role: invite.role,
                invite_id: invite.id,
                reason: "sender_cannot_invite",
              },
            });
            return {
              refusal: new AppError(
                "invite_withdrawn",
                `the member who sent this invitation can no longer invite as ${invite.role}; ask for a new one`,
              ),
            };
          }
          if (
            invite.role === "owner" &&
            !(await orgs.findMembership(invite.organisation_id, operator.operatorId))
          ) {
            await refuseOwnerOverLimit(orgs, operator.operatorId);
          }
          if (!(await invites.updateInviteAccepted(invite.id, operator.operatorId, at))) {
            throw await closedNow(invites, invite, at);
          }
          // A member already (joined another way meanwhile): the invitation is spent, the role kept.
          const role: Role = isRole(invite.role) ? invite.role : "auditor";
          const isNew = await orgs.insertMembershipIfMissing({
            organisationId: invite.organisation_id,
            operatorId: operator.operatorId,
            role,
            createdAt: at,
          });
          const member = await orgs.findMembership(invite.organisation_id, operator.operatorId);
          const joinedAs = isRole(member?.role) ? member.role : role;
          // Audited either way: a spent invitation is in the ledger, and `already_member` says the
          // role named is the one the member kept, not the invitation's.
          await recordEvent({
            organisationId: invite.organisation_id,
            actor: `operator:${operator.operatorId}`,
            action: "member_joined",
            detail: {
              operator_id: operator.operatorId,
              email: invite.email,
              role: joinedAs,
              invite_id: invite.id,
              invited_by: invite.invited_by,
              ...(isNew ? {} : { already_member: true, invited_role: invite.role }),
            },
          });
          return { role: joinedAs };
        },
      );
      if ("refusal" in joined) throw joined.refusal;
      return { organisationId: invite.organisation_id, role: joined.role };
    },
  };
}

export type InvitesService = ReturnType<typeof createInvitesService>;
