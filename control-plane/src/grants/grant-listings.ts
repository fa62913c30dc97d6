// The grants as people read them: the inbox, the Approvals section, an approval link's page, the
// local console's one table and the access snapshot. Reads only; the decisions are grants.service.ts.
import { sha256Hex } from "@latch/shared/crypto/hash";
import { AppError } from "@latch/shared/errors";
import {
  type ApprovalView,
  type PendingApproval,
  type PublicGrant,
  shownToOperator,
  toApprovalView,
  toPendingApproval,
  toPublicGrant,
} from "./grant-view.ts";
import type { ApprovalRow, GrantsRepo } from "./grants.repo.ts";

/** The grant `id` of the organisation, or 404 (another organisation's grant is no grant here). */
export async function findGrantOrFail(
  repo: GrantsRepo,
  organisationId: string,
  id: string,
): Promise<ApprovalRow> {
  const row = await repo.findGrantById(organisationId, id);
  if (!row) throw new AppError("not_found", "no such grant");
  return row;
}

export function createGrantListings(deps: { repo: GrantsRepo; now: () => Date }) {
  const { now } = deps;
  return {
    /**
     * The organisation's grants, newest first. An agent reads its own (`filter.agentId`: its
     * list_grants tool, whose answer spec 2.4 fixes) as it wrote them; an operator reads them all
     * (GET /api/grants, `vault grants`) with the agent's words shown as in every other listing.
     */
    async listGrants(organisationId: string, filter: { agentId?: string } = {}): Promise<PublicGrant[]> {
      const at = now();
      const rows = await deps.repo.findGrants(organisationId, filter);
      if (filter.agentId !== undefined) return rows.map((row) => toPublicGrant(row, at));
      return rows.map((row) => shownToOperator(toPublicGrant(row, at)));
    },

    /** The requests waiting for an operator (the inbox), with the body each would send. */
    async listPendingApprovals(organisationId: string): Promise<PendingApproval[]> {
      const at = now();
      return (await deps.repo.findApprovalsByStatus(organisationId, "pending", { limit: 200 }, at)).map(
        (row) => toPendingApproval(row, at),
      );
    },

    /** The grant an approval link names in this organisation, for its page; undefined if none. */
    async findApprovalByLink(organisationId: string, token: string): Promise<PendingApproval | undefined> {
      const row = await deps.repo.findGrantByLinkHash(organisationId, sha256Hex(token));
      return row && toPendingApproval(row, now());
    },

    /** One grant with the body it was asked with and who decided it (the approval link's page). */
    async getApproval(organisationId: string, id: string): Promise<PendingApproval & ApprovalView> {
      const row = await findGrantOrFail(deps.repo, organisationId, id);
      const at = now();
      return { ...toApprovalView(row, at), ...toPendingApproval(row, at) };
    },

    /** Every active approval (the Approvals section), newest first, filtered. */
    async listActiveApprovals(
      organisationId: string,
      filter: { environment?: string; agentId?: string; itemName?: string; policy?: string } = {},
    ): Promise<ApprovalView[]> {
      const at = now();
      return (await deps.repo.findApprovalsByStatus(organisationId, "active", filter, at)).map((row) =>
        toApprovalView(row, at),
      );
    },

    /**
     * The newest grants, each with the body it was asked with, who decided it and its last use
     * (the local console shows requests and approvals in one table).
     */
    async listGrantsInFull(organisationId: string): Promise<(PendingApproval & ApprovalView)[]> {
      const at = now();
      return (await deps.repo.findApprovals(organisationId, 200)).map((row) => ({
        ...toApprovalView(row, at),
        ...toPendingApproval(row, at),
      }));
    },

    /** The grants with the item each one is for and who decided it (the access snapshot). */
    async listGrantsWithItem(organisationId: string): Promise<ApprovalView[]> {
      const at = now();
      return (await deps.repo.findApprovals(organisationId, 200)).map((row) => toApprovalView(row, at));
    },
  };
}
