// The check an http_request makes before anything leaves (spec 3.1): a usable grant that covers
// the call and, for a one-call grant, spent first (given back when the request never left the
// service); a lasting grant's use noted, at most once a minute.
import { type CallTarget, isCovering, isStandingPolicy } from "./grant-coverage.ts";
import { type PublicGrant, toPublicGrant } from "./grant-view.ts";
import type { GrantCallTicket, GrantScope, GrantsRepo, GrantWithItem } from "./grants.repo.ts";

/** A grant's last use is written at most once a minute: a busy agent costs no write per call. */
export const USE_WRITE_INTERVAL_MS = 60_000;

export interface CallAuthorisation {
  grant: PublicGrant;
  /** Gives a spent one-call grant back: the request never left the service. */
  release(): Promise<void>;
  /** A one-call grant, spent for this call (a session or standing grant is never spent). */
  isOneCall?: boolean;
  /**
   * A one-call grant's call is handed to the proxy under this ticket, named on the grant by the
   * statement that spent it and kept there until `settle`: a control plane killed at any moment
   * after the spend leaves it to be recovered (abandoned-calls.ts).
   */
  ticket?: { id: string; expiresAt: Date };
  /** The call's outcome is written (or the grant given back): nothing is left to recover. */
  settle?(): Promise<void>;
}

export function createCallAuthorisation(deps: { repo: GrantsRepo; now: () => Date }) {
  const { now } = deps;

  /** Records the use of a lasting grant, at most once a minute (its row says when it was last). */
  async function noteUse(row: GrantWithItem, at: Date): Promise<void> {
    const olderThan = new Date(at.getTime() - USE_WRITE_INTERVAL_MS);
    if (row.last_used_at && row.last_used_at >= olderThan) return;
    await deps.repo.updateGrantUsed(row.id, at, olderThan);
  }

  return {
    /**
     * The approval a call would use right now, without spending it (dry_run).
     */
    async findUsableGrant(scope: GrantScope, call?: CallTarget): Promise<PublicGrant | undefined> {
      const at = now();
      const [first] = (await deps.repo.findUsableGrants(scope, at)).filter((row) => isCovering(row, call));
      return first && toPublicGrant(first, at);
    },

    /**
     * Spec 4.2 setup's `ready`: the agent holds an active standing approval on the credential (its
     * own or its folder's) under which it may call `host`, whatever path or method it is scoped to
     * (the Inbox's Always allow scopes one to a path prefix). Authorises nothing: a call is still
     * judged by authoriseCall.
     */
    async hasStandingGrant(scope: GrantScope, host: string): Promise<boolean> {
      const rows = await deps.repo.findUsableGrants(scope, now());
      return rows.some((row) => isStandingPolicy(row.policy) && (!row.scope_host || row.scope_host === host));
    },

    /** True when a standing grant exists for the scope but does not cover this call. */
    async isOutsideStanding(scope: GrantScope, call: CallTarget): Promise<boolean> {
      const rows = await deps.repo.findUsableGrants(scope, now());
      return rows.some(
        (row) =>
          (row.policy === "item_standing" || row.policy === "folder_standing") && !isCovering(row, call),
      );
    },

    /**
     * Authorises one call: a usable grant, with a one-call grant spent before the request is
     * sent. Undefined when there is none (or another call spent the last one first). `usable`:
     * the scope's usable grants when the caller read them already, with its credential in the
     * same statement (calls/call-context.repo.ts), as findUsableGrants answers them.
     * `nameTicket`: the ticket a one-call grant's call will go out under, asked only just before
     * such a grant is spent (a standing grant costs nothing more) and named by the spend itself.
     */
    async authoriseCall(
      scope: GrantScope,
      call?: CallTarget,
      usable?: readonly GrantWithItem[],
      nameTicket?: () => Promise<GrantCallTicket>,
    ): Promise<CallAuthorisation | undefined> {
      const at = now();
      // Drawn once: a grant another call spent first leaves it unused for the next one.
      let ticket: GrantCallTicket | undefined;
      for (const row of usable ?? (await deps.repo.findUsableGrants(scope, at))) {
        if (!isCovering(row, call)) continue;
        if (row.policy !== "prompt") {
          await noteUse(row, at);
          return { grant: toPublicGrant(row, at), release: async () => {} };
        }
        ticket ??= await nameTicket?.();
        if (await deps.repo.updateGrantConsumed(row.id, at, ticket)) {
          const spent = { ...row, status: "consumed", consumed_at: at };
          // The ticket this call named on the grant: a give-back or settle touches only its own.
          const named = ticket;
          return {
            grant: toPublicGrant(spent, at),
            release: () => deps.repo.updateGrantRestored(row.id, named?.id ?? null),
            isOneCall: true,
            ...(named ? { ticket: { id: named.id, expiresAt: named.expiresAt } } : {}),
            settle: async () => {
              if (named) await deps.repo.updateGrantCallSettled(row.id, named.id);
            },
          };
        }
      }
      return undefined;
    },
  };
}
