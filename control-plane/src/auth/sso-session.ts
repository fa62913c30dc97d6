// A session begun with single sign-on (operator_sessions.sso_organisation_id) speaks for what its
// organisation's identity provider vouched for: this person, in that organisation. It acts there
// alone, and it leaves the account's own ways of signing in (passkeys, the authenticator, backup
// codes) as they are: those reach every other organisation of the account, which that provider
// has no say over. So a provider, even one run by a hostile owner, gets no further than its own
// organisation.
import { AppError } from "@latch/shared/errors";
import type { OperatorSessionRow } from "../db/schema.ts";

/** Throws `sso_session` for a session begun with single sign-on; `doing` names what it tried. */
export function refuseInSsoSession(
  session: Pick<OperatorSessionRow, "sso_organisation_id">,
  doing: string,
): void {
  if (!session.sso_organisation_id) return;
  throw new AppError(
    "sso_session",
    `this session began with your organisation's single sign-on, which does not allow ${doing}; sign in with your email code for that`,
  );
}
