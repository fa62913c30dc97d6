// What is logged when an audit row could not be written: the database's error code and the
// statement's name, nothing else. The row's text may be what broke it (agent text), and a raw
// database error quotes its SQL and parameters, so neither is ever logged.
import type { Logger } from "pino";
import { DatabaseError, databaseErrorCode } from "../db/database-error.ts";

/** A CallsDeps.onAuditFailure that logs the code (and statement) only. */
export function logAuditFailure(logger: Pick<Logger, "error">): (error: unknown) => void {
  return logDatabaseFailure(logger, "audit row not written; the answer was still sent");
}

/** A failed write logged as `sentence` with the database's code (and statement) only. */
export function logDatabaseFailure(
  logger: Pick<Logger, "error">,
  sentence: string,
): (error: unknown) => void {
  return (error) =>
    logger.error(
      {
        code: databaseErrorCode(error),
        ...(error instanceof DatabaseError ? { statement: error.statement } : {}),
      },
      sentence,
    );
}
