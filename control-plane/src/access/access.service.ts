// The access snapshot (spec 4.3 "Access"): who holds a client and what each one fetched, the grants
// with the item each is for, and the issuance ledger. It reads; the clients, grants and audit
// features own the rows.
import type { AuditRepo } from "../audit/audit.repo.ts";
import { type ClientsService, clientView } from "../clients/clients.service.ts";
import type { GrantsService } from "../grants/grants.service.ts";

export interface AccessDeps {
  clients: Pick<ClientsService, "listClients">;
  grants: Pick<GrantsService, "listGrantsWithItem" | "listActiveApprovals">;
  audit: Pick<AuditRepo, "findFetchedNames" | "findAuditEvents">;
}

/**
 * The ledger's actions (spec 6: GET /api/access/events): a client issued, rotated or revoked; an
 * OAuth client consented to, a token issued to it, a token or a whole grant revoked.
 */
const LEDGER_ACTIONS = [
  "client_issued",
  "client_rotated",
  "client_revoked",
  "oauth_client_consented",
  "oauth_token_issued",
  "oauth_token_revoked",
  "oauth_grant_revoked",
];
const REVOCATIONS = new Set(["client_revoked", "oauth_token_revoked", "oauth_grant_revoked"]);

export function createAccessService(deps: AccessDeps) {
  return {
    async listClients(organisationId: string) {
      const [rows, fetched] = await Promise.all([
        deps.clients.listClients(organisationId),
        deps.audit.findFetchedNames(organisationId),
      ]);
      // A model client acts as agent:<id>, a trusted one as trusted:<id> (see the audit filter).
      return rows.map((row) => ({
        ...clientView(row),
        fetched_names: fetched.get(`${row.kind === "trusted" ? "trusted" : "agent"}:${row.id}`) ?? [],
      }));
    },

    /**
     * The newest grants (any status) and every approval in force, newest first. The newest alone
     * are not enough: an agent asks for a new call 30 times an hour, so within hours its pending
     * requests pushed an older standing approval out of the list, and whoever read the snapshot
     * to see who may reach what no longer saw an approval still in force.
     */
    async listGrants(organisationId: string) {
      const [newest, inForce] = await Promise.all([
        deps.grants.listGrantsWithItem(organisationId),
        deps.grants.listActiveApprovals(organisationId),
      ]);
      const listed = new Set(newest.map((grant) => grant.grant_id));
      return [...newest, ...inForce.filter((grant) => !listed.has(grant.grant_id))].sort(
        (a, b) =>
          b.created_at.localeCompare(a.created_at) ||
          (a.grant_id < b.grant_id ? -1 : a.grant_id > b.grant_id ? 1 : 0),
      );
    },

    listLedger: async (organisationId: string) =>
      (await deps.audit.findAuditEvents(organisationId, { actions: LEDGER_ACTIONS })).map((e) => ({
        at: e.at,
        action: e.action,
        ...e.detail,
        revoked: REVOCATIONS.has(e.action),
      })),
  };
}

export type AccessService = ReturnType<typeof createAccessService>;
