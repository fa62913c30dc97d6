// The security notice of a change to how an account signs in (a passkey added or removed, the
// authenticator app set up, replaced or removed, new backup codes): mailed to the operator, never
// with a code or a secret in it, so that a change they did not make does not go unseen.
import type { FastifyRequest } from "fastify";
import type { Mailer } from "../mail/mailer.ts";

export interface FactorNoticeDeps {
  mailer: Mailer;
  /** The operator's address. */
  getOperator(operatorId: string): Promise<{ email: string }>;
  now: () => Date;
}

/**
 * Mails `what` (a sentence: "the passkey "Laptop" was added") to the operator. Sent once the change
 * is saved; a mail that cannot go out is logged, never the change's answer: a 500 would tell the
 * operator a saved change failed, and a retry would meet "not found" or "already added".
 */
export async function mailFactorNotice(
  deps: FactorNoticeDeps,
  request: FastifyRequest,
  operatorId: string,
  what: string,
): Promise<void> {
  try {
    const operator = await deps.getOperator(operatorId);
    await deps.mailer.send({
      to: operator.email,
      subject: `Latch: ${what}`,
      text: `${what} on your Latch account (${operator.email}) at ${deps.now().toISOString()}.\n\nIf this was not you, sign in, check your passkeys and authenticator under Access, and sign out every other session.`,
    });
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    request.log.error(
      {
        operator_id: operatorId,
        error: `${(error as Error)?.name ?? "Error"} ${typeof code === "string" ? code : ""}`.trim(),
      },
      "the security notice of a sign-in change could not be mailed",
    );
  }
}

/** `mailFactorNotice` bound to its deps: what a route file calls once a change is saved. */
export function createFactorNotices(deps: FactorNoticeDeps) {
  return (request: FastifyRequest, operatorId: string, what: string) =>
    mailFactorNotice(deps, request, operatorId, what);
}
