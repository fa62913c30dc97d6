// Organisations and memberships in the database. Creating one runs under the operator's advisory
// lock, so two replicas cannot both pass the owned-organisations count. Changes to an
// organisation's members run under its members lock (services.ts), with the invitations.
import { type Kysely, sql } from "kysely";
import { NO_FIRST_APPROVAL } from "../db/first-approval.ts";
import type { Database } from "../db/schema.ts";
import { inAdvisoryLock } from "../db/transaction.ts";

export interface MemberView {
  operator_id: string;
  email: string;
  role: string;
  created_at: Date;
}

/** An organisation as its settings show it. */
export interface OrganisationView {
  id: string;
  name: string;
  slug: string;
  standing_approvals_need: number;
  /** Step-ups in this organisation take a passkey (DECISIONS "Passkeys and single sign-on"). */
  standing_approvals_need_passkey: boolean;
  created_at: Date;
}

/** The advisory lock every change to an organisation's members (and its deletion, its settings) takes. */
export const membersLockKey = (organisationId: string) => `members:${organisationId}`;

export interface OrgsRepo {
  /** Runs `fn` in one transaction holding the operator's organisation lock. */
  inOperatorLock<T>(operatorId: string, fn: (repo: OrgsRepo) => Promise<T>): Promise<T>;
  /**
   * Runs `fn` holding the organisation's members lock (the one every members change takes,
   * services.ts): in this repo's transaction when it is one, else in a new one.
   */
  inMembersLock<T>(organisationId: string, fn: (repo: OrgsRepo) => Promise<T>): Promise<T>;
  /** Runs `fn` in one transaction. */
  inTransaction<T>(fn: (repo: OrgsRepo) => Promise<T>): Promise<T>;
  findOwnedCount(operatorId: string): Promise<number>;
  findOrganisationById(id: string): Promise<OrganisationView | undefined>;
  /** The slugs that start with `base` (the ones a new slug made from it could collide with). */
  findSlugsLike(base: string): Promise<string[]>;
  insertOrganisation(organisation: { id: string; name: string; slug: string }): Promise<void>;
  /** The local variant's single organisation: inserted unless it exists. */
  insertOrganisationIfMissing(organisation: { id: string; name: string }): Promise<void>;
  updateOrganisation(
    organisationId: string,
    change: { name?: string; standing_approvals_need?: number; standing_approvals_need_passkey?: boolean },
  ): Promise<void>;
  insertMembership(membership: {
    organisationId: string;
    operatorId: string;
    role: string;
    createdAt: Date;
  }): Promise<void>;
  /** Adds the membership unless the operator is a member already; true when it was added. */
  insertMembershipIfMissing(membership: {
    organisationId: string;
    operatorId: string;
    role: string;
    createdAt: Date;
  }): Promise<boolean>;
  findMembership(
    organisationId: string,
    operatorId: string,
  ): Promise<{ name: string; role: string; email: string } | undefined>;
  /**
   * The member's role, their membership row locked `FOR SHARE` until the transaction ends (a
   * removal deleting it waits); undefined for a stranger.
   */
  findMemberRoleForShare(organisationId: string, operatorId: string): Promise<string | undefined>;
  updateMembershipRole(organisationId: string, operatorId: string, role: string): Promise<void>;
  /** Removes the membership; true when there was one. */
  deleteMembership(organisationId: string, operatorId: string): Promise<boolean>;
  /**
   * The two-person rule (DECISIONS "Teams"): forgets the member's first approvals of `policies`
   * on grants still pending, so the next approval there is the first again (call in the
   * transaction that removes the member or changes their role). Answers how many were forgotten.
   */
  updateFirstApprovalsVoided(organisationId: string, operatorId: string, policies: string[]): Promise<number>;
  countOwners(organisationId: string): Promise<number>;
  /** Deletes the organisation and, by cascade, everything in it. */
  deleteOrganisation(organisationId: string): Promise<void>;
  /** The first organisation the operator owns, else the first it belongs to. */
  findDefaultOrganisationId(operatorId: string): Promise<string | null>;
  findMembers(organisationId: string): Promise<MemberView[]>;
  /** A member by email, if that address belongs to one. */
  findMemberByEmail(organisationId: string, email: string): Promise<MemberView | undefined>;
  /** Every organisation the operator belongs to, by name. */
  findOrganisationsOf(
    operatorId: string,
  ): Promise<{ id: string; name: string; slug: string; role: string }[]>;
}

