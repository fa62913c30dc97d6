// Runs the migrations in migrations/ (listed here, not read from disk, so bundles and tests agree).
import type { Kysely } from "kysely";
import { type Migration, Migrator } from "kysely/migration";
import * as vault from "./migrations/2026-11-22T0000-vault.ts";
import * as grants from "./migrations/2026-11-23T0000-grants.ts";
import * as operators from "./migrations/2026-11-23T0100-operators.ts";
import * as clients from "./migrations/2026-11-23T0200-clients-approvals.ts";
import * as needs from "./migrations/2026-11-23T0300-need-requests.ts";
import * as approvalLinks from "./migrations/2026-11-23T0400-approval-links.ts";
import * as callBoundApprovals from "./migrations/2026-11-24T0000-call-bound-approvals.ts";
import * as needRequestCalls from "./migrations/2026-11-24T0100-need-request-calls.ts";
import * as oauth from "./migrations/2026-11-25T0000-oauth.ts";
import * as itemTokens from "./migrations/2026-11-25T1000-item-tokens.ts";
import * as connectStates from "./migrations/2026-11-25T1100-connect-states.ts";
import * as spentTickets from "./migrations/2026-11-26T0100-spent-tickets.ts";
import * as needsHostlessClosed from "./migrations/2026-11-26T0200-need-requests-hostless-closed.ts";
import * as readableApprovals from "./migrations/2026-11-26T0300-readable-approvals.ts";
import * as ledger from "./migrations/2026-11-26T0400-ledger.ts";
import * as teams from "./migrations/2026-11-26T0500-teams.ts";
import * as policiesPush from "./migrations/2026-11-26T0600-policies-push.ts";
import * as passkeys from "./migrations/2026-11-26T0700-passkeys.ts";
import * as sso from "./migrations/2026-11-26T0700-sso.ts";
import * as ssoStepUp from "./migrations/2026-11-26T0710-sso-step-up.ts";
import * as ledgerAppendOnHead from "./migrations/2026-11-26T0800-ledger-append-on-head.ts";
import * as ssoDomainVerification from "./migrations/2026-11-26T1300-sso-domain-verification.ts";
import * as sessionVerifiedStep from "./migrations/2026-11-26T1310-session-verified-step.ts";
import * as ssoDomainRecheck from "./migrations/2026-11-26T1600-sso-domain-recheck.ts";
import * as pushSubscriptionSession from "./migrations/2026-11-26T1900-push-subscription-session.ts";
import * as grantRequested from "./migrations/2026-11-26T2300-grant-requested.ts";
import * as ledgerGuards from "./migrations/2026-11-26T2320-ledger-guards.ts";
import * as grantCallTicket from "./migrations/2026-11-27T0100-grant-call-ticket.ts";
import * as pushSubscriptionsSessionless from "./migrations/2026-11-27T0900-push-subscriptions-sessionless.ts";
import * as grantHeldUntil from "./migrations/2026-11-27T1300-grant-held-until.ts";
import * as organisationTombstones from "./migrations/2026-11-27T1400-organisation-tombstones.ts";
import * as policyProposals from "./migrations/2026-11-27T1800-policy-proposals.ts";
import * as pendingTotpSession from "./migrations/2026-11-27T1820-pending-totp-session.ts";
import * as clientIssuer from "./migrations/2026-11-27T1830-client-issuer.ts";
import * as pushSubscriptionsPerOperator from "./migrations/2026-11-28T0100-push-subscriptions-per-operator.ts";

const MIGRATIONS: Record<string, Migration> = {
  "2026-11-22T0000-vault": vault,
  "2026-11-23T0000-grants": grants,
  "2026-11-23T0100-operators": operators,
  "2026-11-23T0200-clients-approvals": clients,
  "2026-11-23T0300-need-requests": needs,
  "2026-11-23T0400-approval-links": approvalLinks,
  "2026-11-24T0000-call-bound-approvals": callBoundApprovals,
  "2026-11-24T0100-need-request-calls": needRequestCalls,
  "2026-11-25T0000-oauth": oauth,
  "2026-11-25T1000-item-tokens": itemTokens,
  "2026-11-25T1100-connect-states": connectStates,
  "2026-11-26T0100-spent-tickets": spentTickets,
  "2026-11-26T0200-need-requests-hostless-closed": needsHostlessClosed,
  "2026-11-26T0300-readable-approvals": readableApprovals,
  "2026-11-26T0400-ledger": ledger,
  "2026-11-26T0500-teams": teams,
  "2026-11-26T0600-policies-push": policiesPush,
  "2026-11-26T0700-passkeys": passkeys,
  "2026-11-26T0700-sso": sso,
  "2026-11-26T0710-sso-step-up": ssoStepUp,
  "2026-11-26T0800-ledger-append-on-head": ledgerAppendOnHead,
  "2026-11-26T1300-sso-domain-verification": ssoDomainVerification,
  "2026-11-26T1310-session-verified-step": sessionVerifiedStep,
  "2026-11-26T1600-sso-domain-recheck": ssoDomainRecheck,
  "2026-11-26T1900-push-subscription-session": pushSubscriptionSession,
  "2026-11-26T2300-grant-requested": grantRequested,
  "2026-11-26T2320-ledger-guards": ledgerGuards,
  "2026-11-27T0100-grant-call-ticket": grantCallTicket,
  "2026-11-27T0900-push-subscriptions-sessionless": pushSubscriptionsSessionless,
  "2026-11-27T1300-grant-held-until": grantHeldUntil,
  "2026-11-27T1400-organisation-tombstones": organisationTombstones,
  "2026-11-27T1800-policy-proposals": policyProposals,
  "2026-11-27T1820-pending-totp-session": pendingTotpSession,
  "2026-11-27T1830-client-issuer": clientIssuer,
  "2026-11-28T0100-push-subscriptions-per-operator": pushSubscriptionsPerOperator,
};

export async function migrateToLatest(db: Kysely<unknown>): Promise<void> {
  await migrate(db, (migrator) => migrator.migrateToLatest());
}

/** Up to and including `name` (tests of a migration start from the schema before it). */
export async function migrateTo(db: Kysely<unknown>, name: string): Promise<void> {
  await migrate(db, (migrator) => migrator.migrateTo(name));
}

async function migrate(
  db: Kysely<unknown>,
  run: (migrator: Migrator) => ReturnType<Migrator["migrateToLatest"]>,
): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => MIGRATIONS },
    // Each migration commits on its own: a failure leaves the ones before it applied and recorded.
    transactionMode: "per-migration",
    // Work lands from branches made in parallel: a migration named before one a database already
    // ran (each touches its own tables) is run rather than refused as "corrupted".
    allowUnorderedMigrations: true,
  });
  const { error, results } = await run(migrator);
  const failed = results?.find((r) => r.status === "Error");
  if (error || failed) {
    throw new Error(`database migration ${failed?.migrationName ?? ""} failed`, { cause: error });
  }
}
