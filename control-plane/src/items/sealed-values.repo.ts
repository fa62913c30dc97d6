// The stored secrets as `vault seal-rewrap` walks them: every sealed value of the items, of their
// minted access tokens and of the organisations' single sign-on client secrets that is not yet an
// envelope under the proxy's current key, in id order, and the conditional write of the same value
// sealed again. (SSO and connect flows in flight seal a PKCE verifier for at most 10 minutes: they
// end long before an old key may leave.)
import { ENVELOPE_HEADER } from "@latch/shared/crypto/envelope";
import { type Kysely, sql } from "kysely";
import type { Database } from "../db/schema.ts";
import { lockItemTokens } from "./item-tokens.repo.ts";

/**
 * The tables that hold sealed values for long: credentials, their minted access tokens and the
 * SSO connections' client secrets.
 */
export const SEALED_TABLES = ["items", "item_tokens", "sso_connections"] as const;
export type SealedTable = (typeof SEALED_TABLES)[number];

export interface SealedValueRow {
  /** The row's id (an item's; for a token the id of its item; for SSO its organisation's). */
  id: string;
  /** For messages only: the item's name (a token: its item's; SSO: "SSO client secret"). */
  name: string;
  keyId: string;
  sealedValue: Uint8Array;
}

export interface SealedValuesRepo {
  /** Up to `limit` values after `afterId` (id order) not yet an envelope under `currentKeyId`. */
  findToRewrap(
    table: SealedTable,
    currentKeyId: string,
    afterId: string,
    limit: number,
  ): Promise<SealedValueRow[]>;
  /** How many are left to seal again. */
  countToRewrap(table: SealedTable, currentKeyId: string): Promise<number>;
  /**
   * Stores the value sealed again, only if the row still holds `previous` (a write since wins and
   * is already sealed as it should be). True when it was replaced.
   */
  updateRewrapped(
    table: SealedTable,
    id: string,
    previous: Uint8Array,
    next: { keyId: string; sealedValue: Uint8Array },
  ): Promise<boolean>;
}

const HEADER = Buffer.from(ENVELOPE_HEADER);

/** `organisationId`: one organisation's values only (tests); every organisation's by default. */
export function createSealedValuesRepo(db: Kysely<Database>, organisationId?: string): SealedValuesRepo {
  /** Not yet an envelope under the current key: another key, or a bare sealed box. */
  const behind = (currentKeyId: string, column: "sealed_value" | "sealed_client_secret" = "sealed_value") =>
    sql<boolean>`(sealing_key_id <> ${currentKeyId} or substring(${sql.ref(column)} from 1 for 5) <> ${HEADER})`;

  return {
    async findToRewrap(table, currentKeyId, afterId, limit) {
      if (table === "items") {
        const rows = await db
          .selectFrom("items")
          .select(["id", "name", "sealing_key_id", "sealed_value"])
          .where("id", ">", afterId)
          .$if(organisationId !== undefined, (q) => q.where("organisation_id", "=", organisationId!))
          .where(behind(currentKeyId))
          .orderBy("id")
          .limit(limit)
          .execute();
        return rows.map((r) => ({
          id: r.id,
          name: r.name,
          keyId: r.sealing_key_id,
          sealedValue: r.sealed_value,
        }));
      }
      if (table === "sso_connections") {
        const rows = await db
          .selectFrom("sso_connections")
          .select(["organisation_id", "sealing_key_id", "sealed_client_secret"])
          .where("organisation_id", ">", afterId)
          .$if(organisationId !== undefined, (q) => q.where("organisation_id", "=", organisationId!))
          .where(behind(currentKeyId, "sealed_client_secret"))
          .orderBy("organisation_id")
          .limit(limit)
          .execute();
        return rows.map((r) => ({
          id: r.organisation_id,
          name: "SSO client secret",
          keyId: r.sealing_key_id,
          sealedValue: r.sealed_client_secret,
        }));
      }
      const rows = await db
        .selectFrom("item_tokens")
        .innerJoin("items", "items.id", "item_tokens.item_id")
        .select([
          "item_tokens.item_id as id",
          "items.name",
          "item_tokens.sealing_key_id",
          "item_tokens.sealed_value",
        ])
        .where("item_tokens.item_id", ">", afterId)
        .$if(organisationId !== undefined, (q) =>
          q.where("item_tokens.organisation_id", "=", organisationId!),
        )
        .where(
          sql<boolean>`(item_tokens.sealing_key_id <> ${currentKeyId} or substring(item_tokens.sealed_value from 1 for 5) <> ${HEADER})`,
        )
        .orderBy("item_tokens.item_id")
        .limit(limit)
        .execute();
      return rows.map((r) => ({
        id: r.id,
        name: r.name,
        keyId: r.sealing_key_id,
        sealedValue: r.sealed_value,
      }));
    },
    async countToRewrap(table, currentKeyId) {
      const row = await db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .$if(organisationId !== undefined, (q) => q.where("organisation_id", "=", organisationId!))
        .where(behind(currentKeyId, table === "sso_connections" ? "sealed_client_secret" : "sealed_value"))
        .executeTakeFirst();
      return Number(row?.n ?? 0);
    },
    async updateRewrapped(table, id, previous, next) {
      const change = { sealed_value: next.sealedValue, sealing_key_id: next.keyId };
      if (table === "sso_connections") {
        const result = await db
          .updateTable("sso_connections")
          .set({ sealed_client_secret: next.sealedValue, sealing_key_id: next.keyId })
          .where("organisation_id", "=", id)
          .where("sealed_client_secret", "=", previous)
          .executeTakeFirst();
        return result.numUpdatedRows === 1n;
      }
      // Under the item's token lock: a call refreshing this item waits, or this waits for it.
      const result = await db.transaction().execute(async (trx) => {
        await lockItemTokens(trx, id);
        return table === "items"
          ? trx
              .updateTable("items")
              .set(change)
              .where("id", "=", id)
              .where("sealed_value", "=", previous)
              .executeTakeFirst()
          : trx
              .updateTable("item_tokens")
              .set(change)
              .where("item_id", "=", id)
              .where("sealed_value", "=", previous)
              .executeTakeFirst();
      });
      return result.numUpdatedRows === 1n;
    },
  };
}
