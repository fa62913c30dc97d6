// Sign-in step two (spec 3.3, 4.3, 5 rule 8): an authenticator app (RFC 6238: SHA-1, 6 digits, 30 s)
// with replay protection, or a one-time backup code. Secrets are stored wrapped under the KEK;
// backup codes only as peppered hashes. Ten failures lock the account for 15 minutes.
import { AppError } from "@latch/shared/errors";
import * as OTPAuth from "otpauth";
import QRCode from "qrcode";
import type { OperatorRow, OperatorSessionRow } from "../db/schema.ts";
import { BACKUP_CODE_COUNT, isSameHash, newBackupCode, normaliseBackupCode } from "./codes.ts";
import type { Keyring } from "./kek.ts";
import type { OperatorsRepo } from "./operators.repo.ts";
import { isFreshlyVerified } from "./step-up.ts";

export const ENROLLMENT_TTL_MS = 10 * 60 * 1000;
export const MAX_TOTP_FAILURES = 10;
export const TOTP_LOCK_MS = 15 * 60 * 1000;
const PERIOD_S = 30;
/** One step either side: an authenticator clock a little off still works. */
const WINDOW = 1;

export interface TotpDeps {
  repo: OperatorsRepo;
  keyring: Keyring;
  now: () => Date;
  issuer?: string;
  /** The operator's passkeys: a second factor too, which an enrolment must not get around. */
  countPasskeys?: (operatorId: string) => Promise<number>;
}

export interface Enrollment {
  otpauth_url: string;
  qr_svg: string;
  expires_at: string;
}

/** How a session last proved its user (operator_sessions). */
type VerifiedSession = Pick<OperatorSessionRow, "verified_at" | "verified_method" | "verified_totp_step">;

const pendingBinding = (operatorId: string) => `${operatorId}:pending-totp`;
const activeBinding = (operatorId: string) => `${operatorId}:totp`;

