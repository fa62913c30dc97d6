// Model (avm_) and trusted (avt_) clients (spec 2.6, 3.4): a bearer shown once, stored only as its
// SHA-256; rotating replaces the hash (the old token stops at once) only while the client is live
// and holds the bearer the rotation read, so a revoke or another rotation at the same moment wins
// and this one hands out nothing; revoking stops the token and revokes the client's approvals. A
// row keeps whom its live bearer was shown (`issued_by`): a member removed from the organisation
// loses the trusted clients they hold (`revokeHeldBy`). A client of an environment this plane does
// not serve is not live here, whatever its bearer.
import { randomBytes } from "node:crypto";
import { sha256Hex } from "@latch/shared/crypto/hash";
import { AppError } from "@latch/shared/errors";
import { isIdShaped, newId } from "@latch/shared/ids";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { isRole, roleRefusal } from "../auth/permissions.ts";
import type { ClientRow } from "../db/schema.ts";
import type { GrantsService } from "../grants/grants.service.ts";
import type { ClientsRepo } from "./clients.repo.ts";

export type ClientKind = "model" | "trusted";
const PREFIX: Record<ClientKind, string> = { model: "avm_", trusted: "avt_" };
/** last_used_at is written at most once a minute per client. */
const USE_WRITE_INTERVAL_MS = 60_000;
/**
 * How long a bearer found live may let a request in unconfirmed on a route that confirms it
 * itself before acting (principal.ts `confirmsBearer`, POST /mcp). The route still refuses it,
 * 401, when its own check finds the client revoked or the token rotated.
 */
const RECALL_MS = 10 * 60_000;
const MAX_RECALLED = 10_000;
const BEARER_SHAPE = /^av[mt]_[A-Za-z0-9_-]{20,100}$/;

/** The operator id an actor (`operator:<id>`) names, or null (`system`). */
function operatorIdOf(actor: string): string | null {
  return actor.startsWith("operator:") ? actor.slice("operator:".length) : null;
}

/**
 * What a change of a client writes in one transaction: the client, the approvals it holds when it
 * is revoked, and its audit row.
 */
export interface ClientsTransaction {
  repo: ClientsRepo;
  grants: Pick<GrantsService, "revokeAgentGrants">;
  /** Closes the client's pending credential requests (needs.service.ts closeAgentNeeds). */
  closeAgentNeeds(organisationId: string, agentId: string, actor: string, at: Date): Promise<void>;
  /**
   * The audit append on this transaction (services.ts: `tx.audit.insertAuditEvent`): a client
   * issued, rotated or revoked and its row are both written or neither is. A wiring without it has
   * the row written after the commit.
   */
  recordEvent?: (event: AuditEvent) => Promise<void>;
  /**
   * The operator's role in the organisation, read with its membership row locked `FOR SHARE` in
   * this transaction (undefined: not a member): a removal, which deletes that row, waits for the
   * transaction and then revokes what it issued (services.ts `inMembersLock`).
   */
  findMemberRoleForShare?: (organisationId: string, operatorId: string) => Promise<string | undefined>;
}

export interface ClientsServiceDeps {
  repo: ClientsRepo;
  /** Runs `fn` in one transaction with the repo and services bound to it (services.ts). */
  inTransaction<T>(fn: (tx: ClientsTransaction) => Promise<T>): Promise<T>;
  /** Revoking an OAuth client also ends its consents, grants and tokens (oauth/). */
  onOAuthClientRevoked?: (client: ClientRow) => Promise<void>;
  /** The issuance ledger (spec 6: GET /api/access/events) is written to the audit trail. */
  recordEvent?: (event: AuditEvent) => Promise<void>;
  environments: readonly string[];
  defaultEnvironment: string;
  baseUrl: string;
  now: () => Date;
}

export interface IssuedClient {
  client_id: string;
  kind: ClientKind;
  name: string;
  environment: string;
  token: string;
  mcp_url?: string;
}

