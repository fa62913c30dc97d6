// Organisations: the tenant boundary. Every other row names one, and every lookup is scoped by it.
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";

export interface OrganisationsRepo {
  insertOrganisation(organisation: { id: string; name: string }): Promise<void>;
  /** Creates the organisation unless it exists (the local variant's single organisation). */
  insertOrganisationIfMissing(organisation: { id: string; name: string }): Promise<void>;
  findOrganisationById(id: string): Promise<{ id: string; name: string } | undefined>;
}

export function createOrganisationsRepo(db: Kysely<Database>): OrganisationsRepo {
  return {
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
    findOrganisationById: (id) =>
      db.selectFrom("organisations").select(["id", "name"]).where("id", "=", id).executeTakeFirst(),
  };
}
