// Organisations an operator owns or belongs to (spec 2.7, 4.3, 8): 1 to 80 characters, at most ten
// owned, deleted whole (everything in it) in one transaction with the name typed to confirm.
import { AppError } from "@latch/shared/errors";
import { newId } from "@latch/shared/ids";
import { refuseUnsafeText } from "@latch/shared/text/safe-string";
import type { OrgsRepo } from "./orgs.repo.ts";

export const MAX_OWNED_ORGANISATIONS = 10;

export function checkOrganisationName(raw: unknown): string {
  refuseUnsafeText("name", raw);
  const name = typeof raw === "string" ? raw.trim() : "";
  if (name.length < 1 || name.length > 80) {
    throw new AppError("invalid_request", "an organisation name is 1 to 80 characters");
  }
  return name;
}

export function createOrgsService(deps: { repo: OrgsRepo; now: () => Date }) {
  return {
    async createOrganisation(operatorId: string, rawName: unknown): Promise<{ id: string; name: string }> {
      const name = checkOrganisationName(rawName);
      // One operator's creations are serialised, so two replicas cannot both pass the count.
      return deps.repo.inOperatorLock(operatorId, async (repo) => {
        if ((await repo.findOwnedCount(operatorId)) >= MAX_OWNED_ORGANISATIONS) {
          throw new AppError(
            "plan_limit",
            `an account owns at most ${MAX_OWNED_ORGANISATIONS} organisations`,
          );
        }
        const id = newId("org");
        await repo.insertOrganisation({ id, name });
        await repo.insertMembership({ organisationId: id, operatorId, role: "owner", createdAt: deps.now() });
        return { id, name };
      });
    },

    /** Deletes the organisation and, by cascade, every item, grant, event and membership in it. */
    async deleteOrganisation(
      operatorId: string,
      organisationId: string,
      confirmName: unknown,
    ): Promise<void> {
      await deps.repo.inTransaction(async (repo) => {
        const row = await repo.findMembership(organisationId, operatorId);
        if (!row) throw new AppError("not_found", "no such organisation");
        if (row.role !== "owner")
          throw new AppError("not_owner", "only an owner can delete the organisation");
        if (confirmName !== row.name) {
          throw new AppError("confirm_name_mismatch", "confirm_name must be the organisation's name exactly");
        }
        await repo.deleteOrganisation(organisationId);
      });
    },

    /** The organisation a new session acts in: the first one the operator owns, else belongs to. */
    findDefaultOrganisation: (operatorId: string): Promise<string | null> =>
      deps.repo.findDefaultOrganisationId(operatorId),

    findMembers: (organisationId: string) => deps.repo.findMembers(organisationId),

    findOrganisationsOf: (operatorId: string) => deps.repo.findOrganisationsOf(operatorId),

    findOrganisation: (organisationId: string) => deps.repo.findOrganisationById(organisationId),

    /** The operator's role in the organisation, or undefined for a stranger. */
    findMemberRole: async (organisationId: string, operatorId: string): Promise<string | undefined> =>
      (await deps.repo.findMembership(organisationId, operatorId))?.role,

    /** Creates the organisation unless it exists: the local variant's single organisation. */
    ensureOrganisation: (organisation: { id: string; name: string }) =>
      deps.repo.insertOrganisationIfMissing(organisation),
  };
}

export type OrgsService = ReturnType<typeof createOrgsService>;