export function createOrgsRepo(db: Kysely<Database>): OrgsRepo {
  const selectMembers = () =>
    db
      .selectFrom("memberships")
      .innerJoin("operators", "operators.id", "memberships.operator_id")
      .select([
        "operators.id as operator_id",
        "operators.email",
        "memberships.role",
        "memberships.created_at",
      ]);
  return {
    inOperatorLock: (operatorId, fn) =>
      inAdvisoryLock(db, `orgs:${operatorId}`, (trx) => fn(createOrgsRepo(trx))),
    inMembersLock: (organisationId, fn) =>
      inAdvisoryLock(db, membersLockKey(organisationId), (trx) => fn(createOrgsRepo(trx))),
    inTransaction: (fn) => db.transaction().execute((trx) => fn(createOrgsRepo(trx))),
    async findOwnedCount(operatorId) {
      const owned = await db
        .selectFrom("memberships")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .where("operator_id", "=", operatorId)
        .where("role", "=", "owner")
        .executeTakeFirstOrThrow();
      return Number(owned.n);
    },
    findOrganisationById: (id) =>
      db
        .selectFrom("organisations")
        .select([
          "id",
          "name",
          "slug",
          "standing_approvals_need",
          "standing_approvals_need_passkey",
          "created_at",
        ])
        .where("id", "=", id)
        .executeTakeFirst(),
    async findSlugsLike(base) {
      const rows = await db
        .selectFrom("organisations")
        .select("slug")
        // A slug is [a-z0-9-]: nothing in it is a LIKE wildcard.
        .where("slug", "like", `${base}%`)
        .execute();
      return rows.map((row) => row.slug);
    },
    async insertOrganisation(organisation) {
      await db.insertInto("organisations").values(organisation).execute();
    },
    async insertOrganisationIfMissing(organisation) {
      await db
        .insertInto("organisations")
        .values(organisation)
        .onConflict((c) => c.column("id").doNothing())
        .execute();
    },
    async updateOrganisation(organisationId, change) {
      if (Object.keys(change).length === 0) return;
      await db.updateTable("organisations").set(change).where("id", "=", organisationId).execute();
    },
    async insertMembership(membership) {
      await db
        .insertInto("memberships")
        .values({
          organisation_id: membership.organisationId,
          operator_id: membership.operatorId,
          role: membership.role,
          created_at: membership.createdAt,
        })
        .execute();
    },
    async insertMembershipIfMissing(membership) {
      const result = await db
        .insertInto("memberships")
        .values({
          organisation_id: membership.organisationId,
          operator_id: membership.operatorId,
          role: membership.role,
          created_at: membership.createdAt,
        })
        .onConflict((c) => c.columns(["organisation_id", "operator_id"]).doNothing())
        .executeTakeFirst();
      return Number(result.numInsertedOrUpdatedRows ?? 0n) === 1;
    },
    findMembership: (organisationId, operatorId) =>
      db
        .selectFrom("organisations")
        .innerJoin("memberships", "memberships.organisation_id", "organisations.id")
        .innerJoin("operators", "operators.id", "memberships.operator_id")
        .select(["organisations.name", "memberships.role", "operators.email"])
        .where("organisations.id", "=", organisationId)
        .where("memberships.operator_id", "=", operatorId)
        .executeTakeFirst(),
    findMemberRoleForShare: async (organisationId, operatorId) =>
      (
        await db
          .selectFrom("memberships")
          .select("role")
          .where("organisation_id", "=", organisationId)
          .where("operator_id", "=", operatorId)
          .forShare()
          .executeTakeFirst()
      )?.role,
    async updateMembershipRole(organisationId, operatorId, role) {
      await db
        .updateTable("memberships")
        .set({ role })
        .where("organisation_id", "=", organisationId)
        .where("operator_id", "=", operatorId)
        .execute();
    },
    async deleteMembership(organisationId, operatorId) {
      const result = await db
        .deleteFrom("memberships")
        .where("organisation_id", "=", organisationId)
        .where("operator_id", "=", operatorId)
        .executeTakeFirst();
      return result.numDeletedRows === 1n;
    },
    async updateFirstApprovalsVoided(organisationId, operatorId, policies) {
      if (policies.length === 0) return 0;
      const result = await db
        .updateTable("grants")
        .set(NO_FIRST_APPROVAL)
        .where("organisation_id", "=", organisationId)
        .where("first_approved_by", "=", operatorId)
        .where("first_policy", "in", policies)
        .where("status", "=", "pending")
        .executeTakeFirst();
      return Number(result.numUpdatedRows);
    },
    async countOwners(organisationId) {
      const row = await db
        .selectFrom("memberships")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .where("organisation_id", "=", organisationId)
        .where("role", "=", "owner")
        .executeTakeFirstOrThrow();
      return Number(row.n);
    },
    async deleteOrganisation(organisationId) {
      // The audit ledger refuses DELETE (its trigger) except in a transaction that names the one
      // organisation being deleted whole (DECISIONS "Ledger and telemetry"); set_config's `true`
      // scopes the name to this transaction.
      if (!db.isTransaction) {
        await db.transaction().execute((trx) => createOrgsRepo(trx).deleteOrganisation(organisationId));
        return;
      }
      await sql`select set_config('latch.delete_organisation', ${organisationId}, true)`.execute(db);
      await db.deleteFrom("organisations").where("id", "=", organisationId).execute();
    },
    async findDefaultOrganisationId(operatorId) {
      const row = await db
        .selectFrom("memberships")
        .select("organisation_id")
        .where("operator_id", "=", operatorId)
        .orderBy(sql`role = 'owner'`, "desc")
        .orderBy("created_at")
        .executeTakeFirst();
      return row?.organisation_id ?? null;
    },
    findOrganisationsOf: (operatorId) =>
      db
        .selectFrom("organisations")
        .innerJoin("memberships", "memberships.organisation_id", "organisations.id")
        .select(["organisations.id", "organisations.name", "organisations.slug", "memberships.role"])
        .where("memberships.operator_id", "=", operatorId)
        .orderBy("organisations.name")
        .execute(),
    findMembers: (organisationId) =>
      selectMembers()
        .where("memberships.organisation_id", "=", organisationId)
        .orderBy("memberships.created_at")
        .execute(),
    findMemberByEmail: (organisationId, email) =>
      selectMembers()
        .where("memberships.organisation_id", "=", organisationId)
        .where("operators.email", "=", email)
        .executeTakeFirst(),
  };
}
