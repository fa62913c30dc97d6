// Passkeys and WebAuthn challenges in the database. The single-use and ordering rules live here as
// conditional statements: a challenge is taken by one DELETE (so an answer is accepted once, on any
// replica), and a signature counter only moves forward.
import { sha256Hex } from "@latch/shared/crypto/hash";
import type { Kysely } from "kysely";
import type { Database, PasskeyRow, WebauthnChallengesTable } from "../db/schema.ts";

export type ChallengePurpose = WebauthnChallengesTable["purpose"];

/** Who may answer a challenge: the session that asked, or (signed out) the browser's cookie. */
export type ChallengeBinding = { sessionId: string } | { browserToken: string };

export interface NewPasskey {
  id: string;
  operatorId: string;
  credentialId: string;
  publicKey: Uint8Array;
  signCount: number;
  transports: string[];
  deviceType: "singleDevice" | "multiDevice";
  backedUp: boolean;
  aaguid: string | null;
  name: string;
  createdAt: Date;
}

export function createPasskeysRepo(db: Kysely<Database>) {
  return {
    async insertChallenge(
      challenge: string,
      purpose: ChallengePurpose,
      binding: ChallengeBinding,
      expiresAt: Date,
      now: Date,
    ): Promise<void> {
      // Expired ceremonies are cleared as new ones start: the table holds only the live few.
      await db.deleteFrom("webauthn_challenges").where("expires_at", "<", now).execute();
      await db
        .insertInto("webauthn_challenges")
        .values({
          challenge_hash: sha256Hex(challenge),
          purpose,
          session_id: "sessionId" in binding ? binding.sessionId : null,
          browser_hash: "browserToken" in binding ? sha256Hex(binding.browserToken) : null,
          expires_at: expiresAt,
        })
        .execute();
    },

    /**
     * Takes the live challenge `challenge` of `purposes` bound to `binding`, once: the one DELETE
     * that finds it wins. A challenge of another browser or session is left alone (and worth
     * nothing here), so a stolen answer cannot burn the owner's ceremony either.
     */
    async takeChallenge(
      challenge: string,
      purposes: readonly ChallengePurpose[],
      binding: ChallengeBinding,
      now: Date,
    ): Promise<ChallengePurpose | undefined> {
      let query = db
        .deleteFrom("webauthn_challenges")
        .where("challenge_hash", "=", sha256Hex(challenge))
        .where("purpose", "in", purposes)
        .where("expires_at", ">", now);
      query =
        "sessionId" in binding
          ? query.where("session_id", "=", binding.sessionId)
          : query.where("browser_hash", "=", sha256Hex(binding.browserToken));
      const row = await query.returning("purpose").executeTakeFirst();
      return row?.purpose;
    },

    async insertPasskey(passkey: NewPasskey): Promise<void> {
      await db
        .insertInto("operator_passkeys")
        .values({
          id: passkey.id,
          operator_id: passkey.operatorId,
          credential_id: passkey.credentialId,
          public_key: passkey.publicKey,
          sign_count: passkey.signCount,
          transports: passkey.transports,
          device_type: passkey.deviceType,
          backed_up: passkey.backedUp,
          aaguid: passkey.aaguid,
          name: passkey.name,
          created_at: passkey.createdAt,
        })
        .execute();
    },

    /**
     * Inserts the passkey unless the operator has `max` already: the count and the insert run with
     * the operator's row locked, so two registrations at once (each with its own challenge) are
     * counted in turn and cannot both pass at `max - 1`. False at the limit.
     */
    async insertPasskeyUnderLimit(passkey: NewPasskey, max: number): Promise<boolean> {
      return db.transaction().execute(async (trx) => {
        // The operator's row, locked: factor changes of one account are serialised.
        const operator = await trx
          .selectFrom("operators")
          .select("id")
          .where("id", "=", passkey.operatorId)
          .forUpdate()
          .executeTakeFirst();
        if (!operator) return false;
        const row = await trx
          .selectFrom("operator_passkeys")
          .select((eb) => eb.fn.countAll<string | number>().as("count"))
          .where("operator_id", "=", passkey.operatorId)
          .executeTakeFirstOrThrow();
        if (Number(row.count) >= max) return false;
        await createPasskeysRepo(trx).insertPasskey(passkey);
        return true;
      });
    },

    findPasskeyByCredentialId: (credentialId: string): Promise<PasskeyRow | undefined> =>
      db
        .selectFrom("operator_passkeys")
        .selectAll()
        .where("credential_id", "=", credentialId)
        .executeTakeFirst(),

    findPasskeysOf: (operatorId: string): Promise<PasskeyRow[]> =>
      db
        .selectFrom("operator_passkeys")
        .selectAll()
        .where("operator_id", "=", operatorId)
        .orderBy("created_at", "asc")
        .execute(),

    async findPasskeyCount(operatorId: string): Promise<number> {
      const row = await db
        .selectFrom("operator_passkeys")
        .select((eb) => eb.fn.countAll<string | number>().as("count"))
        .where("operator_id", "=", operatorId)
        .executeTakeFirstOrThrow();
      return Number(row.count);
    },

    /**
     * Records a use: the counter moves to `signCount` only forward (W3C WebAuthn 7.2 step 22), or
     * stays 0 for an authenticator that keeps none. False when another use got there first with a
     * counter at or above this one: this answer is then a replay or a clone's, and refused.
     */
    async updatePasskeyUsed(
      id: string,
      from: number,
      signCount: number,
      state: { backedUp: boolean },
      now: Date,
    ): Promise<boolean> {
      const result = await db
        .updateTable("operator_passkeys")
        .set({ sign_count: signCount, backed_up: state.backedUp, last_used_at: now })
        .where("id", "=", id)
        .where((eb) =>
          signCount === 0 && from === 0
            ? eb("sign_count", "=", 0)
            : eb.and([eb("sign_count", "=", from), eb("sign_count", "<", signCount)]),
        )
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },

    /**
     * What a step-up of the operator's session may be made with, in one query: its passkeys, its
     * authenticator, and whether the organisation it acts in asks for a passkey.
     */
    async findStepUpFactors(
      operatorId: string,
      organisationId: string | null,
    ): Promise<{ passkeys: number; hasTotp: boolean; isPasskeyRequired: boolean }> {
      const row = await db
        .selectFrom("operators")
        .select((eb) => [
          "operators.totp_enabled",
          eb
            .selectFrom("operator_passkeys")
            .select(eb.fn.countAll<string | number>().as("n"))
            .whereRef("operator_passkeys.operator_id", "=", "operators.id")
            .as("passkeys"),
          eb
            .selectFrom("organisations")
            .select("standing_approvals_need_passkey")
            .where("organisations.id", "=", organisationId ?? "")
            .as("passkey_required"),
        ])
        .where("operators.id", "=", operatorId)
        .executeTakeFirst();
      return {
        passkeys: Number(row?.passkeys ?? 0),
        hasTotp: row?.totp_enabled ?? false,
        isPasskeyRequired: row?.passkey_required ?? false,
      };
    },

    async updatePasskeyName(operatorId: string, id: string, name: string): Promise<boolean> {
      const result = await db
        .updateTable("operator_passkeys")
        .set({ name })
        .where("id", "=", id)
        .where("operator_id", "=", operatorId)
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },

    /** Deletes every passkey of the operator (the service's administrator's reset); how many. */
    async deletePasskeysOf(operatorId: string): Promise<number> {
      const result = await db
        .deleteFrom("operator_passkeys")
        .where("operator_id", "=", operatorId)
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },

    /**
     * Deletes the operator's passkey unless it is the last factor (no authenticator app, no other
     * passkey): one statement, so two removals at once cannot both pass the count. Answers whether
     * it was found and whether it was deleted.
     */
    async deletePasskeyUnlessLast(
      operatorId: string,
      id: string,
    ): Promise<"deleted" | "last_factor" | "not_found"> {
      return db.transaction().execute(async (trx) => {
        // The operator's row, locked: factor changes of one account are serialised.
        const operator = await trx
          .selectFrom("operators")
          .select("totp_enabled")
          .where("id", "=", operatorId)
          .forUpdate()
          .executeTakeFirst();
        if (!operator) return "not_found";
        const keys = await trx
          .selectFrom("operator_passkeys")
          .select("id")
          .where("operator_id", "=", operatorId)
          .execute();
        if (!keys.some((k) => k.id === id)) return "not_found";
        if (!operator.totp_enabled && keys.length === 1) return "last_factor";
        await trx.deleteFrom("operator_passkeys").where("id", "=", id).execute();
        return "deleted";
      });
    },
  };
}

export type PasskeysRepo = ReturnType<typeof createPasskeysRepo>;
