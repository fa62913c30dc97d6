// Approval codes (spec 4.3 POST /api/grants/approve-by-code, spec 8): which pending grant an
// 8-digit code names, with reuse 409, expiry 410, and wrong codes counted per approval (five, then
// its code is void) and per organisation (twenty per 15 minutes).
import { AppError } from "@latch/shared/errors";
import type { GrantsRepo, GrantWithItem } from "./grants.repo.ts";

/** Spec 8: wrong approval codes per approval, and per organisation in a window. */
export const MAX_WRONG_CODES_PER_APPROVAL = 5;
export const MAX_WRONG_CODES_PER_WINDOW = 20;
export const WRONG_CODE_WINDOW_MS = 15 * 60 * 1000;
export const APPROVAL_CODE_TTL_MS = 60 * 60 * 1000;

/**
 * The 8-digit code of grant `grantId` whose code expires at `expiresAt`: derived under the
 * keyring's pepper (a different label from the stored `approval:<code>` hashes), so that an
 * agent's repeat of a request still waiting answers the very code it was first given and mailed,
 * without the code being stored anywhere. A new expiry (the code expired, or was voided) is a new
 * code.
 */
export function approvalCodeFor(
  codes: { hashCode(code: string): string },
  grantId: string,
  expiresAt: Date,
): string {
  const digest = codes.hashCode(`approval-code-of:${grantId}:${expiresAt.getTime()}`);
  // 64 bits of the peppered digest, taken modulo 10^8: a bias below 10^-10.
  return (BigInt(`0x${digest.slice(0, 16)}`) % 100_000_000n).toString().padStart(8, "0");
}

/**
 * Until when `row`'s approval link approves: the hour of the code it was mailed beside, counted
 * from its mail, which goes out once, with the request (the row's `created_at`). A repeat of the
 * request renews the code but mails nothing, so it never moves this: a link read after its hour,
 * or forwarded, approves nothing however often the agent asks again.
 */
export function approvalLinkExpiresAt(row: Pick<GrantWithItem, "created_at">): Date {
  return new Date(row.created_at.getTime() + APPROVAL_CODE_TTL_MS);
}

/**
 * Whether `row`'s approval link still approves at `at`: within its own hour, and not voided with
 * the code by five wrong codes (spec 8: counted per approval request and kept when the code
 * changes, so a repeat's new code leaves the link void as well).
 */
export function isApprovalLinkLive(
  row: Pick<GrantWithItem, "created_at" | "approval_code_wrong">,
  at: Date,
): boolean {
  return approvalLinkExpiresAt(row) > at && row.approval_code_wrong < MAX_WRONG_CODES_PER_APPROVAL;
}

/**
 * The pending grant `rawCode` approves, or the refusal: a code matching nothing (or not the grant
 * named by `grantId`) counts as wrong before anything else is said.
 */
export async function findPendingByCode(
  repo: GrantsRepo,
  codes: { hashCode(code: string): string },
  organisationId: string,
  rawCode: unknown,
  grantId: string | undefined,
  at: Date,
): Promise<GrantWithItem> {
  const failures = await repo.countCodeFailuresSince(
    organisationId,
    new Date(at.getTime() - WRONG_CODE_WINDOW_MS),
  );
  if (failures.count >= MAX_WRONG_CODES_PER_WINDOW) {
    const retryAfter = Math.ceil(
      ((failures.oldest?.getTime() ?? at.getTime()) + WRONG_CODE_WINDOW_MS - at.getTime()) / 1000,
    );
    throw new AppError(
      "rate_limited",
      "too many wrong approval codes for this organisation; wait before trying again",
      {
        extra: { retry_after: Math.max(retryAfter, 1) },
      },
    );
  }
  // Spec 5 rule 5: a grant_id of another organisation is 404, and its wrong-code count (which
  // voids the code at five) is never touched from here.
  if (grantId && !(await repo.findGrantById(organisationId, grantId))) {
    await repo.insertCodeFailure(organisationId, at);
    throw new AppError("not_found", "no such grant");
  }
  const code = typeof rawCode === "string" ? rawCode.trim() : "";
  const row = /^\d{8}$/.test(code)
    ? await repo.findGrantByCodeHash(organisationId, codes.hashCode(`approval:${code}`))
    : undefined;
  if (!row || (grantId && row.id !== grantId)) {
    await repo.insertCodeFailure(organisationId, at);
    if (grantId) {
      const wrong = await repo.updateApprovalCodeWrong(grantId);
      if (wrong >= MAX_WRONG_CODES_PER_APPROVAL)
        // Void the code but keep an expiry: the request still counts toward the hourly limit,
        // which counts coded requests (limits/request-limit.ts).
        await repo.updateApprovalCode(grantId, null, at);
    }
    throw new AppError("approval_code_invalid", "that approval code matches no pending approval");
  }
  if (row.status !== "pending")
    throw new AppError("approval_code_used", "that approval code was already used");
  if (!row.approval_code_expires_at || row.approval_code_expires_at <= at) {
    throw new AppError(
      "approval_code_expired",
      "that approval code has expired; ask the agent to request again",
    );
  }
  if (row.approval_code_wrong >= MAX_WRONG_CODES_PER_APPROVAL) {
    throw new AppError("approval_code_invalid", "this approval's code is void after too many wrong attempts");
  }
  return row;
}
