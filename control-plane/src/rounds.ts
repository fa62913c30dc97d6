// Background work done in rounds on every replica and local server: the audit checkpoints, the SSO
// domain re-check, the sweep of abandoned calls. Each round claims its rows in the database, so
// replicas do not repeat each other; this file is only the timer they share.
import type { Logger } from "pino";

/**
 * Runs `round` every `everyMs`, and once after `firstAfterMs` when that is given. A round
 * still running is not joined by the next (a slow DNS, a locked table); a failed round is logged
 * with its code alone, under `failure`, and the next one tries again. The timers never keep the
 * process alive. Answers the function that stops the rounds.
 *
 * @example const stop = startRounds({ everyMs: 15_000, round: sweep, logger, failure: "not swept" });
 */
export function startRounds(options: {
  everyMs: number;
  firstAfterMs?: number;
  round: () => Promise<unknown>;
  logger: Pick<Logger, "error">;
  failure: string;
}): () => void {
  const { everyMs, round, logger, failure } = options;
  let isRunning = false;
  const run = () => {
    if (isRunning) return;
    isRunning = true;
    round()
      .catch((error: unknown) =>
        logger.error({ code: (error as { code?: string } | null)?.code ?? "unknown" }, failure),
      )
      .finally(() => {
        isRunning = false;
      });
  };
  const first = options.firstAfterMs === undefined ? undefined : setTimeout(run, options.firstAfterMs);
  const timer = setInterval(run, everyMs);
  first?.unref();
  timer.unref();
  return () => {
    clearTimeout(first);
    clearInterval(timer);
  };
}
