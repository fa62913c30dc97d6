// Sign-in step one (spec 3.3, 4.3, 8): an 8-digit code by email, valid 10 minutes, single use,
// voided by five wrong attempts, replaced by a new send, at most 5 sends per email per 15
// minutes, and at most 30 per 15 minutes asked for from one client address. Every count lives in
// the database under an advisory lock, so the limits hold across replicas. Known and unknown
// addresses get the same answer.
import { AppError } from "@latch/shared/errors";
import { newId } from "@latch/shared/ids";
import { refuseUnsafeText } from "@latch/shared/text/safe-string";
import { z } from "zod";
import { createRateLimiter, type RateLimit } from "../limits/rate-limit.ts";
import type { Mailer } from "../mail/mailer.ts";
import { isSameHash, newEightDigitCode } from "./codes.ts";
import type { EmailCodesRepo } from "./email-codes.repo.ts";
import type { Keyring } from "./kek.ts";

export const EMAIL_CODE_TTL_MS = 10 * 60 * 1000;
export const MAX_WRONG_EMAIL_CODES = 5;
export const MAX_SENDS = 5;
export const SEND_WINDOW_MS = 15 * 60 * 1000;

/**
 * Sends one client address may ask for, whatever the email: without it one caller mails codes to
 * thousands of addresses (mail bombing them, and spending the sender's reputation), 5 each. Generous
 * for an office behind one NAT signing in at nine.
 */
export const EMAIL_CODE_SENDS_PER_IP: RateLimit = {
  name: "email_code_send:ip",
  limit: 30,
  windowMs: SEND_WINDOW_MS,
  what: "email codes asked for from one address",
};

/**
 * Send rows, challenges and counted client sends older than this count for nothing (the longest
 * window is 15 minutes, a code lives 10): a day's margin, so a replica whose clock runs ahead
 * never prunes what another still counts.
 */
export const EMAIL_CODE_ROWS_KEPT_MS = 24 * 60 * 60 * 1000;

const email = z.email().max(254);

export function normaliseEmail(raw: unknown): string {
  refuseUnsafeText("email", raw, { code: "invalid_email" });
  const parsed = email.safeParse(typeof raw === "string" ? raw.trim().toLowerCase() : raw);
  if (!parsed.success) throw new AppError("invalid_email", "give a valid email address");
  return parsed.data;
}

export interface EmailCodeDeps {
  repo: EmailCodesRepo;
  mailer: Mailer;
  keyring: Keyring;
  now: () => Date;
}