export function clientView(row: ClientRow) {
  return {
    client_id: row.id,
    kind: row.kind,
    /** An OAuth client acting through this row: it has no bearer of ours to rotate. */
    oauth: row.oauth_client_id !== null,
    name: row.name,
    environment: row.environment,
    bearer_last4: row.token_last4,
    created_at: row.created_at.toISOString(),
    first_access_at: row.first_used_at?.toISOString() ?? null,
    last_access_at: row.last_used_at?.toISOString() ?? null,
    revoked_at: row.revoked_at?.toISOString() ?? null,
  };
}

export function createClientsService(deps: ClientsServiceDeps) {
  const newToken = (kind: ClientKind) => `${PREFIX[kind]}${randomBytes(32).toString("base64url")}`;
  /**
   * Spec 4.3: on staging, production does not exist. A plane that shares its database with one
   * serving other environments (LATCH_ENVIRONMENTS) finds their clients' rows too; their bearers
   * must not act here (a production avt_ would read production values off a staging plane), so
   * every lookup of a bearer or of an access token's client passes through this (a recalled
   * bearer is one `authenticate` let through). Refused as not live, 401, on every bearer route.
   */
  const isServedHere = (row: ClientRow | undefined): row is ClientRow =>
    row !== undefined && deps.environments.includes(row.environment);
  /** Bearers found live (by their SHA-256), oldest first: see RECALL_MS. Hashes and rows only. */
  const recalled = new Map<string, { row: ClientRow; at: number }>();
  const remember = (bearerHash: string, row: ClientRow) => {
    recalled.delete(bearerHash);
    if (recalled.size >= MAX_RECALLED) recalled.delete(recalled.keys().next().value!);
    recalled.set(bearerHash, { row, at: deps.now().getTime() });
  };
  /** Rotating or revoking here: this replica asks the database again at once. */
  const forgetClient = (id: string) => {
    for (const [bearerHash, entry] of recalled) if (entry.row.id === id) recalled.delete(bearerHash);
  };
  /** Records a use, at most once a minute per client; the row as it now is. */
  const markUsed = async (row: ClientRow): Promise<ClientRow> => {
    const now = deps.now();
    if (row.last_used_at && now.getTime() - row.last_used_at.getTime() <= USE_WRITE_INTERVAL_MS) return row;
    const firstUsedAt = row.first_used_at ?? now;
    await deps.repo.updateClientUsed(row.id, { lastUsedAt: now, firstUsedAt });
    return { ...row, last_used_at: now, first_used_at: firstUsedAt };
  };
  /**
   * A ledger entry: who (`operator:<id>`, DECISIONS "Teams"), and which token by a hash of its hash
   * (the jti of an OAuth token later).
   */
  const ledgerEvent = (
    organisationId: string,
    actor: string,
    action: string,
    clientId: string,
    token?: string,
    reason?: string,
  ): AuditEvent => ({
    organisationId,
    actor,
    action,
    detail: {
      client_id: clientId,
      ...(token ? { jti_hash: sha256Hex(sha256Hex(token)).slice(0, 24) } : {}),
      ...(reason ? { reason } : {}),
    },
  });
  /**
   * Runs a change of a client in one transaction with its audit row (`event`, none when the change
   * made nothing new): both are written or neither is.
   */
  async function recorded<T>(
    change: (tx: ClientsTransaction) => Promise<{ result: T; event?: AuditEvent | undefined }>,
  ): Promise<T> {
    let unrecorded: AuditEvent | undefined;
    const result = await deps.inTransaction(async (tx) => {
      const { result, event } = await change(tx);
      if (event && tx.recordEvent) await tx.recordEvent(event);
      else unrecorded = event;
      return result;
    });
    if (unrecorded) await deps.recordEvent?.(unrecorded);
    return result;
  }

  async function loadClient(organisationId: string, id: string): Promise<ClientRow> {
    const row = await deps.repo.findClientById(organisationId, id);
    if (!row) throw new AppError("not_found", "no such client");
    return row;
  }

  const REVOKED = "this client is revoked";

  /**
   * Stops the token of client `id` and revokes its approvals and requests in `tx`; the audit row to
   * write, none for a client revoked already (a repeated revoke marks the ledger once, spec 6).
   */
  async function revokeIn(
    { repo, grants, closeAgentNeeds }: ClientsTransaction,
    organisationId: string,
    id: string,
    actor?: string,
    reason?: string,
  ): Promise<AuditEvent | undefined> {
    const now = deps.now();
    const isRevoked = await repo.updateClientRevoked(id, now);
    await grants.revokeAgentGrants(organisationId, id, now, actor);
    await closeAgentNeeds(organisationId, id, actor ?? "system", now);
    return isRevoked
      ? ledgerEvent(organisationId, actor ?? "system", "client_revoked", id, undefined, reason)
      : undefined;
  }

  /**
   * Refuses, 403, a bearer handed to an operator who is no longer a member allowed `clients.write`,
   * judged in the transaction that writes it with their membership row held (a removal at the same
   * moment waits for it, then revokes the client). `system` and a wiring without the read pass.
   */
  async function requireWriterIn(tx: ClientsTransaction, organisationId: string, actor: string) {
    const operatorId = operatorIdOf(actor);
    if (operatorId === null || !tx.findMemberRoleForShare) return;
    const role = await tx.findMemberRoleForShare(organisationId, operatorId);
    if (role === undefined) {
      throw new AppError("forbidden", "you are no longer a member of this organisation; nothing was issued");
    }
    const refusal = isRole(role)
      ? roleRefusal(role, "clients.write")
      : new AppError("forbidden", "no role here");
    if (refusal) throw refusal;
  }

  /**
   * Stops the token and revokes every approval the client holds, with its audit row (naming
   * `reason` when the operator did not ask for it), in one transaction.
   */
  async function revokeRow(organisationId: string, row: ClientRow, actor?: string, reason?: string) {
    const { id } = row;
    forgetClient(id);
    await recorded(async (tx) => ({
      result: undefined,
      event: await revokeIn(tx, organisationId, id, actor, reason),
    }));
    forgetClient(id);
    // An OAuth client's consents, refresh tokens and access tokens end too (spec 3.4); run even
    // on a repeated revoke, so a consent given between two revokes cannot survive.
    if (row.oauth_client_id) await deps.onOAuthClientRevoked?.(row);
  }

  return {
    /** Issues a client; `actor` (`operator:<id>`) is who, on its audit row. */
    async issueClient(
      organisationId: string,
      kind: ClientKind,
      input: Record<string, unknown>,
      actor = "system",
    ): Promise<IssuedClient> {
      const environment = typeof input.environment === "string" ? input.environment : deps.defaultEnvironment;
      if (!deps.environments.includes(environment))
        throw new AppError("not_found", `this service does not serve ${environment}`);
      const name =
        typeof input.name === "string" && input.name.trim()
          ? input.name.trim().slice(0, 80)
          : `${kind} client`;
      const token = newToken(kind);
      const id = newId("cli");
      await recorded(async (tx) => {
        await requireWriterIn(tx, organisationId, actor);
        await tx.repo.insertClient({
          id,
          organisation_id: organisationId,
          kind,
          name,
          environment,
          token_hash: sha256Hex(token),
          token_last4: token.slice(-4),
          created_at: deps.now(),
          rotated_at: null,
          revoked_at: null,
          first_used_at: null,
          last_used_at: null,
          oauth_client_id: null,
          issued_by: operatorIdOf(actor),
        });
        return { result: undefined, event: ledgerEvent(organisationId, actor, "client_issued", id, token) };
      });
      return {
        client_id: id,
        kind,
        name,
        environment,
        token,
        ...(kind === "model" ? { mcp_url: `${deps.baseUrl}/mcp` } : {}),
      };
    },

    /**
     * A new bearer for the client, the old one stopped at once; `actor` as for issueClient, and now
     * the one its bearer was shown. A revoke that commits first answers 404 as a revoked client
     * does; another rotation that commits first, 409 `stale_version`: either way nothing is
     * replaced, audited or handed out.
     */
    async rotateClient(organisationId: string, id: string, actor = "system"): Promise<IssuedClient> {
      const row = await loadClient(organisationId, id);
      if (row.revoked_at) throw new AppError("not_found", REVOKED);
      if (row.oauth_client_id) {
        throw new AppError(
          "invalid_request",
          "an OAuth client has no bearer to rotate; it signs in again through its own app",
        );
      }
      const kind = row.kind as ClientKind;
      const token = newToken(kind);
      forgetClient(id);
      await recorded(async (tx) => {
        const { repo } = tx;
        await requireWriterIn(tx, organisationId, actor);
        const isRotated = await repo.updateClientToken(id, {
          fromTokenHash: row.token_hash,
          tokenHash: sha256Hex(token),
          tokenLast4: token.slice(-4),
          rotatedAt: deps.now(),
          issuedBy: operatorIdOf(actor),
        });
        if (!isRotated) {
          const current = await repo.findClientById(organisationId, id);
          if (!current || current.revoked_at) throw new AppError("not_found", REVOKED);
          throw new AppError(
            "stale_version",
            "this client was rotated by another request at the same moment; the token that request showed is the live one",
          );
        }
        return { result: undefined, event: ledgerEvent(organisationId, actor, "client_rotated", id, token) };
      });
      // The old bearer, recalled by a request during the rotation, is asked in full again.
      forgetClient(id);
      return {
        client_id: id,
        kind,
        name: row.name,
        environment: row.environment,
        token,
        ...(kind === "model" ? { mcp_url: `${deps.baseUrl}/mcp` } : {}),
      };
    },

    /**
     * Stops the token and revokes every approval the client holds, with its audit row, in one
     * transaction; `actor`, the operator who did it, is recorded on each approval as who revoked it
     * and on the row.
     */
    async revokeClient(organisationId: string, id: string, actor?: string): Promise<void> {
      await revokeRow(organisationId, await loadClient(organisationId, id), actor);
    },

    /**
     * A member is gone from the organisation: in `tx`, the transaction that deletes their membership
     * under the members lock, the trusted clients (avt_) whose live bearer they were shown are revoked, `actor` (who removed them) on each `client_revoked` row with reason
     * `member_removed`. Model clients (avm_) stay: each of their calls still needs an approval, and
     * revoking them would stop the organisation's agents. The ids revoked.
     */
    async revokeHeldBy(
      tx: ClientsTransaction,
      organisationId: string,
      operatorId: string,
      actor: string,
    ): Promise<string[]> {
      const held = await tx.repo.findLiveClientsIssuedBy(organisationId, operatorId, "trusted");
      for (const row of held) {
        forgetClient(row.id);
        const event = await revokeIn(tx, organisationId, row.id, actor, "member_removed");
        if (event) await (tx.recordEvent ?? deps.recordEvent)?.(event);
      }
      return held.map((row) => row.id);
    },

    /** The kind of the organisation's client `id`, or undefined for no such client. */
    async kindOf(organisationId: string, id: string): Promise<ClientKind | undefined> {
      if (!isIdShaped("cli", id)) return undefined;
      return (await deps.repo.findClientById(organisationId, id))?.kind as ClientKind | undefined;
    },

    /**
     * The model client row an OAuth client acts through in an organisation and environment (the one
     * the operator picked at consent): the live one, else a new one named as the client registered.
     * It has no bearer: its token_hash matches no token.
     */
    async ensureOAuthClient(
      organisationId: string,
      oauthClientId: string,
      name: string,
      environment: string,
    ): Promise<ClientRow> {
      if (!deps.environments.includes(environment))
        throw new AppError("not_found", `this service does not serve ${environment}`);
      const existing = await deps.repo.findLiveOAuthClient(organisationId, oauthClientId, environment);
      if (existing) {
        return existing;
      }
      const row: ClientRow = {
        id: newId("cli"),
        organisation_id: organisationId,
        kind: "model",
        name: name.slice(0, 80),
        environment,
        // Not a SHA-256 hex digest, so no presented bearer can ever hash to it.
        token_hash: `oauth:${randomBytes(16).toString("base64url")}`,
        token_last4: "",
        created_at: deps.now(),
        rotated_at: null,
        revoked_at: null,
        first_used_at: null,
        last_used_at: null,
        oauth_client_id: oauthClientId,
        issued_by: null,
      };
      await deps.repo.insertClient(row);
      await deps.recordEvent?.(ledgerEvent(organisationId, "operator", "oauth_client_consented", row.id));
      return row;
    },

    /** Whether `id` is a live model client (an agent) of the organisation, in `environment`. */
    async isLiveAgent(organisationId: string, id: string, environment: string): Promise<boolean> {
      const row = await deps.repo.findClientById(organisationId, id);
      return row !== undefined && row.kind === "model" && !row.revoked_at && row.environment === environment;
    },

    /** The live client row an access token names, marking its use like a bearer's (unless not `isUse`). */
    async findLiveClientForToken(
      id: string,
      options: { isUse?: boolean } = {},
    ): Promise<ClientRow | undefined> {
      const row = await deps.repo.findLiveClient(id);
      if (!isServedHere(row)) return undefined;
      if (options.isUse === false) return row;
      const now = deps.now();
      if (!row.last_used_at || now.getTime() - row.last_used_at.getTime() > USE_WRITE_INTERVAL_MS) {
        await deps.repo.updateClientUsed(row.id, { lastUsedAt: now, firstUsedAt: row.first_used_at ?? now });
      }
      return row;
    },

    /** The live client a bearer belongs to, of an environment this plane serves, or undefined. */
    async authenticate(token: string): Promise<ClientRow | undefined> {
      if (!BEARER_SHAPE.test(token)) return undefined;
      const bearerHash = sha256Hex(token);
      const row = await deps.repo.findLiveClientByTokenHash(bearerHash);
      if (!isServedHere(row)) {
        recalled.delete(bearerHash);
        return undefined;
      }
      const used = await markUsed(row);
      remember(bearerHash, used);
      return used;
    },

    /**
     * The client a bearer was found live for within RECALL_MS, without a statement; the caller
     * confirms it before acting (principal.ts `confirmsBearer`). Undefined: ask `authenticate`.
     */
    async recall(token: string): Promise<{ client: ClientRow; bearerHash: string } | undefined> {
      if (!BEARER_SHAPE.test(token)) return undefined;
      const bearerHash = sha256Hex(token);
      const entry = recalled.get(bearerHash);
      if (!entry || deps.now().getTime() - entry.at >= RECALL_MS) return undefined;
      entry.row = await markUsed(entry.row);
      return { client: entry.row, bearerHash };
    },

    /**
     * Whether client `id` still holds the bearer of `bearerHash` (the confirmation of a recalled
     * one); when not, it is asked in full next time.
     */
    async isBearerLive(id: string, bearerHash: string): Promise<boolean> {
      const row = await deps.repo.findLiveClientByTokenHash(bearerHash);
      if (isServedHere(row) && row.id === id) return true;
      recalled.delete(bearerHash);
      return false;
    },

    /** A bearer recalled unconfirmed was found not live: it is asked in full next time. */
    forgetBearer(bearerHash: string): void {
      recalled.delete(bearerHash);
    },

    listClients: (organisationId: string) => deps.repo.findClients(organisationId),
  };
}

export type ClientsService = ReturnType<typeof createClientsService>;