export function createTotpService(deps: TotpDeps) {
  const issuer = deps.issuer ?? "Latch";

  async function loadOperator(operatorId: string): Promise<OperatorRow> {
    const operator = await deps.repo.findOperatorById(operatorId);
    if (!operator) throw new Error("no such operator");
    return operator;
  }

  function totpFor(email: string, secret: Buffer): OTPAuth.TOTP {
    return new OTPAuth.TOTP({
      issuer,
      label: email,
      algorithm: "SHA1",
      digits: 6,
      period: PERIOD_S,
      secret: new OTPAuth.Secret({ buffer: new Uint8Array(secret).buffer }),
    });
  }

  /** The time step a code matches, or undefined. */
  function matchStep(totp: OTPAuth.TOTP, code: string): number | undefined {
    if (!/^\d{6}$/.test(code)) return undefined;
    const timestamp = deps.now().getTime();
    const delta = totp.validate({ token: code, timestamp, window: WINDOW });
    return delta === null ? undefined : Math.floor(timestamp / 1000 / PERIOD_S) + delta;
  }

  async function enrollmentOf(operator: OperatorRow, secret: Buffer, expiresAt: Date): Promise<Enrollment> {
    const url = totpFor(operator.email, secret).toString();
    return {
      otpauth_url: url,
      qr_svg: await QRCode.toString(url, { type: "svg", margin: 2 }),
      expires_at: expiresAt.toISOString(),
    };
  }

  /**
   * Spends an authenticator code of the active secret: accepted only for a time step after the
   * last accepted one (RFC 6238 section 5.2), by a conditional UPDATE so two replicas cannot both
   * accept it.
   */
  async function spendTotpCode(operator: OperatorRow, code: string): Promise<boolean> {
    return (await spendTotpStep(operator, code)) !== undefined;
  }

  /** Spends `code` as spendTotpCode does; the time step it spent, or undefined. */
  async function spendTotpStep(operator: OperatorRow, code: string): Promise<number | undefined> {
    const step = activeStepOf(operator, code);
    if (step === undefined) return undefined;
    return (await deps.repo.updateTotpLastStep(operator.id, step)) ? step : undefined;
  }

  /** The time step `code` matches under the active secret, or undefined. */
  function activeStepOf(operator: OperatorRow, code: string): number | undefined {
    if (!operator.totp_enabled || !operator.totp_secret || !operator.totp_kek_id) return undefined;
    const secret = deps.keyring.unwrap(
      operator.totp_kek_id,
      operator.totp_secret,
      activeBinding(operator.id),
    );
    return matchStep(totpFor(operator.email, secret), code);
  }

  /**
   * Whether `code` is the one this very session stepped up with moments ago: the time step its
   * verification spent (recorded on the session, never another session's or device's, and none
   * after a backup code), in the last minute. A form that asks for a code behind a step-up is
   * filled in the same 30 seconds as the step-up: its code is then spent already, by the session
   * that sends it.
   */
  function isSessionsStepUpCode(operator: OperatorRow, code: string, session: VerifiedSession | undefined) {
    if (session?.verified_method !== "totp" || !session.verified_at || session.verified_totp_step === null) {
      return false;
    }
    const step = activeStepOf(operator, code);
    if (step === undefined || String(step) !== String(session.verified_totp_step)) return false;
    const age = deps.now().getTime() - session.verified_at.getTime();
    return age >= 0 && age <= 2 * PERIOD_S * 1000;
  }

  async function spendBackupCode(operatorId: string, typed: string): Promise<boolean> {
    const normalised = normaliseBackupCode(typed);
    if (normalised.length !== 10) return false;
    const hash = deps.keyring.hashCode(`backup:${normalised}`);
    const unused = await deps.repo.findUnusedBackupCodes(operatorId);
    const match = unused.find((row) => isSameHash(row.code_hash, hash));
    if (!match) return false;
    return deps.repo.updateBackupCodeUsed(match.id, deps.now());
  }

  async function replaceBackupCodes(repo: OperatorsRepo, operatorId: string): Promise<string[]> {
    const codes = Array.from({ length: BACKUP_CODE_COUNT }, newBackupCode);
    await repo.deleteAndInsertBackupCodes(
      operatorId,
      codes.map((code) => deps.keyring.hashCode(`backup:${normaliseBackupCode(code)}`)),
    );
    return codes;
  }

  function checkNotLocked(operator: OperatorRow): void {
    const now = deps.now();
    if (operator.totp_locked_until && operator.totp_locked_until > now) {
      throw lockedError(operator.totp_locked_until.getTime() - now.getTime());
    }
  }

  /**
   * Takes one attempt before the code is read (operators.repo.ts takeTotpAttempt): the tenth in a
   * row locks the account, and attempts sent at once are refused from there on, unread.
   */
  async function takeAttempt(operatorId: string): Promise<number> {
    const now = deps.now();
    const attempt = await deps.repo.takeTotpAttempt(operatorId, {
      now,
      max: MAX_TOTP_FAILURES,
      lockUntil: new Date(now.getTime() + TOTP_LOCK_MS),
    });
    if (attempt !== undefined) return attempt;
    // Locked since the operator was read: the lock as it stands now.
    checkNotLocked(await loadOperator(operatorId));
    throw lockedError(TOTP_LOCK_MS);
  }

  /** A wrong code on `attempt`: the lock when it was the tenth in a row, else what remains. */
  function refuseAttempt(attempt: number): never {
    if (attempt >= MAX_TOTP_FAILURES) throw lockedError(TOTP_LOCK_MS);
    throw new AppError("totp_invalid", "that code is not valid", {
      extra: { attempts_remaining: MAX_TOTP_FAILURES - attempt },
    });
  }

  function lockedError(forMs: number): AppError {
    return new AppError("totp_locked", "too many wrong codes; the account is locked for 15 minutes", {
      extra: { retry_after: Math.ceil(forMs / 1000) },
    });
  }

  return {
    /**
     * Starts an enrollment, bound to the session `sessionId` that starts it (only it reads and
     * confirms it). Re-enrolling (an authenticator already active) needs a ready session and a
     * current code, so a stolen half-signed-in session cannot swap the authenticator: a code of the
     * app, or an unused backup code, the way back for an operator who lost the phone (a backup code
     * is recovery; the change is mailed when confirmed).
     */
    async start(
      operatorId: string,
      options: { isSessionReady: boolean; currentCode?: unknown; sessionId: string },
    ): Promise<Enrollment> {
      const operator = await loadOperator(operatorId);
      // An account with a passkey only: adding an authenticator is for a session past that passkey.
      if (!options.isSessionReady && (await hasPasskey(operatorId))) {
        throw new AppError("mfa_required", "confirm with your passkey before adding an authenticator", {
          extra: { verify_url: "/verify-totp" },
        });
      }
      if (operator.totp_enabled) {
        if (!options.isSessionReady) {
          throw new AppError("mfa_required", "pass the authenticator step before enrolling a new one");
        }
        checkNotLocked(operator);
        const current = typeof options.currentCode === "string" ? options.currentCode.trim() : "";
        const attempt = await takeAttempt(operatorId);
        const isCurrent =
          (await spendTotpCode(operator, current)) ||
          (!/^\d{6}$/.test(current) && (await spendBackupCode(operatorId, current)));
        if (!isCurrent) refuseAttempt(attempt);
        await deps.repo.updateTotpFailuresReset(operatorId);
      }
      const secret = Buffer.from(new OTPAuth.Secret({ size: 20 }).bytes);
      const wrapped = deps.keyring.wrap(secret, pendingBinding(operatorId));
      const expiresAt = new Date(deps.now().getTime() + ENROLLMENT_TTL_MS);
      await deps.repo.updatePendingTotp(operatorId, wrapped, expiresAt, options.sessionId);
      return enrollmentOf(operator, secret, expiresAt);
    },

    /** The enrollment `sessionId` started, while live; another session's is none (404). */
    async pending(
      operatorId: string,
      options: { isSessionReady: boolean; sessionId: string },
    ): Promise<Enrollment> {
      const operator = await loadOperator(operatorId);
      checkReplacementAllowed(operator, options.isSessionReady, await hasPasskey(operatorId));
      const secret = pendingSecret(operator, options.sessionId);
      return enrollmentOf(operator, secret, operator.pending_totp_expires_at!);
    },

    /**
     * Confirms the enrollment `sessionId` started with a code from the app: the backup codes, once;
     * the time step the code spent (a live code of the new app); and what it changed: the account's
     * first factor (a sign-up), an authenticator beside a passkey, or the active one replaced.
     */
    async confirm(
      operatorId: string,
      rawCode: unknown,
      options: { isSessionReady: boolean; sessionId: string },
    ): Promise<{ backupCodes: string[]; totpStep: number; change: "first" | "added" | "replaced" }> {
      const operator = await loadOperator(operatorId);
      const hadPasskey = await hasPasskey(operatorId);
      checkReplacementAllowed(operator, options.isSessionReady, hadPasskey);
      const secret = pendingSecret(operator, options.sessionId);
      const step = matchStep(
        totpFor(operator.email, secret),
        typeof rawCode === "string" ? rawCode.trim() : "",
      );
      if (step === undefined)
        throw new AppError("totp_invalid", "that code does not match the new authenticator");
      const wrapped = deps.keyring.wrap(secret, activeBinding(operatorId));
      const backupCodes = await deps.repo.inTransaction(async (repo) => {
        const pending = { expiresAt: operator.pending_totp_expires_at!, sessionId: options.sessionId };
        if (!(await repo.updateTotpEnabled(operatorId, wrapped, step, pending)))
          throw new AppError("no_pending_enrollment", "this enrollment was already confirmed");
        return replaceBackupCodes(repo, operatorId);
      });
      const change = operator.totp_enabled ? "replaced" : hadPasskey ? "added" : "first";
      return { backupCodes, totpStep: step, change };
    },

    /**
     * The authenticator step: an app code or an unused backup code. Backup codes stay the way back
     * in for an account whose second factor is a passkey alone (`hasPasskey`). A backup code signs
     * in and nothing more: on a session past its sign-in (`isSessionReady`, a step-up) it is refused
     * unread and unspent, since it would verify nothing (step-up.ts isFreshlyVerified).
     */
    async verify(
      operatorId: string,
      rawCode: unknown,
      options: { hasPasskey?: boolean; isSessionReady?: boolean } = {},
    ): Promise<{ usedBackupCode: boolean; totpStep?: number }> {
      const operator = await loadOperator(operatorId);
      checkNotLocked(operator);
      if (!operator.totp_enabled && !options.hasPasskey)
        throw new AppError("no_pending_enrollment", "no authenticator is enrolled; enroll one first");
      const code = typeof rawCode === "string" ? rawCode.trim() : "";
      if (options.isSessionReady && !/^\d{6}$/.test(code)) {
        throw new AppError(
          "totp_invalid",
          "a backup code signs you in but does not confirm it is you on a signed-in session: enter a code from your authenticator app",
        );
      }
      const attempt = await takeAttempt(operatorId);
      const totpStep = await spendTotpStep(operator, code);
      let usedBackupCode = false;
      if (totpStep === undefined) {
        usedBackupCode = !/^\d{6}$/.test(code) && (await spendBackupCode(operatorId, code));
        if (!usedBackupCode) refuseAttempt(attempt);
      }
      await deps.repo.updateTotpFailuresReset(operatorId);
      return totpStep === undefined ? { usedBackupCode } : { usedBackupCode, totpStep };
    },

    /**
     * New backup codes for a current authenticator code; every unused old one stops working. The
     * code this `session` has just stepped up with counts (isSessionsStepUpCode).
     *
     * An account without an authenticator app (a passkey alone: DELETE /api/auth/totp) has no such
     * code. For it the route's step-up is the proof: a passkey verification of the last 5 minutes
     * (DECISIONS "Step-up": with a passkey, only a passkey), the stronger factor, checked again here.
     * `code` is then not read: asking for one of the old backup codes instead would lock out the
     * very operator who lost them, the one who most needs new ones, and adds nothing a thief of
     * the session could not also have once past the passkey.
     */
    async regenerateBackupCodes(
      operatorId: string,
      rawCode: unknown,
      session?: VerifiedSession,
    ): Promise<string[]> {
      const operator = await loadOperator(operatorId);
      if (!operator.totp_enabled) {
        const isPasskeyFresh =
          session !== undefined &&
          (await hasPasskey(operatorId)) &&
          isFreshlyVerified(session, ["passkey"], deps.now());
        if (!isPasskeyFresh) {
          throw new AppError(
            "step_up_required",
            "making new backup codes needs a verification of the last 5 minutes: confirm with your passkey",
            { extra: { methods: ["passkey"] } },
          );
        }
        return deps.repo.inTransaction((repo) => replaceBackupCodes(repo, operatorId));
      }
      checkNotLocked(operator);
      const code = typeof rawCode === "string" ? rawCode.trim() : "";
      const attempt = await takeAttempt(operatorId);
      if (!(await spendTotpCode(operator, code)) && !isSessionsStepUpCode(operator, code, session)) {
        refuseAttempt(attempt);
      }
      await deps.repo.updateTotpFailuresReset(operatorId);
      return deps.repo.inTransaction((repo) => replaceBackupCodes(repo, operatorId));
    },

    /** Removes the authenticator app; refused while it is the account's only factor. */
    async disable(operatorId: string): Promise<void> {
      const outcome = await deps.repo.updateTotpDisabledUnlessLast(operatorId);
      if (outcome === "none") throw new AppError("not_found", "no authenticator app is enrolled");
      if (outcome === "last_factor") {
        throw new AppError(
          "last_factor",
          "the authenticator app is your only way to sign in besides the email code; add a passkey first",
        );
      }
    },

    countUnusedBackupCodes: (operatorId: string): Promise<number> =>
      deps.repo.findUnusedBackupCodeCount(operatorId),

    /** The operator's account as the console shows it, or undefined. */
    findOperator: (operatorId: string): Promise<OperatorRow | undefined> =>
      deps.repo.findOperatorById(operatorId),

    /** The operator a live session belongs to (it exists: deleting one ends its sessions). */
    getOperator: (operatorId: string): Promise<OperatorRow> => loadOperator(operatorId),
  };

  /**
   * Replacing an enrolled authenticator is for a session that passed the current one. Without this,
   * someone who can read the operator's mail could sign in while a replacement is pending, read the
   * new secret and confirm it: the second factor skipped.
   */
  function checkReplacementAllowed(operator: OperatorRow, isSessionReady: boolean, hasKey: boolean): void {
    if ((operator.totp_enabled || hasKey) && !isSessionReady) {
      throw new AppError("mfa_required", "pass the authenticator step first", {
        extra: { verify_url: "/verify-totp" },
      });
    }
  }

  async function hasPasskey(operatorId: string): Promise<boolean> {
    return ((await deps.countPasskeys?.(operatorId)) ?? 0) > 0;
  }

  /** The pending secret `sessionId` started; another session's answers as if none were pending. */
  function pendingSecret(operator: OperatorRow, sessionId: string): Buffer {
    if (
      operator.pending_totp_session_id !== sessionId ||
      !operator.pending_totp_secret ||
      !operator.pending_totp_kek_id ||
      !operator.pending_totp_expires_at ||
      operator.pending_totp_expires_at <= deps.now()
    ) {
      throw new AppError(
        "no_pending_enrollment",
        "no enrollment is in progress (they last 10 minutes); start again",
      );
    }
    return deps.keyring.unwrap(
      operator.pending_totp_kek_id,
      operator.pending_totp_secret,
      pendingBinding(operator.id),
    );
  }
}

export type TotpService = ReturnType<typeof createTotpService>;
