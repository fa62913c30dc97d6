// oidc-provider's storage adapter over Kysely (PostgreSQL or PGlite). Every artifact is keyed by the
// SHA-256 of its id and its payload is stored without the id: a refresh token's or authorization
// code's id is the token itself, a session's or interaction's id is its cookie, so none of them is
// ever in the database in plaintext. Consuming is one conditional UPDATE, so two replicas spending
// the same refresh token at once cannot both win (the loser is reuse: the whole grant is revoked).
import { sha256Hex } from "@latch/shared/crypto/hash";
import type { Kysely } from "kysely";
import { type Adapter, type AdapterPayload, errors } from "oidc-provider";
import type { Database } from "../db/schema.ts";

/** Models whose artifacts belong to a grant (revoking the grant destroys them). */
const GRANT_BOUND = new Set(["AccessToken", "AuthorizationCode", "RefreshToken", "DeviceCode", "Grant"]);

const hashOf = (value: string) => sha256Hex(value);

export interface OAuthArtifactsRepo {
  adapterFor(model: string): Adapter;
  /** Destroys every artifact of a grant (its refresh tokens, codes and the grant itself). */
  destroyGrant(grantId: string): Promise<void>;
  /** Whether the grant still exists (not revoked, not expired). */
  isGrantLive(grantId: string, now: Date): Promise<boolean>;
  /** Destroys the operator's OAuth sign-in sessions (sign-out ends them too). */
  destroySessionsOf(accountId: string): Promise<void>;
  /** Drops expired artifacts. */
  sweep(now: Date): Promise<void>;
}

/**
 * `onReuseRevoked`: told of a grant ended because a code or refresh token was spent twice in a race
 * (the loser's consume), which oidc-provider does not report as `grant.revoked`; the Access ledger
 * marks it (spec 6).
 */
export function createOAuthArtifactsRepo(
  db: Kysely<Database>,
  now: () => Date,
  onReuseRevoked: (grantId: string) => void = () => undefined,
): OAuthArtifactsRepo {
  const destroyGrant = async (grantId: string) => {
    await db.deleteFrom("oauth_artifacts").where("grant_id", "=", grantId).execute();
  };

  const rowToPayload = (row: { payload: Record<string, unknown>; consumed_at: Date | null }, id: string) => {
    const payload = { ...row.payload } as AdapterPayload;
    if (row.payload._jti === true) payload.jti = id;
    delete (payload as Record<string, unknown>)._jti;
    if (row.consumed_at) payload.consumed = Math.floor(row.consumed_at.getTime() / 1000);
    return payload;
  };

  function adapterFor(model: string): Adapter {
    const live = () =>
      db
        .selectFrom("oauth_artifacts")
        .select(["payload", "consumed_at", "expires_at"])
        .where("model", "=", model)
        .where((eb) => eb.or([eb("expires_at", "is", null), eb("expires_at", ">", now())]));

    return {
      async upsert(id: string, payload: AdapterPayload, expiresIn: number) {
        const {
          jti,
          userCode,
          uid,
          consumed: _consumed,
          ...rest
        } = payload as AdapterPayload & {
          userCode?: string;
        };
        // The id is never stored; a marker says the payload had one so find() puts it back. A device
        // code keeps its own: the user-code lookup must return it, and it is a 10-minute polling
        // handle that grants nothing until an operator approves the code in the browser.
        const stored: Record<string, unknown> =
          model === "DeviceCode"
            ? { ...rest, jti }
            : { ...rest, ...(jti !== undefined ? { _jti: true } : {}) };
        if (uid !== undefined) stored.uid = uid;
        const values = {
          model,
          id_hash: hashOf(id),
          payload: JSON.stringify(stored),
          grant_id: GRANT_BOUND.has(model) ? (payload.grantId ?? (model === "Grant" ? id : null)) : null,
          user_code_hash: userCode ? hashOf(userCode) : null,
          uid_hash: uid ? hashOf(uid) : null,
          account_id: typeof payload.accountId === "string" ? payload.accountId : null,
          expires_at: expiresIn ? new Date(now().getTime() + expiresIn * 1000) : null,
          consumed_at: null,
        };
        await db
          .insertInto("oauth_artifacts")
          .values(values)
          .onConflict((oc) =>
            oc.columns(["model", "id_hash"]).doUpdateSet({
              payload: values.payload,
              grant_id: values.grant_id,
              user_code_hash: values.user_code_hash,
              uid_hash: values.uid_hash,
              account_id: values.account_id,
              expires_at: values.expires_at,
            }),
          )
          .execute();
      },

      async find(id: string) {
        const row = await live().where("id_hash", "=", hashOf(id)).executeTakeFirst();
        return row ? rowToPayload(row, id) : undefined;
      },

      async findByUserCode(userCode: string) {
        const row = await live().where("user_code_hash", "=", hashOf(userCode)).executeTakeFirst();
        return row ? { ...rowToPayload(row, ""), userCode } : undefined;
      },

      async findByUid(uid: string) {
        const row = await live().where("uid_hash", "=", hashOf(uid)).executeTakeFirst();
        return row ? { ...row.payload, uid } : undefined;
      },

      async consume(id: string) {
        const spent = await db
          .updateTable("oauth_artifacts")
          .set({ consumed_at: now() })
          .where("model", "=", model)
          .where("id_hash", "=", hashOf(id))
          .where("consumed_at", "is", null)
          .returning("grant_id")
          .executeTakeFirst();
        if (spent) return;
        // Spent already: a second use of a code or a refresh token revokes everything it granted.
        const row = await db
          .selectFrom("oauth_artifacts")
          .select("grant_id")
          .where("model", "=", model)
          .where("id_hash", "=", hashOf(id))
          .executeTakeFirst();
        if (row?.grant_id) {
          await destroyGrant(row.grant_id);
          onReuseRevoked(row.grant_id);
        }
        throw new errors.InvalidGrant("grant request is invalid");
      },

      async destroy(id: string) {
        await db
          .deleteFrom("oauth_artifacts")
          .where("model", "=", model)
          .where("id_hash", "=", hashOf(id))
          .execute();
      },

      async revokeByGrantId(grantId: string) {
        await db
          .deleteFrom("oauth_artifacts")
          .where("model", "=", model)
          .where("grant_id", "=", grantId)
          .execute();
      },
    };
  }

  return {
    adapterFor,
    destroyGrant,
    async isGrantLive(grantId, at) {
      const row = await db
        .selectFrom("oauth_artifacts")
        .select("model")
        .where("model", "=", "Grant")
        .where("id_hash", "=", hashOf(grantId))
        .where((eb) => eb.or([eb("expires_at", "is", null), eb("expires_at", ">", at)]))
        .executeTakeFirst();
      return row !== undefined;
    },
    async destroySessionsOf(accountId) {
      await db
        .deleteFrom("oauth_artifacts")
        .where("model", "=", "Session")
        .where("account_id", "=", accountId)
        .execute();
    },
    async sweep(at) {
      await db.deleteFrom("oauth_artifacts").where("expires_at", "<", at).execute();
    },
  };
}
