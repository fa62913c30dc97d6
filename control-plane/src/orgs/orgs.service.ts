// Organisations an operator owns or belongs to (spec 2.7, 4.3, 8): 1 to 80 characters, at most ten
// owned, deleted whole (everything in it) in one transaction with the name typed to confirm.
import { AppError } from "@latch/shared/errors";
import { newId } from "@latch/shared/ids";
import { refuseUnsafeText } from "@latch/shared/text/safe-string";
import { type Kysely, sql } from "kysely";
import type { Database } from "../db/schema.ts";

export const MAX_OWNED_ORGANISATIONS = 10;

export function checkOrganisationName(raw: unknown): string {
  refuseUnsafeText("name", raw);
  const name = typeof raw === "string" ? raw.trim() : "";
  if (name.length < 1 || name.length > 80) {
    throw new AppError("invalid_request", "an organisation name is 1 to 80 characters");
  }
  return name;
}

export function createOrgsService(deps: { db: Kysely<Database>; now: () => Date }) {
  return {
    async createOrganisation(operatorId: string, rawName: unknown): Promise<{ id: string; name: string }> {
      const name = checkOrganisationName(rawName);
      return deps.db.transaction().execute(async (trx) => {
        // One operator's creations are serialised, so two replicas cannot both pass the count.
        await sql`select pg_advisory_xact_lock(hashtextextended(${`orgs:${operatorId}`}, 0))`.execute(trx);
        const owned = await trx
          .selectFrom("memberships")
          .select((eb) => eb.fn.countAll<string>().as("n"))
          .where("operator_id", "=", operatorId)
          .where("role", "=", "owner")
          .executeTakeFirstOrThrow();
        if (Number(owned.n) >= MAX_OWNED_ORGANISATIONS) {
          throw new AppError(
            "plan_limit",
            `an account owns at most ${MAX_OWNED_ORGANISATIONS} organisations`,
          );
        }
        const id = newId("org");
        await trx.insertInto("organisations").values({ id, name }).execute();
        await trx
          .insertInto("memberships")
          .values({ organisation_id: id, operator_id: operatorId, role: "owner", created_at: deps.now() })
          .execute();
        return { id, name };
      });
    },

    /** Deletes the organisation and, by cascade, every item, grant, event and membership in it. */
    async deleteOrganisation(
      operatorId: string,
      organisationId: string,
      confirmName: unknown,
    ): Promise<void> {
      await deps.db.transaction().execute(async (trx) => {
        const row = await trx
          .selectFrom("organisations")
          .innerJoin("memberships", "memberships.organisation_id", "organisations.id")
          .select(["organisations.name", "memberships.role"])
          .where("organisations.id", "=", organisationId)
          .where("memberships.operator_id", "=", operatorId)
          .executeTakeFirst();
        if (!row) throw new AppError("not_found", "no such organisation");
        if (row.role !== "owner")
          throw new AppError("not_owner", "only an owner can delete the organisation");
        if (confirmName !== row.name) {
          throw new AppError("confirm_name_mismatch", "confirm_name must be the organisation's name exactly");
        }
        await trx.deleteFrom("organisations").where("id", "=", organisationId).execute();
      });
    },

    /** The organisation a new session acts in: the first one the operator owns, else belongs to. */
    async findDefaultOrganisation(operatorId: string): Promise<string | null> {
      const row = await deps.db
        .selectFrom("memberships")
        .select("organisation_id")
        .where("operator_id", "=", operatorId)
        .orderBy(sql`role = 'owner'`, "desc")
        .orderBy("created_at")
        .executeTakeFirst();
      return row?.organisation_id ?? null;
    },

    findMembers: (organisationId: string) =>
      deps.db
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

export type OrgsService = ReturnType<typeof createOrgsService>;

/** Creates the organisation unless it exists: the local variant's single organisation. */
export async function ensureOrganisation(db: Kysely<Database>, organisation: { id: string; name: string }) {
  await db
    .insertInto("organisations")
    .values(organisation)
    .onConflict((c) => c.column("id").doNothing())
    .execute();
}
