// Email sign-in codes in the database: the sends per address, the one live challenge per address,
// and the operator a first sign-in creates. Each flow runs under the address's advisory lock, so
// replicas count sends and wrong attempts as one. The sends per client address are counted by the
// limits' own table (limits/rate-limit.repo.ts), in this database.
import type { Kysely, Selectable } from "kysely";
import type { Database, EmailChallengesTable } from "../db/schema.ts";
import { inAdvisoryLock } from "../db/transaction.ts";
import { createRateLimitRepo, type RateLimitRepo } from "../limits/rate-limit.repo.ts";

export type EmailChallengeRow = Selectable<EmailChallengesTable>;

export interface EmailCodesRepo {
  /** Runs `fn` in one transaction holding the address's lock. */
  inEmailLock<T>(address: string, fn: (repo: EmailCodesRepo) => Promise<T>): Promise<T>;
  /** When codes were sent to the address since `since`, oldest first. */
  findSendTimesSince(address: string, since: Date): Promise<Date[]>;
  insertSend(address: string, sentAt: Date): Promise<void>;
  /** The address's challenge; a new one replaces the previous and starts its wrong count again. */
  insertChallenge(address: string, codeHash: string, expiresAt: Date): Promise<void>;
  findChallenge(address: string): Promise<EmailChallengeRow | undefined>;
  updateChallengeWrongAttempts(address: string, wrongAttempts: number): Promise<void>;
  deleteChallenge(address: string): Promise<void>;
  findOperatorIdByEmail(address: string): Promise<string | undefined>;
  insertOperator(operator: { id: string; email: string; createdAt: Date }): Promise<void>;
  /** The counted per-address limits (limits/): the sends one client address asks for. */
  readonly rateLimits: RateLimitRepo;
  /**
   * Deletes the send rows sent before `before`, the challenges that expired before it, and the
   * counted client-address sends (bucket family `clientSendBucket`) taken before it. Answers how many
   * rows went.
   */
  deleteExpired(before: Date, clientSendBucket: string): Promise<number>;
}

export function createEmailCodesRepo(db: Kysely<Database>): EmailCodesRepo {
  return {
    rateLimits: createRateLimitRepo(db),
    inEmailLock: (address, fn) =>
      inAdvisoryLock(db, `email:${address}`, (trx) => fn(createEmailCodesRepo(trx))),
    async findSendTimesSince(address, since) {
      const sends = await db
        .selectFrom("email_sends")
        .select("sent_at")
        .where("email", "=", address)
        .where("sent_at", ">", since)
        .orderBy("sent_at")
        .execute();
      return sends.map((send) => send.sent_at);
    },
    async insertSend(address, sentAt) {
      await db.insertInto("email_sends").values({ email: address, sent_at: sentAt }).execute();
    },
    async insertChallenge(address, codeHash, expiresAt) {
      await db
        .insertInto("email_challenges")
        .values({ email: address, code_hash: codeHash, expires_at: expiresAt, wrong_attempts: 0 })
        .onConflict((c) =>
          c.column("email").doUpdateSet((eb) => ({
            code_hash: eb.ref("excluded.code_hash"),
            expires_at: eb.ref("excluded.expires_at"),
            wrong_attempts: 0,
          })),
        )
        .execute();
    },
    findChallenge: (address) =>
      db.selectFrom("email_challenges").selectAll().where("email", "=", address).executeTakeFirst(),
    async updateChallengeWrongAttempts(address, wrongAttempts) {
      await db
        .updateTable("email_challenges")
        .set({ wrong_attempts: wrongAttempts })
        .where("email", "=", address)
        .execute();
    },
    async deleteChallenge(address) {
      await db.deleteFrom("email_challenges").where("email", "=", address).execute();
    },
    async findOperatorIdByEmail(address) {
      const row = await db
        .selectFrom("operators")
        .select("id")
        .where("email", "=", address)
        .executeTakeFirst();
      return row?.id;
    },
    async insertOperator(operator) {
      await db
        .insertInto("operators")
        .values({ id: operator.id, email: operator.email, created_at: operator.createdAt })
        .execute();
    },
    async deleteExpired(before, clientSendBucket) {
      const sends = await db.deleteFrom("email_sends").where("sent_at", "<", before).executeTakeFirst();
      // A challenge being replaced right now has a new expires_at, which the DELETE reads again.
      const challenges = await db
        .deleteFrom("email_challenges")
        .where("expires_at", "<", before)
        .executeTakeFirst();
      // Only this family's buckets: a prefix with LIKE's wildcards escaped.
      const prefix = `${clientSendBucket.replace(/[\\%_]/g, (c) => `\\${c}`)}:%`;
      const hits = await db
        .deleteFrom("rate_limit_hits")
        .where("bucket", "like", prefix)
        .where("at", "<", before)
        .executeTakeFirst();
      return Number(sends.numDeletedRows + challenges.numDeletedRows + hits.numDeletedRows);
    },
  };
}
