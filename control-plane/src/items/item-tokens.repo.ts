// The tokens of connected items: minted access tokens (item_tokens) and the in-place rotation of
// a stored refresh token, under one per-item lock so that replicas refreshing the same item take
// turns (DECISIONS "Providers": two replicas refreshing at once never lose the newer token).
import { setTimeout } from "node:timers/promises";
import { type Kysely, sql } from "kysely";
import type { Database } from "../db/schema.ts";

export interface SealedToken {
  sealedValue: Uint8Array;
  sealingKeyId: string;
}

export interface MintedToken extends SealedToken {
  tokenLast4: string;
  expiresAt: Date;
}

export interface ItemTokensRepo {
  /**
   * Runs `fn` in one transaction holding the item's token lock (a PostgreSQL advisory lock):
   * a second replica waits, then finds the token the first one minted or the refresh token it
   * rotated. `fn` must use only the repo it is given.
   */
  inItemTokenLock<T>(itemId: string, fn: (locked: ItemTokensRepo) => Promise<T>): Promise<T>;
  /** The item's minted access token while it is good after `notBefore`. */
  findAccessToken(itemId: string, notBefore: Date): Promise<MintedToken | undefined>;
  upsertAccessToken(
    itemId: string,
    organisationId: string,
    token: MintedToken & { scope: string },
  ): Promise<void>;
  /** The item's stored value as it is now (a refresh token another replica may have rotated). */
  findSealedValue(itemId: string): Promise<SealedToken | undefined>;
  /**
   * Replaces the stored refresh token with its rotation, only while the stored one is still
   * `previous` (the one just spent): the conditional UPDATE retires the old token and stores the
   * new one in one statement. False when it was already replaced.
   */
  updateRotatedValue(
    itemId: string,
    previous: Uint8Array,
    next: SealedToken & { last4: string },
  ): Promise<boolean>;
  /**
   * Whether each item still holds the value it was read with, each row then share-locked until
   * the transaction ends: a replace by name (which takes no token lock) committed meanwhile is
   * seen, and one arriving later waits, then drops the token stored here with the value it
   * replaces. Rows are locked in id order, the same order for every caller.
   */
  holdIfUnchanged(values: { itemId: string; sealedValue: Uint8Array }[]): Promise<boolean>;
}

/**
 * Takes the item's token lock in transaction `trx`, held until it ends. Whoever rewrites an item's
 * stored value or its minted token apart from a call (`vault seal-rewrap`) takes it too: a call
 * holds it from reading the refresh token to storing its rotation, and a value rewritten in
 * between would make that conditional store miss and lose the rotated token.
 */
export async function lockItemTokens(trx: Kysely<Database>, itemId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`item-token:${itemId}`}, 0))`.execute(trx);
}

/** Between two tries of a held lock: from 25 ms, doubling, at most 400 ms. */
const RETRY_FIRST_MS = 25;
const RETRY_MOST_MS = 400;

export function createItemTokensRepo(db: Kysely<Database>): ItemTokensRepo {
  return {
    /**
     * The lock is tried, not waited for, in its transaction: while another call holds it (for as
     * long as its exchange and call take), a waiting call holds no database connection. Waiting
     * inside `pg_advisory_xact_lock` would: ten calls on one item would take the whole pool from
     * every other organisation's calls on the replica.
     */
    async inItemTokenLock(itemId, fn) {
      const key = `item-token:${itemId}`;
      for (let waitMs = RETRY_FIRST_MS; ; waitMs = Math.min(waitMs * 2, RETRY_MOST_MS)) {
        const outcome = await db.transaction().execute(async (trx) => {
          const tried = await sql<{ is_taken: boolean }>`
            select pg_try_advisory_xact_lock(hashtextextended(${key}, 0)) as is_taken`.execute(trx);
          if (!tried.rows[0]?.is_taken) return undefined;
          return { value: await fn(createItemTokensRepo(trx)) };
        });
        if (outcome) return outcome.value;
        await setTimeout(waitMs);
      }
    },
    async findAccessToken(itemId, notBefore) {
      const row = await db
        .selectFrom("item_tokens")
        .select(["sealed_value", "sealing_key_id", "token_last4", "expires_at"])
        .where("item_id", "=", itemId)
        .where("expires_at", ">", notBefore)
        .executeTakeFirst();
      return row
        ? {
            sealedValue: row.sealed_value,
            sealingKeyId: row.sealing_key_id,
            tokenLast4: row.token_last4,
            expiresAt: row.expires_at,
          }
        : undefined;
    },
    async upsertAccessToken(itemId, organisationId, token) {
      const values = {
        sealed_value: token.sealedValue,
        sealing_key_id: token.sealingKeyId,
        token_last4: token.tokenLast4,
        scope: token.scope,
        expires_at: token.expiresAt,
      };
      await db
        .insertInto("item_tokens")
        .values({ item_id: itemId, organisation_id: organisationId, ...values })
        .onConflict((c) => c.column("item_id").doUpdateSet({ ...values, updated_at: new Date() }))
        .execute();
    },
    async findSealedValue(itemId) {
      const row = await db
        .selectFrom("items")
        .select(["sealed_value", "sealing_key_id"])
        .where("id", "=", itemId)
        .executeTakeFirst();
      return row ? { sealedValue: row.sealed_value, sealingKeyId: row.sealing_key_id } : undefined;
    },
    async updateRotatedValue(itemId, previous, next) {
      const result = await db
        .updateTable("items")
        .set({
          sealed_value: next.sealedValue,
          sealing_key_id: next.sealingKeyId,
          last4: next.last4,
          updated_at: new Date(),
        })
        .where("id", "=", itemId)
        .where("sealed_value", "=", previous)
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },
    async holdIfUnchanged(values) {
      const inOrder = [...values].sort((a, b) => (a.itemId < b.itemId ? -1 : a.itemId > b.itemId ? 1 : 0));
      for (const { itemId, sealedValue } of inOrder) {
        const row = await db
          .selectFrom("items")
          .select("id")
          .where("id", "=", itemId)
          .where("sealed_value", "=", sealedValue)
          .forShare()
          .executeTakeFirst();
        if (!row) return false;
      }
      return true;
    },
  };
}
