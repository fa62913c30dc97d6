// Model and trusted clients in the database: a bearer is stored only as its SHA-256, and revoking
// and rotating are conditional UPDATEs, so a repeated revoke is seen as one and a rotation never
// replaces the bearer of a client revoked or rotated meanwhile.
import type { Kysely } from "kysely";
import type { ClientRow, Database } from "../db/schema.ts";

export interface ClientsRepo {
  insertClient(row: ClientRow): Promise<void>;
  findClientById(organisationId: string, id: string): Promise<ClientRow | undefined>;
  findClients(organisationId: string): Promise<ClientRow[]>;
  /** The unrevoked client whose bearer hashes to `tokenHash`. */
  findLiveClientByTokenHash(tokenHash: string): Promise<ClientRow | undefined>;
  /**
   * Replaces the bearer only while the client is live and still holds `fromTokenHash`: a revoke or
   * another rotation that committed first leaves it as it is. True for the call that replaced it.
   */
  updateClientToken(
    id: string,
    change: {
      fromTokenHash: string;
      tokenHash: string;
      tokenLast4: string;
      rotatedAt: Date;
      issuedBy: string | null;
    },
  ): Promise<boolean>;
  /** Sets revoked_at only if unset. True for the call that revoked it. */
  updateClientRevoked(id: string, now: Date): Promise<boolean>;
  updateClientUsed(id: string, change: { lastUsedAt: Date; firstUsedAt: Date }): Promise<void>;
  /** The live row an OAuth client acts through in the organisation and environment. */
  findLiveOAuthClient(
    organisationId: string,
    oauthClientId: string,
    environment: string,
  ): Promise<ClientRow | undefined>;
  /** A live client by id, in any organisation (an OAuth access token names its organisation). */
  findLiveClient(id: string): Promise<ClientRow | undefined>;
  /** The organisation's live clients of `kind` whose bearer `operatorId` was shown (issued_by). */
  findLiveClientsIssuedBy(organisationId: string, operatorId: string, kind: string): Promise<ClientRow[]>;
}

export function createClientsRepo(db: Kysely<Database>): ClientsRepo {
  return {
    async insertClient(row) {
      await db.insertInto("clients").values(row).execute();
    },
    findClientById: (organisationId, id) =>
      db
        .selectFrom("clients")
        .selectAll()
        .where("organisation_id", "=", organisationId)
        .where("id", "=", id)
        .executeTakeFirst(),
    findClients: (organisationId) =>
      db
        .selectFrom("clients")
        .selectAll()
        .where("organisation_id", "=", organisationId)
        .orderBy("created_at")
        .execute(),
    findLiveClientByTokenHash: (tokenHash) =>
      db
        .selectFrom("clients")
        .selectAll()
        .where("token_hash", "=", tokenHash)
        .where("revoked_at", "is", null)
        .executeTakeFirst(),
    async updateClientToken(id, change) {
      const result = await db
        .updateTable("clients")
        .set({
          token_hash: change.tokenHash,
          token_last4: change.tokenLast4,
          rotated_at: change.rotatedAt,
          issued_by: change.issuedBy,
        })
        .where("id", "=", id)
        .where("revoked_at", "is", null)
        .where("token_hash", "=", change.fromTokenHash)
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    async updateClientRevoked(id, now) {
      const result = await db
        .updateTable("clients")
        .set({ revoked_at: now })
        .where("id", "=", id)
        .where("revoked_at", "is", null)
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    findLiveOAuthClient: (organisationId, oauthClientId, environment) =>
      db
        .selectFrom("clients")
        .selectAll()
        .where("organisation_id", "=", organisationId)
        .where("oauth_client_id", "=", oauthClientId)
        .where("environment", "=", environment)
        .where("revoked_at", "is", null)
        .executeTakeFirst(),
    findLiveClient: (id) =>
      db
        .selectFrom("clients")
        .selectAll()
        .where("id", "=", id)
        .where("revoked_at", "is", null)
        .executeTakeFirst(),
    findLiveClientsIssuedBy: (organisationId, operatorId, kind) =>
      db
        .selectFrom("clients")
        .selectAll()
        .where("organisation_id", "=", organisationId)
        .where("issued_by", "=", operatorId)
        .where("kind", "=", kind)
        .where("revoked_at", "is", null)
        .orderBy("created_at")
        .execute(),
    async updateClientUsed(id, change) {
      await db
        .updateTable("clients")
        .set({ last_used_at: change.lastUsedAt, first_used_at: change.firstUsedAt })
        .where("id", "=", id)
        // A client revoked meanwhile (on another replica) is not shown as used after it.
        .where("revoked_at", "is", null)
        .execute();
    },
  };
}
