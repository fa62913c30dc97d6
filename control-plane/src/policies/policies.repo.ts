// An organisation's policy list in the database: one row, replaced whole, its version moved by a
// conditional write so that two operators saving at once cannot both win (the second is stale);
// and the list waiting for a second member under the two-person rule, one row per organisation.
// A transaction that takes both locks the list's row before the proposal's.
import { type Kysely, sql } from "kysely";
import type { Database } from "../db/schema.ts";

export interface PolicyListRow {
  /** 0 when nothing was ever saved (no row). */
  version: number;
  rules: unknown[];
  updated_at: Date | null;
  updated_by: string | null;
}

/** A list waiting for a second member under the two-person rule (one per organisation). */
export interface PolicyProposalRow {
  id: string;
  base_version: number;
  rules: unknown[];
  proposed_by: string;
  proposed_at: Date;
}

export interface PoliciesRepo {
  /** Runs `fn` in one transaction (the list and its audit row are written together). */
  inTransaction<T>(fn: (trx: Kysely<Database>) => Promise<T>): Promise<T>;
  /** `isLocked`: the row is held until the transaction ends (a save in between waits). */
  findPolicyList(organisationId: string, options?: { isLocked?: boolean }): Promise<PolicyListRow>;
  /**
   * The version, and the rules only when it differs from `knownVersion`: the call path's one read,
   * which ships the list only after it changed.
   */
  findPolicyIfChanged(
    organisationId: string,
    knownVersion: number | undefined,
  ): Promise<{ version: number; rules?: unknown[] }>;
  /**
   * Replaces the list if its version is still `expected` (0: none saved yet; "any": whatever it
   * is). Answers the new version, or undefined when the version moved on.
   */
  updatePolicyList(
    organisationId: string,
    expected: number | "any",
    change: { rules: unknown[]; at: Date; by: string },
  ): Promise<number | undefined>;
  /** The organisation's two-person setting (1 or 2): 2 makes a wider list a proposal. */
  findStandingApprovalsNeed(organisationId: string): Promise<number>;
  /**
   * The operator's role in the organisation (undefined: not a member), the membership held shared
   * until the transaction ends: a removal or a role change waits for it, or was seen.
   */
  findMemberRole(organisationId: string, operatorId: string): Promise<string | undefined>;
  /** `isLocked`: held until the transaction ends, so two confirmations cannot both apply it. */
  findProposal(
    organisationId: string,
    options?: { isLocked?: boolean },
  ): Promise<PolicyProposalRow | undefined>;
  /** Stores the organisation's proposal, replacing one there already. */
  insertProposal(organisationId: string, proposal: PolicyProposalRow): Promise<void>;
  /** Takes the organisation's proposal away, answering it (undefined when there was none). */
  deleteProposal(organisationId: string): Promise<PolicyProposalRow | undefined>;
}

const PROPOSAL_COLUMNS = ["id", "base_version", "rules", "proposed_by", "proposed_at"] as const;

export function createPoliciesRepo(db: Kysely<Database>): PoliciesRepo {
  return {
    inTransaction: (fn) => db.transaction().execute(fn),
    async findPolicyList(organisationId, options = {}) {
      let query = db
        .selectFrom("policy_lists")
        .select(["version", "rules", "updated_at", "updated_by"])
        .where("organisation_id", "=", organisationId);
      if (options.isLocked) query = query.forUpdate();
      const row = await query.executeTakeFirst();
      return row ?? { version: 0, rules: [], updated_at: null, updated_by: null };
    },
    async findPolicyIfChanged(organisationId, knownVersion) {
      const row = await db
        .selectFrom("policy_lists")
        .select([
          "version",
          sql<unknown[] | null>`case when version = ${knownVersion ?? -1} then null else rules end`.as(
            "rules",
          ),
        ])
        .where("organisation_id", "=", organisationId)
        .executeTakeFirst();
      if (!row) return knownVersion === 0 ? { version: 0 } : { version: 0, rules: [] };
      return row.rules === null ? { version: row.version } : { version: row.version, rules: row.rules };
    },
    async updatePolicyList(organisationId, expected, change) {
      const values = {
        organisation_id: organisationId,
        version: 1,
        rules: JSON.stringify(change.rules),
        updated_at: change.at,
        updated_by: change.by,
      };
      if (expected === 0) {
        const row = await db
          .insertInto("policy_lists")
          .values(values)
          .onConflict((oc) => oc.column("organisation_id").doNothing())
          .returning("version")
          .executeTakeFirst();
        return row?.version;
      }
      if (expected === "any") {
        const row = await db
          .insertInto("policy_lists")
          .values(values)
          .onConflict((oc) =>
            oc.column("organisation_id").doUpdateSet({
              version: sql`policy_lists.version + 1`,
              rules: sql`excluded.rules`,
              updated_at: sql`excluded.updated_at`,
              updated_by: sql`excluded.updated_by`,
            }),
          )
          .returning("version")
          .executeTakeFirstOrThrow();
        return row.version;
      }
      const row = await db
        .updateTable("policy_lists")
        .set({
          version: sql`version + 1`,
          rules: values.rules,
          updated_at: change.at,
          updated_by: change.by,
        })
        .where("organisation_id", "=", organisationId)
        .where("version", "=", expected)
        .returning("version")
        .executeTakeFirst();
      return row?.version;
    },
    async findStandingApprovalsNeed(organisationId) {
      const row = await db
        .selectFrom("organisations")
        .select("standing_approvals_need")
        .where("id", "=", organisationId)
        .executeTakeFirst();
      return row?.standing_approvals_need ?? 1;
    },
    async findMemberRole(organisationId, operatorId) {
      const row = await db
        .selectFrom("memberships")
        .select("role")
        .where("organisation_id", "=", organisationId)
        .where("operator_id", "=", operatorId)
        .forShare()
        .executeTakeFirst();
      return row?.role;
    },
    async findProposal(organisationId, options = {}) {
      let query = db
        .selectFrom("policy_proposals")
        .select(PROPOSAL_COLUMNS)
        .where("organisation_id", "=", organisationId);
      if (options.isLocked) query = query.forUpdate();
      return query.executeTakeFirst();
    },
    async insertProposal(organisationId, proposal) {
      await db
        .insertInto("policy_proposals")
        .values({ organisation_id: organisationId, ...proposal, rules: JSON.stringify(proposal.rules) })
        .onConflict((oc) =>
          oc.column("organisation_id").doUpdateSet({
            id: sql`excluded.id`,
            base_version: sql`excluded.base_version`,
            rules: sql`excluded.rules`,
            proposed_by: sql`excluded.proposed_by`,
            proposed_at: sql`excluded.proposed_at`,
          }),
        )
        .execute();
    },
    async deleteProposal(organisationId) {
      return db
        .deleteFrom("policy_proposals")
        .where("organisation_id", "=", organisationId)
        .returning(PROPOSAL_COLUMNS)
        .executeTakeFirst();
    },
  };
}
