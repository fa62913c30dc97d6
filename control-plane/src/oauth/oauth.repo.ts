// Consents (which organisation an OAuth grant acts in, through which model client row) and the
// denylist of revoked JWT access tokens, by a hash of their jti.
import type { Kysely } from "kysely";
import type { Database, OAuthConsentsTable } from "../db/schema.ts";

export type ConsentRow = OAuthConsentsTable;

export interface OAuthRepo {
  insertConsent(row: ConsentRow): Promise<void>;
  findConsent(grantId: string): Promise<ConsentRow | undefined>;
  /** Deletes the consent of a decision that failed before it was answered (oauth.service decide). */
  deleteConsent(grantId: string): Promise<void>;
  /** Marks every live consent of a client row revoked; answers their grant ids. */
  updateConsentsRevoked(clientRowId: string, now: Date): Promise<string[]>;
  /** Marks one consent revoked; answers whether it was live. */
  updateConsentRevoked(grantId: string, now: Date): Promise<boolean>;
  /** Marks every live consent an operator gave in an organisation revoked; answers their grant ids. */
  updateMemberConsentsRevoked(organisationId: string, operatorId: string, now: Date): Promise<string[]>;
  /**
   * Whether the operator is a member of the organisation and has been since `since` (a consent's
   * time): a membership begun later is a new one (removed, then invited back), which a consent
   * given in the old one does not carry over into.
   */
  isMemberSince(organisationId: string, operatorId: string, since: Date): Promise<boolean>;
  /**
   * Whether a consent's model client row is revoked (or gone): spec 3.4's end of every grant given
   * for it. Read here, beside the consent, so that a plane that does not serve the row's environment
   * still tells a revoked row from a live one.
   */
  isClientRowRevoked(clientRowId: string): Promise<boolean>;
  insertDeniedToken(jtiHash: string, expiresAt: Date): Promise<void>;
  isTokenDenied(jtiHash: string): Promise<boolean>;
}

export function createOAuthRepo(db: Kysely<Database>): OAuthRepo {
  return {
    async insertConsent(row) {
      await db.insertInto("oauth_consents").values(row).execute();
    },
    findConsent: (grantId) =>
      db.selectFrom("oauth_consents").selectAll().where("grant_id", "=", grantId).executeTakeFirst(),
    async deleteConsent(grantId) {
      await db.deleteFrom("oauth_consents").where("grant_id", "=", grantId).execute();
    },
    async updateConsentsRevoked(clientRowId, now) {
      const rows = await db
        .updateTable("oauth_consents")
        .set({ revoked_at: now })
        .where("client_row_id", "=", clientRowId)
        .where("revoked_at", "is", null)
        .returning("grant_id")
        .execute();
      return rows.map((r) => r.grant_id);
    },
    async updateConsentRevoked(grantId, now) {
      const row = await db
        .updateTable("oauth_consents")
        .set({ revoked_at: now })
        .where("grant_id", "=", grantId)
        .where("revoked_at", "is", null)
        .returning("grant_id")
        .executeTakeFirst();
      return row !== undefined;
    },
    async updateMemberConsentsRevoked(organisationId, operatorId, now) {
      const rows = await db
        .updateTable("oauth_consents")
        .set({ revoked_at: now })
        .where("organisation_id", "=", organisationId)
        .where("operator_id", "=", operatorId)
        .where("revoked_at", "is", null)
        .returning("grant_id")
        .execute();
      return rows.map((r) => r.grant_id);
    },
    async isMemberSince(organisationId, operatorId, since) {
      const row = await db
        .selectFrom("memberships")
        .select("role")
        .where("organisation_id", "=", organisationId)
        .where("operator_id", "=", operatorId)
        .where("created_at", "<=", since)
        .executeTakeFirst();
      return row !== undefined;
    },
    async isClientRowRevoked(clientRowId) {
      const row = await db
        .selectFrom("clients")
        .select("revoked_at")
        .where("id", "=", clientRowId)
        .executeTakeFirst();
      return !row || row.revoked_at !== null;
    },
    async insertDeniedToken(jtiHash, expiresAt) {
      await db
        .insertInto("oauth_denied_tokens")
        .values({ jti_hash: jtiHash, expires_at: expiresAt })
        .onConflict((oc) => oc.column("jti_hash").doNothing())
        .execute();
    },
    async isTokenDenied(jtiHash) {
      const row = await db
        .selectFrom("oauth_denied_tokens")
        .select("jti_hash")
        .where("jti_hash", "=", jtiHash)
        .executeTakeFirst();
      return row !== undefined;
    },
  };
}
