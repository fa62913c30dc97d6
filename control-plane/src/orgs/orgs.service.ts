// Organisations an operator owns or belongs to (spec 2.7, 4.3, 8): 1 to 80 characters, at most ten
// owned, a unique slug made from the name, the settings an owner changes (name, the two-person
// rule), deleted whole (everything in it) in one transaction with the name typed to confirm.
import { AppError } from "@latch/shared/errors";
import { newId } from "@latch/shared/ids";
import { refuseUnsafeText } from "@latch/shared/text/safe-string";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { isRole, requirePermission } from "../auth/permissions.ts";
import { isUniqueViolation } from "../db/database.ts";
import { slugOf, uniqueSlug } from "./org-slug.ts";
import type { OrganisationView, OrgsRepo } from "./orgs.repo.ts";

export const MAX_OWNED_ORGANISATIONS = 10;

/**
 * Spec 8: an account owns at most ten organisations, however it comes to own one (it creates it,
 * accepts an invitation as owner, is made owner or is handed the ownership): 402 `plan_limit`
 * when `operatorId` owns ten already. Takes the operator's lock until `repo`'s transaction ends,
 * so two replicas making the same account an owner cannot both pass the count.
 */
export async function refuseOwnerOverLimit(repo: OrgsRepo, operatorId: string): Promise<void> {
  await repo.inOperatorLock(operatorId, async (locked) => {
    if ((await locked.findOwnedCount(operatorId)) >= MAX_OWNED_ORGANISATIONS) {
      throw new AppError("plan_limit", `an account owns at most ${MAX_OWNED_ORGANISATIONS} organisations`);
    }
  });
}
/** Tries at a slug when another organisation took the same one at the same moment. */
const SLUG_ATTEMPTS = 3;

export function checkOrganisationName(raw: unknown): string {
  refuseUnsafeText("name", raw);
  const name = typeof raw === "string" ? raw.trim() : "";
  if (name.length < 1 || name.length > 80) {
    throw new AppError("invalid_request", "an organisation name is 1 to 80 characters");
  }
  return name;
}

/** An organisation as the API answers it. */
export interface OrganisationAnswer {
  id: string;
  name: string;
  slug: string;
}

/** The settings an owner may change (DECISIONS "Teams"). */
export interface SettingsChange {
  name?: unknown;
  standing_approvals_need?: unknown;
  standing_approvals_need_passkey?: unknown;
}

/** The settings a change sets, each checked (400 `invalid_request` naming what it may be). */
function checkSettingsChange(change: SettingsChange) {
  const next: {
    name?: string;
    standing_approvals_need?: number;
    standing_approvals_need_passkey?: boolean;
  } = {};
  if (change.name !== undefined) next.name = checkOrganisationName(change.name);
  if (change.standing_approvals_need !== undefined) {
    if (change.standing_approvals_need !== 1 && change.standing_approvals_need !== 2) {
      throw new AppError(
        "invalid_request",
        "standing_approvals_need is 1 (one member approves a standing approval) or 2 (a second member confirms it)",
      );
    }
    next.standing_approvals_need = change.standing_approvals_need;
  }
  if (change.standing_approvals_need_passkey !== undefined) {
    if (typeof change.standing_approvals_need_passkey !== "boolean") {
      throw new AppError(
        "invalid_request",
        "standing_approvals_need_passkey is true (every step-up here takes a passkey) or false",
      );
    }
    next.standing_approvals_need_passkey = change.standing_approvals_need_passkey;
  }
  return next;
}

async function loadOrganisationIn(repo: OrgsRepo, organisationId: string): Promise<OrganisationView> {
  const organisation = await repo.findOrganisationById(organisationId);
  if (!organisation) throw new AppError("not_found", "no such organisation");
  return organisation;
}

/**
 * The caller's membership, read in `repo`'s transaction (under the members lock), when their role
 * there may rename, change or delete the organisation (org.manage); a stranger gets 404, as for an
 * organisation that is not there, and a member of another role 403 `forbidden_role`.
 */
async function requireManager(repo: OrgsRepo, organisationId: string, operatorId: string) {
  const membership = operatorId ? await repo.findMembership(organisationId, operatorId) : undefined;
  // A role the table does not know (a row a newer version wrote) is no role, as in the guard.
  if (!membership || !isRole(membership.role)) throw new AppError("not_found", "no such organisation");
  requirePermission(membership.role, "org.manage");
  return membership;
}

