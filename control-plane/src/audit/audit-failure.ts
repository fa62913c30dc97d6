// What is logged when an audit row could not be written: the database's error code and nothing
// else. The row's text may be what broke it (agent text), and a database error quotes its SQL and
// parameters, so neither is ever logged.
import type { Logger } from "pino";

/** The SQLSTATE (or another short code) of a database error; "unknown" when it has none. */
export function errorCodeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[A-Za-z0-9_]{1,32}$/.test(code) ? code : "unknown";
}

/** A CallsDeps.onAuditFailure that logs the code only. */
export function logAuditFailure(logger: Pick<Logger, "error">): (error: unknown) => void {
  return (error) =>
    logger.error({ code: errorCodeOf(error) }, "audit row not written; the answer was still sent");
}