export function createEmailCodeService(deps: EmailCodeDeps) {
  const limiter = createRateLimiter(deps.repo.rateLimits, deps.now);
  /**
   * Mails the code, or answers 503 mail_unavailable when the relay is down or refuses it: the
   * operator is told the mail did not go (not a bare 500), and nothing of the relay's answer, which
   * may quote the message, reaches the response. The send still counts against the address's limit.
   */
  async function sendOrRefuse(mail: Parameters<Mailer["send"]>[0]): Promise<void> {
    try {
      await deps.mailer.send(mail);
    } catch {
      throw new AppError(
        "mail_unavailable",
        "the code could not be mailed just now; try again in a few minutes",
      );
    }
  }
  return {
    /**
     * Mails a code to `rawEmail`, asked for by the caller at `clientAddress` (request.ip). The
     * client's place is taken before the address is looked at, so a refusal says nothing of
     * whether the email has an account.
     */
    async sendCode(rawEmail: unknown, clientAddress: string): Promise<void> {
      const address = normaliseEmail(rawEmail);
      // Its own transaction, before the email's: PGlite has one connection, so no nesting.
      await limiter.takeForAddress(EMAIL_CODE_SENDS_PER_IP, clientAddress);
      const code = newEightDigitCode();
      const now = deps.now();
      let isSignUp = false;
      await deps.repo.inEmailLock(address, async (repo) => {
        const sends = await repo.findSendTimesSince(address, new Date(now.getTime() - SEND_WINDOW_MS));
        if (sends.length >= MAX_SENDS) {
          const retryAfter = Math.ceil((sends[0]!.getTime() + SEND_WINDOW_MS - now.getTime()) / 1000);
          throw new AppError(
            "rate_limited",
            "too many codes sent to this address; wait before asking again",
            {
              extra: { retry_after: Math.max(retryAfter, 1) },
            },
          );
        }
        await repo.insertSend(address, now);
        // Sign-up and sign-in are one flow (verifyCode creates the account); the mail says which
        // one this address is doing. Only the address's owner reads it: the answer stays the same.
        isSignUp = !(await repo.findOperatorIdByEmail(address));
        // A new send replaces the previous code, and its wrong-attempt count starts again.
        await repo.insertChallenge(
          address,
          deps.keyring.hashCode(code),
          new Date(now.getTime() + EMAIL_CODE_TTL_MS),
        );
      });
      await sendOrRefuse(
        isSignUp
          ? {
              to: address,
              subject: `Your Latch sign-up code: ${code}`,
              text: `Your Latch sign-up code is ${code}\n\nEnter it to create your Latch account. It works once, for 10 minutes. If you did not ask to sign up, ignore this mail: no account is created.`,
            }
          : {
              to: address,
              subject: `Your Latch sign-in code: ${code}`,
              text: `Your Latch sign-in code is ${code}\n\nIt works once, for 10 minutes. If you did not ask for it, ignore this mail.`,
            },
      );
    },

    /** The operator the code proves, created on first sign-in (sign-up and sign-in are one flow). */
    async verifyCode(rawEmail: unknown, rawCode: unknown): Promise<{ operatorId: string; isNew: boolean }> {
      const address = normaliseEmail(rawEmail);
      const code = typeof rawCode === "string" ? rawCode.trim() : "";
      const now = deps.now();
      const outcome = await deps.repo.inEmailLock(address, async (repo) => {
        const challenge = await repo.findChallenge(address);
        // Spec 4.3 keeps attempts_remaining (0) on every refusal; the sentence says what happened,
        // so nobody reads "no attempts left" for a code that merely ran out of time.
        if (!challenge) {
          return {
            ok: false as const,
            remaining: 0,
            reason: "no code is waiting for this address (it was used, replaced or voided); send a new one",
          };
        }
        if (challenge.expires_at <= now) {
          return {
            ok: false as const,
            remaining: 0,
            reason: "that code has expired (a code works for 10 minutes); send a new one",
          };
        }
        if (!/^\d{8}$/.test(code) || !isSameHash(deps.keyring.hashCode(code), challenge.code_hash)) {
          const wrong = challenge.wrong_attempts + 1;
          const remaining = Math.max(MAX_WRONG_EMAIL_CODES - wrong, 0);
          if (remaining === 0) await repo.deleteChallenge(address);
          else await repo.updateChallengeWrongAttempts(address, wrong);
          return {
            ok: false as const,
            remaining,
            reason: remaining === 0 ? "wrong code; this code is now void, send a new one" : "wrong code",
          };
        }
        await repo.deleteChallenge(address);
        const existing = await repo.findOperatorIdByEmail(address);
        if (existing) return { ok: true as const, operatorId: existing, isNew: false };
        const operatorId = newId("opr");
        await repo.insertOperator({ id: operatorId, email: address, createdAt: now });
        return { ok: true as const, operatorId, isNew: true };
      });
      if (!outcome.ok) {
        throw new AppError("otp_invalid", outcome.reason, {
          extra: { attempts_remaining: outcome.remaining },
        });
      }
      return { operatorId: outcome.operatorId, isNew: outcome.isNew };
    },

    /** Deletes the rows no limit or code reads any more (EMAIL_CODE_ROWS_KEPT_MS); answers how many. */
    pruneExpired(): Promise<number> {
      return deps.repo.deleteExpired(
        new Date(deps.now().getTime() - EMAIL_CODE_ROWS_KEPT_MS),
        EMAIL_CODE_SENDS_PER_IP.name,
      );
    },
  };
}

export type EmailCodeService = ReturnType<typeof createEmailCodeService>;
