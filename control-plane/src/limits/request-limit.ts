// Spec 8: new approval requests plus new collect requests, 30 per hour per organisation, across
// every replica. Counted from the rows themselves inside a transaction that holds the
// organisation's advisory lock, so two replicas cannot both take the 30th place. The lock and the
// count are SQL and live in request-limit.repo.ts; this file holds the rule.
import { AppError } from "@latch/shared/errors";
import type { RequestUsage } from "./request-limit.repo.ts";

export const MAX_REQUESTS_PER_HOUR = 30;
const HOUR_MS = 60 * 60 * 1000;

export const RATE_LIMIT_GUIDANCE =
  "Tell the operator that Latch's approval limit for this organisation is reached, and stop retrying for the hour; repeated request_grant calls for one credential do not help.";

/**
 * Throws 429 when the organisation already made 30 requests in the last hour. `findUsageSince`
 * must read under the organisation's request lock (a repo's inOrganisationLock), or the count races.
 */
export async function checkRequestLimit(
  findUsageSince: (since: Date) => Promise<RequestUsage>,
  now: Date,
): Promise<void> {
  const { count, oldest: oldestRow } = await findUsageSince(new Date(now.getTime() - HOUR_MS));
  if (count < MAX_REQUESTS_PER_HOUR) return;
  const oldest = oldestRow !== null && oldestRow < now ? oldestRow : now;
  const retryAfter = Math.max(Math.ceil((oldest.getTime() + HOUR_MS - now.getTime()) / 1000), 1);
  throw new AppError(
    "rate_limited",
    "30 approval and collect requests per hour for this organisation; try again later",
    {
      extra: { retry_after: retryAfter, for_model: RATE_LIMIT_GUIDANCE },
    },
  );
}
