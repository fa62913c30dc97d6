// The OAuth rows that outlive their use, deleted in bounded batches by the hourly prune
// (prune-rounds.ts): expired artifacts (interactions, sessions, codes, device codes, spent refresh
// tokens, grants) and the denylist entries of access tokens that can no longer verify.
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";

export interface OAuthExpiryRepo {
  /**
   * Deletes at most `limit` artifacts that expired before `before` (no replica reads them: every
   * lookup asks for `expires_at` after its own now); answers how many went. A spent refresh token
   * stays until it expires, so its second use still ends the grant.
   */
  deleteArtifactsExpiredBefore(before: Date, limit: number): Promise<number>;
  /**
   * Deletes at most `limit` denied access tokens whose own expiry is before `before`; answers how
   * many went. The caller keeps a margin past the expiry: an entry must outlive every replica's
   * acceptance of the token (its `exp` plus the verifier's skew, on a clock that may run behind).
   */
  deleteDeniedTokensExpiredBefore(before: Date, limit: number): Promise<number>;
}

export function createOAuthExpiryRepo(db: Kysely<Database>): OAuthExpiryRepo {
  return {
    async deleteArtifactsExpiredBefore(before, limit) {
      const result = await db
        .deleteFrom("oauth_artifacts")
        .where((eb) =>
          eb(
            eb.refTuple("model", "id_hash"),
            "in",
            eb
              .selectFrom("oauth_artifacts")
              .select(["model", "id_hash"])
              .where("expires_at", "<", before)
              .limit(limit)
              .forUpdate()
              .skipLocked()
              .$asTuple("model", "id_hash"),
          ),
        )
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },
    async deleteDeniedTokensExpiredBefore(before, limit) {
      const result = await db
        .deleteFrom("oauth_denied_tokens")
        .where("jti_hash", "in", (eb) =>
          eb
            .selectFrom("oauth_denied_tokens")
            .select("jti_hash")
            .where("expires_at", "<", before)
            .limit(limit)
            .forUpdate()
            .skipLocked(),
        )
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}
