// `vault reset-passkeys --email ADDRESS [--even-the-last-factor]`: the way back for an operator who
// lost their passkey. Once an account has one, every step-up takes it and no code stands in for it
// (DECISIONS "Passkeys and single sign-on"), so without the passkey they can neither remove it nor
// add another. The hosted service's administrator runs this against its database (the
// configuration `npm start` reads), after checking who is asking by some other way than this
// account. In one transaction: every passkey of the account removed, every session of it ended,
// and an audit row in each of its organisations; then a security notice mailed to the address.
// Their next sign-in is the email code and the authenticator app, whose code is then the step-up,
// and they add a new passkey under Access. An account with no authenticator app would be left with
// no second factor (its next email-code sign-in enrolls one): refused unless asked for.
import { AppError } from "@latch/shared/errors";
import type { Kysely } from "kysely";
import type { Logger } from "pino";
import { createAuditRepo } from "../audit/audit.repo.ts";
import { normaliseEmail } from "../auth/email-code.service.ts";
import { createOperatorsRepo } from "../auth/operators.repo.ts";
import { createPasskeysRepo } from "../auth/passkeys.repo.ts";
import { createSessionsRepo } from "../auth/sessions.repo.ts";
import { loadConfig } from "../config.ts";
import type { Database } from "../db/schema.ts";
import { runInTransaction } from "../db/transaction.ts";
import { createMailer } from "../mail/mailer.ts";
import { createOrgsRepo } from "../orgs/orgs.repo.ts";
import { withServiceDatabase } from "./service-database.ts";

export interface PasskeyReset {
  operatorId: string;
  email: string;
  passkeysRemoved: number;
  sessionsEnded: number;
  /** The organisations whose audit has the reset. */
  organisations: number;
  /** Whether the account keeps an authenticator app (else its next sign-in enrolls one). */
  hasAuthenticator: boolean;
}

/**
 * Removes every passkey of the account `email`, ends its sessions and audits it, in one
 * transaction. Refuses (nothing changed) an unknown address, an account without a passkey, and,
 * unless `isLastFactorAllowed`, an account whose passkeys are its only second factor.
 */
export async function resetPasskeys(
  db: Kysely<Database>,
  input: { email: unknown; isLastFactorAllowed: boolean },
  now: Date,
): Promise<PasskeyReset> {
  const email = normaliseEmail(input.email);
  return runInTransaction(db, async (trx) => {
    // The account's row, locked: its factor changes (a passkey added or removed meanwhile) wait.
    const operator = await createOperatorsRepo(trx).findOperatorByEmailForUpdate(email);
    if (!operator) throw new AppError("not_found", `no account has the address ${email}`);
    if (!operator.totp_enabled && !input.isLastFactorAllowed) {
      throw new AppError(
        "last_factor",
        `${email} has no authenticator app: without its passkeys it would have no second factor until its next sign-in enrolls one; add --even-the-last-factor to do it anyway`,
      );
    }
    const passkeysRemoved = await createPasskeysRepo(trx).deletePasskeysOf(operator.id);
    if (passkeysRemoved === 0) throw new AppError("not_found", `${email} has no passkey: nothing to reset`);
    const sessionsEnded = await createSessionsRepo(trx).updateSessionsRevokedOf(operator.id, now);
    const organisations = await createOrgsRepo(trx).findOrganisationsOf(operator.id);
    const audit = createAuditRepo(trx);
    for (const organisation of organisations) {
      await audit.insertAuditEvent({
        organisationId: organisation.id,
        actor: "system",
        action: "passkeys_reset",
        detail: {
          operator_id: operator.id,
          email,
          passkeys_removed: passkeysRemoved,
          sessions_ended: sessionsEnded,
          by: "vault reset-passkeys",
        },
      });
    }
    return {
      operatorId: operator.id,
      email,
      passkeysRemoved,
      sessionsEnded,
      organisations: organisations.length,
      hasAuthenticator: operator.totp_enabled,
    };
  });
}

export async function runResetPasskeys(
  env: NodeJS.ProcessEnv,
  input: { email: string | undefined; isLastFactorAllowed: boolean },
  logger: Logger,
  progress: (line: string) => void,
): Promise<number> {
  const config = loadConfig(env);
  return withServiceDatabase(config, async (database, dataDir) => {
    const reset = await resetPasskeys(database.db, input, new Date());
    progress(
      `removed ${reset.passkeysRemoved} passkey(s) of ${reset.email}, ended ${reset.sessionsEnded} session(s), audited in ${reset.organisations} organisation(s)`,
    );
    progress(
      reset.hasAuthenticator
        ? "their next sign-in: the email code, then the authenticator app; they add a new passkey under Access"
        : "they have no second factor now: their next sign-in with an email code enrolls an authenticator app",
    );
    const mailer = createMailer({ smtpUrl: config.SMTP_URL, dataDir, logger });
    try {
      await mailer.send({
        to: reset.email,
        subject: "Latch: your passkeys were removed",
        text: `The administrator of this Latch service removed every passkey of your account (${reset.email}) at ${new Date().toISOString()} and signed out its sessions, after you asked them to.\n\nIf you did not ask for this, tell your organisation's owners now.`,
      });
    } catch {
      // The reset is done and audited; the notice is the one part that may fail.
      progress("the security notice could not be mailed: tell them yourself");
    } finally {
      mailer.close();
    }
    return 0;
  });
}
