// The hourly prune of the tables that would otherwise grow for ever, on every replica: counted
// rate-limit attempts of every bucket (a bucket is often never used again: a device code typed once,
// a host or an IPv6 /64 a caller picks), expired OAuth artifacts, denylist entries of access tokens
// that can no longer verify, and wrong approval codes past their window. Each DELETE takes a bounded
// batch, so a round holds no long lock and two replicas skip each other's rows.
import type { Kysely } from "kysely";
import type { Logger } from "pino";
import type { EmailCodeService } from "./auth/email-code.service.ts";
import type { Database } from "./db/schema.ts";
import { WRONG_CODE_WINDOW_MS } from "./grants/approval-codes.ts";
import { createGrantsRepo } from "./grants/grants.repo.ts";
import { createRateLimitRepo } from "./limits/rate-limit.repo.ts";
import { LONGEST_WINDOW_MS } from "./limits/rate-limit.ts";
import { createOAuthExpiryRepo } from "./oauth/oauth-expiry.repo.ts";
import { startRounds } from "./rounds.ts";

const PRUNE_EVERY_MS = 60 * 60 * 1000;
/** Rows one statement deletes at most; a round repeats it while a batch comes back full. */
export const PRUNE_BATCH = 10_000;
/**
 * Kept past the last moment any replica reads a row: a replica whose clock runs ahead must never
 * delete what another still counts, or a denied token another still accepts.
 */
export const CLOCK_MARGIN_MS = 24 * 60 * 60 * 1000;

export interface PruneCounts {
  emailCodes: number;
  rateLimitHits: number;
  oauthArtifacts: number;
  deniedTokens: number;
  approvalCodeFailures: number;
}

/** Runs `deleteBatch` until a batch comes back short of PRUNE_BATCH; answers the rows deleted. */
async function deleteAll(deleteBatch: (limit: number) => Promise<number>): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await deleteBatch(PRUNE_BATCH);
    total += deleted;
    if (deleted < PRUNE_BATCH) return total;
  }
}

/**
 * The prunes of `db` relative to `now()`; `emailCodes` (the sign-in service, which knows its own
 * rows' lives) prunes its sends and challenges in the same round.
 */
export function createPrunes(
  db: Kysely<Database>,
  now: () => Date,
  emailCodes?: Pick<EmailCodeService, "pruneExpired">,
) {
  const rateLimits = createRateLimitRepo(db);
  const oauth = createOAuthExpiryRepo(db);
  const grants = createGrantsRepo(db);
  return {
    /** One round: every table's rows older than its cutoff, relative to `now()`. */
    async pruneOnce(): Promise<PruneCounts> {
      const at = now().getTime();
      const before = (keptMs: number) => new Date(at - keptMs - CLOCK_MARGIN_MS);
      return {
        emailCodes: (await emailCodes?.pruneExpired()) ?? 0,
        rateLimitHits: await deleteAll((limit) =>
          rateLimits.deleteHitsBefore(before(LONGEST_WINDOW_MS), limit),
        ),
        oauthArtifacts: await deleteAll((limit) => oauth.deleteArtifactsExpiredBefore(before(0), limit)),
        // Never before the token itself is dead everywhere: its expiry, the verifier's 30 s of
        // skew, and the margin.
        deniedTokens: await deleteAll((limit) => oauth.deleteDeniedTokensExpiredBefore(before(0), limit)),
        approvalCodeFailures: await deleteAll((limit) =>
          grants.deleteCodeFailuresBefore(before(WRONG_CODE_WINDOW_MS), limit),
        ),
      };
    },
  };
}

export type Prunes = ReturnType<typeof createPrunes>;

/**
 * Prunes every hour until stopped. A failed round is logged and tried again the next hour. No round
 * at start: nothing is due within the hour, and a test's plane whose clock was moved days ahead
 * never prunes what other test files still read.
 *
 * @example const stop = startPruneSchedule(createPrunes(db, now, services.emailCodes), logger);
 */
export function startPruneSchedule(
  prunes: Pick<Prunes, "pruneOnce">,
  logger: Pick<Logger, "error">,
  intervalMs = PRUNE_EVERY_MS,
): () => void {
  return startRounds({
    everyMs: intervalMs,
    logger,
    failure: "expired rows not pruned",
    round: () => prunes.pruneOnce(),
  });
}
