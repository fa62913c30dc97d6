// Organisations and memberships in the database. Creating one runs under the operator's advisory
// lock, so two replicas cannot both pass the owned-organisations count.
import { type Kysely, sql } from "kysely";
import type { Database } from "../db/schema.ts";
import { inAdvisoryLock } from "../db/transaction.ts";

export interface MemberView {
  operator_id: string;
  email: string;
  role: string;
  created_at: Date;
}

export interface OrgsRepo {
  /** Runs `fn` in one transaction holding the operator's organisation lock. */
  inOperatorLock<T>(operatorId: string, fn: (repo: OrgsRepo) => Promise<T>): Promise<T>;
  /** Runs `fn` in one transaction. */
  inTransaction<T>(fn: (repo: OrgsRepo) => Promise<T>): Promise<T>;
  findOwnedCount(operatorId: string): Promise<number>;
  findOrganisationById(id: string): Promise<{ id: string; name: string } | undefined>;
  insertOrganisation(organisation: { id: string; name: string }): Promise<void>;
  /** The local variant's single organisation: inserted unless it exists. */
  insertOrganisationIfMissing(organisation: { id: string; name: string }): Promise<void>;
  insertMembership(membership: {
    organisationId: string;
    operatorId: string;
    role: string;
    createdAt: Date;
  }): Promise<void>;
  findMembership(
    organisationId: string,
    operatorId: string,
  ): Promise<{ name: string; role: string } | undefined>;
  /** Deletes the organisation and, by cascade, everything in it. */
  deleteOrganisation(organisationId: string): Promise<void>;
  /** The first organisation the operator owns, else the first it belongs to. */
  findDefaultOrganisationId(operatorId: string): Promise<string | null>;
  findMembers(organisationId: string): Promise<MemberView[]>;
  /** Every organisation the operator belongs to, by name. */
  findOrganisationsOf(operatorId: string): Promise<{ id: string; name: string; role: string }[]>;
}

export function createOrgsRepo(db: Kysely<Database>): OrgsRepo {
  return {
    inOperatorLock: (operatorId, fn) =>
      inAdvisoryLock(db, `orgs:${operatorId}`, (trx) => fn(createOrgsRepo(trx))),
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
      db.selectFrom("organisations").select(["id", "name"]).where("id", "=", id).executeTakeFirst(),
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
    findMembership: (organisationId, operatorId) =>
      db
        .selectFrom("organisations")
        .innerJoin("memberships", "memberships.organisation_id", "organisations.id")
        .select(["organisations.name", "memberships.role"])
        .where("organisations.id", "=", organisationId)
        .where("memberships.operator_id", "=", operatorId)
        .executeTakeFirst(),
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
        .select(["organisations.id", "organisations.name", "memberships.role"])
        .where("memberships.operator_id", "=", operatorId)
        .orderBy("organisations.name")
        .execute(),
    findMembers: (organisationId) =>
      db
        .selectFrom("memberships")
        .innerJoin("operators", "operators.id", "memberships.operator_id")
        .select([
          "operators.id as operator_id",
          "operators.email",
          "memberships.role",
          "memberships.created_at",
        ])
        .where("memberships.organisation_id", "=", organisationId)
        .orderBy("memberships.created_at")
        .execute(),
  };
}
