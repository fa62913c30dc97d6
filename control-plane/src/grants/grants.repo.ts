// Grants in the database. The single-use rule lives here, in one conditional UPDATE: of any number
// of simultaneous calls on one prompt grant, exactly one sees its row change from active.
import type { Kysely } from "kysely";
import type { Database, GrantRow } from "../db/schema.ts";

export type GrantWithItem = GrantRow & { item_name: string };

export interface GrantScope {
  organisationId: string;
  itemId: string;
  agentId: string;
  toolId: string;
}

export interface GrantsRepo {
  insertGrant(row: GrantRow): Promise<void>;
  findGrantById(organisationId: string, id: string): Promise<GrantWithItem | undefined>;
  findGrants(organisationId: string, filter: { agentId?: string; limit?: number }): Promise<GrantWithItem[]>;
  findPendingGrant(scope: GrantScope): Promise<GrantWithItem | undefined>;
  /** Active, unexpired grants for the scope; ones that are not spent by use come first. */
  findUsableGrants(scope: GrantScope, now: Date): Promise<GrantWithItem[]>;
  /** active -> consumed, only if still active. True for the one caller that won. */
  updateGrantConsumed(id: string, now: Date): Promise<boolean>;
  /** consumed -> active: the call never left, so the approval was not used. */
  updateGrantRestored(id: string): Promise<void>;
  updateGrantApproved(
    organisationId: string,
    id: string,
    change: { policy: string; approvedAt: Date; expiresAt: Date | null },
  ): Promise<boolean>;
  updateGrantRevoked(organisationId: string, id: string, now: Date): Promise<boolean>;
}

// Session and standing approvals are not spent by a call; use them before a one-call approval.
const POLICY_ORDER = ["item_standing", "folder_standing", "session", "prompt"];

export function createGrantsRepo(db: Kysely<Database>): GrantsRepo {
  const selectGrants = () =>
    db
      .selectFrom("grants")
      .innerJoin("items", "items.id", "grants.item_id")
      .selectAll("grants")
      .select("items.name as item_name");

  return {
    async insertGrant(row) {
      await db.insertInto("grants").values(row).execute();
    },
    findGrantById: (organisationId, id) =>
      selectGrants()
        .where("grants.organisation_id", "=", organisationId)
        .where("grants.id", "=", id)
        .executeTakeFirst(),
    findGrants(organisationId, filter) {
      let query = selectGrants()
        .where("grants.organisation_id", "=", organisationId)
        .orderBy("grants.created_at", "desc")
        .orderBy("grants.id")
        .limit(filter.limit ?? 200);
      if (filter.agentId !== undefined) query = query.where("grants.agent_id", "=", filter.agentId);
      return query.execute();
    },
    findPendingGrant: (scope) =>
      selectGrants()
        .where("grants.organisation_id", "=", scope.organisationId)
        .where("grants.item_id", "=", scope.itemId)
        .where("grants.agent_id", "=", scope.agentId)
        .where("grants.tool_id", "=", scope.toolId)
        .where("grants.status", "=", "pending")
        .orderBy("grants.created_at", "desc")
        .executeTakeFirst(),
    async findUsableGrants(scope, now) {
      const rows = await selectGrants()
        .where("grants.organisation_id", "=", scope.organisationId)
        .where("grants.item_id", "=", scope.itemId)
        .where("grants.agent_id", "=", scope.agentId)
        .where("grants.tool_id", "=", scope.toolId)
        .where("grants.status", "=", "active")
        .where((eb) => eb.or([eb("grants.expires_at", "is", null), eb("grants.expires_at", ">", now)]))
        .execute();
      return rows.sort((a, b) => POLICY_ORDER.indexOf(a.policy) - POLICY_ORDER.indexOf(b.policy));
    },
    async updateGrantConsumed(id, now) {
      const result = await db
        .updateTable("grants")
        .set({ status: "consumed", consumed_at: now })
        .where("id", "=", id)
        .where("status", "=", "active")
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    async updateGrantRestored(id) {
      await db
        .updateTable("grants")
        .set({ status: "active", consumed_at: null })
        .where("id", "=", id)
        .where("status", "=", "consumed")
        .execute();
    },
    async updateGrantApproved(organisationId, id, change) {
      const result = await db
        .updateTable("grants")
        .set({
          status: "active",
          policy: change.policy,
          approved_at: change.approvedAt,
          expires_at: change.expiresAt,
        })
        .where("organisation_id", "=", organisationId)
        .where("id", "=", id)
        .where("status", "=", "pending")
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    async updateGrantRevoked(organisationId, id, now) {
      const result = await db
        .updateTable("grants")
        .set({ status: "revoked", revoked_at: now })
        .where("organisation_id", "=", organisationId)
        .where("id", "=", id)
        .where("status", "in", ["pending", "active"])
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
  };
}