export function createOrgsService(deps: {
  repo: OrgsRepo;
  now: () => Date;
  recordEvent?: (event: AuditEvent) => Promise<void>;
  /** Hosted: one transaction whose audit append commits with it (a settings change and its rows). */
  inTransaction?: <T>(
    fn: (tx: { repo: OrgsRepo; recordEvent: (event: AuditEvent) => Promise<void> }) => Promise<T>,
  ) => Promise<T>;
}) {
  const loadOrganisation = (organisationId: string) => loadOrganisationIn(deps.repo, organisationId);

  async function insertOrganisation(operatorId: string, name: string): Promise<OrganisationAnswer> {
    return deps.repo.inOperatorLock(operatorId, async (repo) => {
      await refuseOwnerOverLimit(repo, operatorId);
      const base = slugOf(name);
      const slug = uniqueSlug(base, await repo.findSlugsLike(base));
      const id = newId("org");
      await repo.insertOrganisation({ id, name, slug });
      await repo.insertMembership({ organisationId: id, operatorId, role: "owner", createdAt: deps.now() });
      return { id, name, slug };
    });
  }

  return {
    async createOrganisation(operatorId: string, rawName: unknown): Promise<OrganisationAnswer> {
      const name = checkOrganisationName(rawName);
      // Another operator may take the same slug between the look and the insert: the unique index
      // refuses the second, whose whole transaction rolled back, and it looks again.
      for (let attempt = 1; ; attempt++) {
        try {
          return await insertOrganisation(operatorId, name);
        } catch (error) {
          if (!isUniqueViolation(error) || attempt >= SLUG_ATTEMPTS) throw error;
        }
      }
    },

    /**
     * Deletes the organisation and, by cascade, every item, grant, event and membership in it. Under
     * the members lock, the caller must still be a member whose role may (org.manage, an owner's):
     * the route judged the role when the request arrived, and another owner may have demoted or
     * removed them since. The name is typed back to confirm.
     */
    async deleteOrganisation(
      operatorId: string,
      organisationId: string,
      confirmName: unknown,
    ): Promise<void> {
      await deps.repo.inMembersLock(organisationId, async (repo) => {
        const row = await requireManager(repo, organisationId, operatorId);
        if (confirmName !== row.name) {
          throw new AppError("confirm_name_mismatch", "confirm_name must be the organisation's name exactly");
        }
        await repo.deleteOrganisation(organisationId);
      });
    },

    /** The organisation's settings (every member may read them). */
    getSettings: (organisationId: string): Promise<OrganisationView> => loadOrganisation(organisationId),

    /**
     * Changes the name, the two-person rule and the passkey step-up (an owner's, by the route's
     * action; the last two after a step-up, members.routes.ts); each setting
     * that changes is audited `setting_changed` with its old and new value. Judged, read and
     * written under the members lock, as a member whose role may (org.manage) now, not when the
     * request arrived. The slug stays: an address made from it (single sign-on) must not move when
     * the name does.
     */
    async updateSettings(
      organisationId: string,
      actor: string,
      change: SettingsChange,
    ): Promise<OrganisationView> {
      const next = checkSettingsChange(change);
      const operatorId = actor.startsWith("operator:") ? actor.slice("operator:".length) : "";
      // The change and its rows together, or neither (the two-person rule off without a row
      // would be found by nobody, and a retry finds nothing left to change).
      const write = async (tx: { repo: OrgsRepo; recordEvent?: (event: AuditEvent) => Promise<void> }) => {
        await requireManager(tx.repo, organisationId, operatorId);
        const before = await tx.repo.findOrganisationById(organisationId);
        if (!before) throw new AppError("not_found", "no such organisation");
        const changed = (Object.keys(next) as (keyof typeof next)[]).filter(
          (key) => next[key] !== before[key],
        );
        if (changed.length === 0) return before;
        await tx.repo.updateOrganisation(
          organisationId,
          Object.fromEntries(changed.map((key) => [key, next[key]])),
        );
        for (const setting of changed) {
          await tx.recordEvent?.({
            organisationId,
            actor,
            action: "setting_changed",
            detail: { setting, from: before[setting], to: next[setting] },
          });
        }
        return loadOrganisationIn(tx.repo, organisationId);
      };
      return deps.inTransaction
        ? deps.inTransaction((tx) =>
            tx.repo.inMembersLock(organisationId, (repo) => write({ repo, recordEvent: tx.recordEvent })),
          )
        : deps.repo.inMembersLock(organisationId, (repo) =>
            write({ repo, ...(deps.recordEvent ? { recordEvent: deps.recordEvent } : {}) }),
          );
    },

    /** How many members must approve a standing approval: 1, or 2 under the two-person rule. */
    async findStandingApprovalsNeed(organisationId: string): Promise<1 | 2> {
      const organisation = await deps.repo.findOrganisationById(organisationId);
      return organisation?.standing_approvals_need === 2 ? 2 : 1;
    },

    /** The organisation a new session acts in: the first one the operator owns, else belongs to. */
    findDefaultOrganisation: (operatorId: string): Promise<string | null> =>
      deps.repo.findDefaultOrganisationId(operatorId),

    findMembers: (organisationId: string) => deps.repo.findMembers(organisationId),

    findOrganisationsOf: (operatorId: string) => deps.repo.findOrganisationsOf(operatorId),

    /** The organisation by id (its name and slug), or undefined. */
    async findOrganisation(organisationId: string): Promise<OrganisationAnswer | undefined> {
      const organisation = await deps.repo.findOrganisationById(organisationId);
      return organisation && { id: organisation.id, name: organisation.name, slug: organisation.slug };
    },

    /** The operator's role in the organisation, or undefined for a stranger. */
    findMemberRole: async (organisationId: string, operatorId: string): Promise<string | undefined> =>
      (await deps.repo.findMembership(organisationId, operatorId))?.role,

    /** Creates the organisation unless it exists: the local variant's single organisation. */
    ensureOrganisation: (organisation: { id: string; name: string }) =>
      deps.repo.insertOrganisationIfMissing(organisation),
  };
}

export type OrgsService = ReturnType<typeof createOrgsService>;
