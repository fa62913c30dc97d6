// Operators and their backup codes in the database. The single-use rules live here as conditional
// UPDATEs: an authenticator time step is accepted only above the last one, a backup code only while
// unused, a pending enrollment confirmed once, and a KEK re-wrap only from the key it was under.
import { type Kysely, sql } from "kysely";
import type { Database, OperatorRow } from "../db/schema.ts";

/** A wrapped secret: the blob and the id of the key-encryption key it is under. */
export interface WrappedSecret {
  blob: Buffer;
  kekId: string;
}

export type OperatorKeyRow = Pick<
  OperatorRow,
  "id" | "totp_secret" | "totp_kek_id" | "pending_totp_secret" | "pending_totp_kek_id"
>;

export interface OperatorsRepo {
  /** Runs `fn` in one transaction. */
  inTransaction<T>(fn: (repo: OperatorsRepo) => Promise<T>): Promise<T>;
  findOperatorById(id: string): Promise<OperatorRow | undefined>;
  /** The account with this address (lowercase), its row locked until the transaction ends. */
  findOperatorByEmailForUpdate(email: string): Promise<OperatorRow | undefined>;
  /** Sets totp_last_step only if `step` is after it. True for the one caller that won. */
  updateTotpLastStep(id: string, step: number): Promise<boolean>;
  /**
   * Takes one authenticator attempt before its code is read, or none while the account is locked
   * (undefined). Answers the attempts in a row, this one included (a lock that has run out starts
   * them over); the one that reaches `max` locks the account until `lockUntil` in the same
   * statement, so that attempts sent at once cannot all be read before the lock.
   */
  takeTotpAttempt(
    id: string,
    options: { now: Date; max: number; lockUntil: Date },
  ): Promise<number | undefined>;
  /** A right code: no attempts in a row, no lock. */
  updateTotpFailuresReset(id: string): Promise<void>;
  /** A new pending enrollment, which only the session `sessionId` reads and confirms. */
  updatePendingTotp(id: string, secret: WrappedSecret, expiresAt: Date, sessionId: string): Promise<void>;
  /**
   * Pending -> enabled, only for the enrollment that expires at `pendingExpiresAt` and that
   * `sessionId` started.
   */
  updateTotpEnabled(
    id: string,
    secret: WrappedSecret,
    step: number,
    pending: { expiresAt: Date; sessionId: string },
  ): Promise<boolean>;
  /**
   * Removes the authenticator, unless it is the account's last factor (no passkey): the operator's
   * row is locked first, as removing a passkey does, so two removals at once cannot both pass.
   */
  updateTotpDisabledUnlessLast(id: string): Promise<"disabled" | "last_factor" | "none">;
  findUnusedBackupCodes(operatorId: string): Promise<{ id: string; code_hash: string }[]>;
  /** Marks the code used only if unused. True for the one caller that won. */
  updateBackupCodeUsed(id: string, at: Date): Promise<boolean>;
  findUnusedBackupCodeCount(operatorId: string): Promise<number>;
  /** The operator's backup codes become exactly these hashes. Call inside inTransaction. */
  deleteAndInsertBackupCodes(operatorId: string, codeHashes: string[]): Promise<void>;
  /** Operators with an active or pending secret under another key than `keyId`, by id. */
  findOperatorsNotUnderKey(keyId: string): Promise<OperatorKeyRow[]>;
  /** The key ids some operator's secret is under. */
  findUsedKeyIds(): Promise<Set<string>>;
  /** Re-wraps the active secret, only if it is still under `fromKekId`. */
  updateTotpSecretRewrapped(id: string, fromKekId: string, next: WrappedSecret): Promise<void>;
  /** Re-wraps the pending secret, only if it is still under `fromKekId`. */
  updatePendingTotpRewrapped(id: string, fromKekId: string, next: WrappedSecret): Promise<void>;
}

export function createOperatorsRepo(db: Kysely<Database>): OperatorsRepo {
  return {
    inTransaction: (fn) => db.transaction().execute((trx) => fn(createOperatorsRepo(trx))),
    findOperatorById: (id) => db.selectFrom("operators").selectAll().where("id", "=", id).executeTakeFirst(),
    findOperatorByEmailForUpdate: (email) =>
      db.selectFrom("operators").selectAll().where("email", "=", email).forUpdate().executeTakeFirst(),
    async updateTotpLastStep(id, step) {
      const result = await db
        .updateTable("operators")
        .set({ totp_last_step: step })
        .where("id", "=", id)
        .where("totp_last_step", "<", String(step))
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    async takeTotpAttempt(id, { now, max, lockUntil }) {
      // Every expression of SET reads the row as it was.
      const attempt = sql<number>`(CASE WHEN totp_locked_until IS NULL THEN totp_failures ELSE 0 END) + 1`;
      const row = await db
        .updateTable("operators")
        .set({
          totp_failures: attempt,
          totp_locked_until: sql<Date | null>`CASE WHEN ${attempt} >= ${max} THEN ${lockUntil}::timestamptz ELSE NULL END`,
        })
        .where("id", "=", id)
        .where((eb) => eb.or([eb("totp_locked_until", "is", null), eb("totp_locked_until", "<=", now)]))
        .returning("totp_failures")
        .executeTakeFirst();
      return row?.totp_failures;
    },
    async updateTotpFailuresReset(id) {
      await db
        .updateTable("operators")
        .set({ totp_failures: 0, totp_locked_until: null })
        .where("id", "=", id)
        .execute();
    },
    async updatePendingTotp(id, secret, expiresAt, sessionId) {
      await db
        .updateTable("operators")
        .set({
          pending_totp_secret: secret.blob,
          pending_totp_kek_id: secret.kekId,
          pending_totp_expires_at: expiresAt,
          pending_totp_session_id: sessionId,
        })
        .where("id", "=", id)
        .execute();
    },
    updateTotpDisabledUnlessLast: (id) =>
      db.transaction().execute(async (trx) => {
        const operator = await trx
          .selectFrom("operators")
          .select("totp_enabled")
          .where("id", "=", id)
          .forUpdate()
          .executeTakeFirst();
        if (!operator?.totp_enabled) return "none";
        const passkeys = await trx
          .selectFrom("operator_passkeys")
          .select("id")
          .where("operator_id", "=", id)
          .limit(1)
          .execute();
        if (passkeys.length === 0) return "last_factor";
        await trx
          .updateTable("operators")
          .set({
            totp_enabled: false,
            totp_secret: null,
            totp_kek_id: null,
            pending_totp_secret: null,
            pending_totp_kek_id: null,
            pending_totp_expires_at: null,
            pending_totp_session_id: null,
          })
          .where("id", "=", id)
          .execute();
        return "disabled";
      }),
    async updateTotpEnabled(id, secret, step, pending) {
      const result = await db
        .updateTable("operators")
        .set({
          totp_enabled: true,
          totp_secret: secret.blob,
          totp_kek_id: secret.kekId,
          totp_last_step: step,
          totp_failures: 0,
          pending_totp_secret: null,
          pending_totp_kek_id: null,
          pending_totp_expires_at: null,
          pending_totp_session_id: null,
        })
        .where("id", "=", id)
        .where("pending_totp_expires_at", "=", pending.expiresAt)
        .where("pending_totp_session_id", "=", pending.sessionId)
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    findUnusedBackupCodes: (operatorId) =>
      db
        .selectFrom("backup_codes")
        .select(["id", "code_hash"])
        .where("operator_id", "=", operatorId)
        .where("used_at", "is", null)
        .execute(),
    async updateBackupCodeUsed(id, at) {
      const result = await db
        .updateTable("backup_codes")
        .set({ used_at: at })
        .where("id", "=", id)
        .where("used_at", "is", null)
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    async findUnusedBackupCodeCount(operatorId) {
      const row = await db
        .selectFrom("backup_codes")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .where("operator_id", "=", operatorId)
        .where("used_at", "is", null)
        .executeTakeFirstOrThrow();
      return Number(row.n);
    },
    async deleteAndInsertBackupCodes(operatorId, codeHashes) {
      await db.deleteFrom("backup_codes").where("operator_id", "=", operatorId).execute();
      await db
        .insertInto("backup_codes")
        .values(codeHashes.map((code_hash) => ({ operator_id: operatorId, code_hash, used_at: null })))
        .execute();
    },
    findOperatorsNotUnderKey: (keyId) =>
      db
        .selectFrom("operators")
        .select(["id", "totp_secret", "totp_kek_id", "pending_totp_secret", "pending_totp_kek_id"])
        .where((eb) =>
          eb.or([
            eb.and([eb("totp_kek_id", "is not", null), eb("totp_kek_id", "!=", keyId)]),
            eb.and([eb("pending_totp_kek_id", "is not", null), eb("pending_totp_kek_id", "!=", keyId)]),
          ]),
        )
        .orderBy("id")
        .execute(),
    async findUsedKeyIds() {
      const used = new Set<string>();
      for (const row of await db
        .selectFrom("operators")
        .select(["totp_kek_id", "pending_totp_kek_id"])
        .execute()) {
        if (row.totp_kek_id) used.add(row.totp_kek_id);
        if (row.pending_totp_kek_id) used.add(row.pending_totp_kek_id);
      }
      return used;
    },
    async updateTotpSecretRewrapped(id, fromKekId, next) {
      await db
        .updateTable("operators")
        .set({ totp_secret: next.blob, totp_kek_id: next.kekId })
        .where("id", "=", id)
        .where("totp_kek_id", "=", fromKekId)
        .execute();
    },
    async updatePendingTotpRewrapped(id, fromKekId, next) {
      await db
        .updateTable("operators")
        .set({ pending_totp_secret: next.blob, pending_totp_kek_id: next.kekId })
        .where("id", "=", id)
        .where("pending_totp_kek_id", "=", fromKekId)
        .execute();
    },
  };
}
