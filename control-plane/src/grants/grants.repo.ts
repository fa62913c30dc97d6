// Grants in the database. The single-use rule lives here, in one conditional UPDATE: of any number
// of simultaneous calls on one prompt grant, exactly one sees its row change from active.
import { type ExpressionBuilder, type Kysely, sql } from "kysely";
import { deleteRowsBefore } from "../db/delete-batch.ts";
import type { Database, GrantRow, NewGrant } from "../db/schema.ts";
import {
  findRequestUsageSince,
  type RequestUsage,
  withOrganisationRequestLock,
} from "../limits/request-limit.repo.ts";
import type { KeptBody } from "./request-body.ts";

/** A grant with its item's name and, when its agent is a hosted client, that client's name. */
export type GrantWithItem = GrantRow & { item_name: string; agent_name: string | null };

/** A grant as the Approvals section lists it: also its item's hosts and who approved it. */
export type ApprovalRow = GrantWithItem & {
  allowed_hosts: string[];
  approved_by_email: string | null;
  /** Who gave the first of two approvals (the two-person rule), by email. */
  first_approved_by_email: string | null;
};

/** A one-call approval's call that was never settled (abandoned-calls.ts). */
export interface UnsettledCall {
  id: string;
  /** `consumed`, or `revoked` by an operator since (never given back then). */
  status: string;
  /** The proxies spent ids in the shared table when the ticket left. */
  call_ticket_shared: boolean | null;
  /**
   * By the database's clock, the shared table still remembers every spend of this ticket (it keeps
   * each five minutes past expiry + skew; this is 30 s short of that), and has the trigger that
   * makes it keep them.
   */
  is_remembered: boolean;
  organisation_id: string;
  environment: string;
  agent_id: string;
  item_name: string;
  call_method: string | null;
  call_host: string | null;
  call_path: string | null;
  call_ticket_id: string;
  call_ticket_expires_at: Date;
}

/**
 * The ticket a one-call approval's call goes out under, named on the grant as it is spent: its id,
 * the latest it may live (abandoned-calls.ts fences it once past), and whether the proxies spent
 * ids in the shared table then.
 */
export interface GrantCallTicket {
  id: string;
  expiresAt: Date;
  isStoreShared: boolean;
}

export interface CallScope {
  host?: string | null | undefined;
  method?: string | null | undefined;
  path?: string | null | undefined;
}

/**
 * The one call a pending grant was asked for (DECISIONS "Approvals"). A prompt approval covers
 * exactly this call; a session approval covers its host and method under its path's prefix.
 */
export interface RequestedCall {
  method: string;
  host: string;
  /** The validated path with its query, byte for byte. */
  path: string;
  /** Hex SHA-256 of the exact body bytes; null for a call without a body. */
  bodySha256: string | null;
  /** What the operator reads of the body (its first 64 KiB); unset or null: not kept, or none. */
  body?: KeptBody | null | undefined;
}

export interface GrantScope {
  organisationId: string;
  itemId: string;
  /** The item's folder: a folder_standing grant on it covers the item too. */
  folderId?: string | null | undefined;
  /** A standing grant's scope (host, method, path prefix); unset parts cover everything. */
  callScope?: CallScope | undefined;
  /** The call an http_request asks approval for; unset: the whole item (request_grant). */
  requestedCall?: RequestedCall | undefined;
  agentId: string;
  toolId: string;
}

export interface GrantsRepo {
  insertGrant(row: NewGrant): Promise<void>;
  /** One grant, with its item's hosts and who approved it. */
  findGrantById(organisationId: string, id: string): Promise<ApprovalRow | undefined>;
  findGrants(
    organisationId: string,
    filter: { agentId?: string; status?: string; limit?: number },
  ): Promise<GrantWithItem[]>;
  findPendingGrant(scope: GrantScope): Promise<GrantWithItem | undefined>;
  /**
   * The latest request for exactly this scope and call that was denied (revoked while pending)
   * after `since`: a repeat of it is not mailed again.
   */
  findDeniedGrantSince(scope: GrantScope, since: Date): Promise<GrantWithItem | undefined>;
  /**
   * Grants of the organisation in `status` (an active one not yet expired at `now`), newest first,
   * with filters: the Approvals section (active) and the inbox (pending).
   */
  findApprovalsByStatus(
    organisationId: string,
    status: "active" | "pending",
    filter: { environment?: string; agentId?: string; itemName?: string; policy?: string; limit?: number },
    now: Date,
  ): Promise<ApprovalRow[]>;
  /** Grants with who approved them and their item's hosts (the access snapshot). */
  findApprovals(organisationId: string, limit: number): Promise<ApprovalRow[]>;
  /** Records a use; written only when the stored time is older than `olderThan` (or unset). */
  updateGrantUsed(id: string, at: Date, olderThan: Date): Promise<void>;
  /** Active, unexpired grants for the scope; ones that are not spent by use come first. */
  findUsableGrants(scope: GrantScope, now: Date): Promise<GrantWithItem[]>;
  /**
   * active -> consumed, only if still active. True for the one caller that won. `ticket`: the
   * ticket its call goes out under, named by the same statement (until settled), so that no
   * moment exists where the approval is spent and nothing says which call spent it.
   */
  updateGrantConsumed(id: string, now: Date, ticket?: GrantCallTicket): Promise<boolean>;
  /**
   * consumed -> active: the call never left, so the approval was not used. Only while the grant
   * still names `ticketId` (null: no ticket was named), so a late give-back of one call can never
   * give back the approval another call spent since.
   */
  updateGrantRestored(id: string, ticketId: string | null): Promise<void>;
  /** Its call's outcome is known and written: the grant forgets `ticketId` (only that one). */
  updateGrantCallSettled(id: string, ticketId: string): Promise<void>;
  /**
   * Consumed one-call approvals whose call's ticket expired before `expiredBefore` and was never
   * settled (the control plane that sent it died first), locked for this caller (SKIP LOCKED).
   * Call inside a transaction.
   */
  findUnsettledCalls(expiredBefore: Date, limit: number): Promise<UnsettledCall[]>;
  updateGrantApproved(
    organisationId: string,
    id: string,
    change: {
      policy: string;
      approvedAt: Date;
      expiresAt: Date | null;
      approvedBy: string | null;
      /** A standing grant's new scope; unset keeps the one it was asked with. */
      scope?: CallScope | undefined;
      /**
       * The two-person rule: approved only while this member's first approval still stands on
       * the row, so of two members confirming at once exactly one activates it.
       */
      firstApprovedBy?: string | undefined;
      /**
       * folder_standing: the folder it covers. With `firstApprovedBy`, approved only while the first
       * approval is bound to this same folder.
       */
      folderId?: string | undefined;
    },
  ): Promise<boolean>;
  /**
   * Records the first of two approvals on a pending grant (the two-person rule): only while it is
   * pending with none recorded. True for the one caller that recorded it.
   */
  updateGrantFirstApproval(
    organisationId: string,
    id: string,
    first: {
      by: string;
      at: Date;
      policy: string;
      scope: string | null;
      /** folder_standing: the folder the first approval covers, bound with it. */
      folderId?: string | undefined;
      /** The first approver whose approval no longer counts (null: there is none yet). */
      replacing?: string | null;
    },
  ): Promise<boolean>;
  /**
   * Revokes a pending, active or consumed grant; answers which it was (a pending one is denied),
   * or undefined when it was none of them. Each status is one atomic update, so a concurrent approval is
   * seen as the active grant it became.
   */
  updateGrantRevoked(
    organisationId: string,
    id: string,
    now: Date,
    revokedBy: string | null,
  ): Promise<"pending" | "active" | "consumed" | undefined>;
  /** Revokes every pending or active grant an agent holds (its client was revoked). */
  updateAgentGrantsRevoked(
    organisationId: string,
    agentId: string,
    now: Date,
    revokedBy: string | null,
  ): Promise<void>;
  /** The folder of the grant's item, if it is in one. */
  findGrantFolder(organisationId: string, id: string): Promise<{ id: string; name: string } | undefined>;
  /** Runs `fn` in one transaction holding the organisation's advisory lock (limits that must not race). */
  inOrganisationLock<T>(organisationId: string, fn: (repo: GrantsRepo) => Promise<T>): Promise<T>;
  /** Approval and collect requests since `since`, for spec 8's limit (call inside inOrganisationLock). */
  findRequestUsageSince(organisationId: string, since: Date): Promise<RequestUsage>;
  updateApprovalCode(id: string, codeHash: string | null, expiresAt: Date | null): Promise<void>;
  findGrantByCodeHash(organisationId: string, codeHash: string): Promise<GrantWithItem | undefined>;
  findGrantByLinkHash(organisationId: string, tokenHash: string): Promise<GrantWithItem | undefined>;
  updateApprovalCodeWrong(id: string): Promise<number>;
  countCodeFailuresSince(
    organisationId: string,
    since: Date,
  ): Promise<{ count: number; oldest: Date | null }>;
  insertCodeFailure(organisationId: string, at: Date): Promise<void>;
  /** Deletes at most `limit` wrong-code rows of any organisation from before `before`; answers how many. */
  deleteCodeFailuresBefore(before: Date, limit: number): Promise<number>;
  /**
   * A spent one-call approval whose call's fence waits (the agent was answered "held") is held
   * until `until`: only while it is still spent under `ticketId`, so a mark never lands on an
   * approval its fence has decided meanwhile.
   */
  updateGrantHeld(id: string, ticketId: string, until: Date): Promise<void>;
  /** Its held call is decided (given back, or settled as spent): the mark is gone. */
  updateGrantHoldEnded(id: string): Promise<void>;
  /**
   * A one-call approval that covers `call` (same agent, tool, item and environment; asked for
   * exactly this method, host, path with query and body digest, or for the whole item) held at
   * `now`: spent, its call's ticket still named on it, and marked held past `now`
   * (updateGrantHeld). Undefined when there is none.
   */
  findHeldCallGrant(
    scope: Pick<GrantScope, "organisationId" | "itemId" | "agentId" | "toolId">,
    environment: string,
    call: RequestedCall,
    now: Date,
  ): Promise<{ id: string } | undefined>;
}

// Session and standing approvals are not spent by a call; use them before a one-call approval.
const POLICY_ORDER = ["item_standing", "folder_standing", "session", "prompt"];

export function createGrantsRepo(db: Kysely<Database>): GrantsRepo {
  const countSince = async (query: Promise<{ n: string; oldest: Date | null } | undefined>) => {
    const row = await query;
    return { count: Number(row?.n ?? 0), oldest: row?.oldest ?? null };
  };
  const selectGrants = () =>
    db
      .selectFrom("grants")
      .innerJoin("items", "items.id", "grants.item_id")
      .leftJoin("clients", (join) =>
        join
          .onRef("clients.id", "=", "grants.agent_id")
          .onRef("clients.organisation_id", "=", "grants.organisation_id"),
      )
      .selectAll("grants")
      .select(["items.name as item_name", "clients.name as agent_name"]);
  /** The operator who approved, by email (members come and go: the id stays on the grant). */
  const selectApprovals = () =>
    selectGrants()
      .leftJoin("operators", "operators.id", "grants.approved_by")
      .leftJoin("operators as first_operators", "first_operators.id", "grants.first_approved_by")
      .select([
        "items.allowed_hosts",
        "operators.email as approved_by_email",
        "first_operators.email as first_approved_by_email",
      ]);

  return {
    async insertGrant(row) {
      await db.insertInto("grants").values(row).execute();
    },
    findGrantById: (organisationId, id) =>
      selectApprovals()
        .where("grants.organisation_id", "=", organisationId)
        .where("grants.id", "=", id)
        .executeTakeFirst(),
    findGrants(organisationId, filter) {
      let query = selectGrants()
        .where("grants.organisation_id", "=", organisationId)
        .orderBy("grants.created_at", "desc")
        .orderBy("grants.id")
        .limit(filter.limit ?? 200);
      if (filter.agentId !== undefined) query = query.where("grants.agent_id", "=", filter.agentId);
      if (filter.status !== undefined) query = query.where("grants.status", "=", filter.status);
      return query.execute();
    },
    findPendingGrant: (scope) =>
      selectGrants()
        .where((eb) => isSameRequest(eb, scope))
        .where("grants.status", "=", "pending")
        .orderBy("grants.created_at", "desc")
        .executeTakeFirst(),
    findDeniedGrantSince: (scope, since) =>
      selectGrants()
        .where((eb) => isSameRequest(eb, scope))
        // Denied: revoked while it was still a request, so never approved.
        .where("grants.status", "=", "revoked")
        .where("grants.approved_at", "is", null)
        .where("grants.revoked_at", ">", since)
        .orderBy("grants.revoked_at", "desc")
        .executeTakeFirst(),
    findApprovalsByStatus(organisationId, status, filter, now) {
      let query = selectApprovals()
        .where("grants.organisation_id", "=", organisationId)
        .where("grants.status", "=", status)
        .where((eb) => eb.or([eb("grants.expires_at", "is", null), eb("grants.expires_at", ">", now)]))
        .orderBy(status === "active" ? "grants.approved_at" : "grants.created_at", "desc")
        .orderBy("grants.id")
        .limit(filter.limit ?? 500);
      if (filter.environment !== undefined)
        query = query.where("grants.environment", "=", filter.environment);
      if (filter.agentId !== undefined) query = query.where("grants.agent_id", "=", filter.agentId);
      if (filter.itemName !== undefined) query = query.where("items.name", "=", filter.itemName);
      if (filter.policy !== undefined) query = query.where("grants.policy", "=", filter.policy);
      return query.execute();
    },
    findApprovals: (organisationId, limit) =>
      selectApprovals()
        .where("grants.organisation_id", "=", organisationId)
        .orderBy("grants.created_at", "desc")
        .orderBy("grants.id")
        .limit(limit)
        .execute(),
    async updateGrantUsed(id, at, olderThan) {
      await db
        .updateTable("grants")
        .set({ last_used_at: at })
        .where("id", "=", id)
        .where((eb) => eb.or([eb("last_used_at", "is", null), eb("last_used_at", "<", olderThan)]))
        .execute();
    },
    async findUsableGrants(scope, now) {
      const rows = await selectGrants()
        .where("grants.organisation_id", "=", scope.organisationId)
        .where((eb) =>
          scope.folderId
            ? eb.or([
                eb("grants.item_id", "=", scope.itemId),
                eb.and([
                  eb("grants.policy", "=", "folder_standing"),
                  eb("grants.folder_id", "=", scope.folderId),
                ]),
              ])
            : eb("grants.item_id", "=", scope.itemId),
        )
        .where("grants.agent_id", "=", scope.agentId)
        .where("grants.tool_id", "=", scope.toolId)
        .where("grants.status", "=", "active")
        .where((eb) => eb.or([eb("grants.expires_at", "is", null), eb("grants.expires_at", ">", now)]))
        .execute();
      return rows.sort((a, b) => POLICY_ORDER.indexOf(a.policy) - POLICY_ORDER.indexOf(b.policy));
    },
    async updateGrantConsumed(id, now, ticket) {
      const result = await db
        .updateTable("grants")
        .set({
          status: "consumed",
          consumed_at: now,
          last_used_at: now,
          ...(ticket
            ? {
                call_ticket_id: ticket.id,
                call_ticket_expires_at: ticket.expiresAt,
                call_ticket_shared: ticket.isStoreShared,
              }
            : {}),
        })
        .where("id", "=", id)
        .where("status", "=", "active")
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    async updateGrantRestored(id, ticketId) {
      await db
        .updateTable("grants")
        .set({
          status: "active",
          consumed_at: null,
          call_ticket_id: null,
          call_ticket_expires_at: null,
          call_ticket_shared: null,
        })
        .where("id", "=", id)
        .where("status", "=", "consumed")
        .where((eb) =>
          ticketId === null ? eb("call_ticket_id", "is", null) : eb("call_ticket_id", "=", ticketId),
        )
        .execute();
    },
    async updateGrantCallSettled(id, ticketId) {
      await db
        .updateTable("grants")
        .set({ call_ticket_id: null, call_ticket_expires_at: null, call_ticket_shared: null })
        .where("id", "=", id)
        .where("call_ticket_id", "=", ticketId)
        .execute();
    },
    async findUnsettledCalls(expiredBefore, limit) {
      const rows = await db
        .selectFrom("grants")
        .innerJoin("items", "items.id", "grants.item_id")
        .select([
          "grants.id",
          "grants.status",
          "grants.call_ticket_shared",
          // Expiry + 5 s of skew + 5 minutes kept - 30 s, by the clock the table's trigger reads;
          // never where the trigger is missing (a table a proxy made itself: migration 0100).
          sql<boolean>`grants.call_ticket_expires_at > now() - interval '275 seconds' and exists (
            select 1 from pg_catalog.pg_trigger
            where tgname = 'egress_spent_tickets_keep'
              and tgrelid = to_regclass('egress_spent_tickets'))`.as("is_remembered"),
          "grants.organisation_id",
          "grants.environment",
          "grants.agent_id",
          "items.name as item_name",
          "grants.call_method",
          "grants.call_host",
          "grants.call_path",
          "grants.call_ticket_id",
          "grants.call_ticket_expires_at",
        ])
        .where("grants.call_ticket_id", "is not", null)
        .where("grants.call_ticket_expires_at", "<", expiredBefore)
        .where("grants.status", "in", ["consumed", "revoked"])
        .orderBy("grants.call_ticket_expires_at")
        .limit(limit)
        .forUpdate("grants")
        .skipLocked()
        .execute();
      return rows as UnsettledCall[];
    },
    async updateGrantApproved(organisationId, id, change) {
      const result = await db
        .updateTable("grants")
        .set({
          status: "active",
          policy: change.policy,
          approved_at: change.approvedAt,
          expires_at: change.expiresAt,
          approved_by: change.approvedBy,
          ...(change.scope
            ? {
                scope_host: change.scope.host ?? null,
                scope_method: change.scope.method ?? null,
                scope_path: change.scope.path ?? null,
              }
            : {}),
          ...(change.folderId ? { folder_id: change.folderId } : {}),
        })
        .where("organisation_id", "=", organisationId)
        .where("id", "=", id)
        .where("status", "=", "pending")
        .$if(change.firstApprovedBy !== undefined, (query) =>
          query.where("first_approved_by", "=", change.firstApprovedBy ?? ""),
        )
        .$if(change.firstApprovedBy !== undefined && change.folderId !== undefined, (query) =>
          query.where("folder_id", "=", change.folderId ?? ""),
        )
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    async updateGrantFirstApproval(organisationId, id, first) {
      const result = await db
        .updateTable("grants")
        .set({
          first_approved_by: first.by,
          first_approved_at: first.at,
          first_policy: first.policy,
          first_scope: first.scope,
          ...(first.folderId ? { folder_id: first.folderId } : {}),
        })
        .where("organisation_id", "=", organisationId)
        .where("id", "=", id)
        .where("status", "=", "pending")
        .where("first_approved_by", first.replacing ? "=" : "is", first.replacing ?? null)
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    inOrganisationLock: (organisationId, fn) =>
      withOrganisationRequestLock(db, organisationId, (trx) => fn(createGrantsRepo(trx))),
    findRequestUsageSince: (organisationId, since) => findRequestUsageSince(db, organisationId, since),
    async updateApprovalCode(id, codeHash, expiresAt) {
      await db
        .updateTable("grants")
        .set({ approval_code_hash: codeHash, approval_code_expires_at: expiresAt })
        .where("id", "=", id)
        .execute();
    },
    // Codes are 8 digits: an old decided grant may hold the code a pending one was just given.
    // The pending one is the one meant (the decided one only says "already used").
    findGrantByCodeHash: (organisationId, codeHash) =>
      selectGrants()
        .where("grants.organisation_id", "=", organisationId)
        .where("grants.approval_code_hash", "=", codeHash)
        .orderBy(sql`grants.status = 'pending'`, "desc")
        .orderBy("grants.created_at", "desc")
        .limit(1)
        .executeTakeFirst(),
    findGrantByLinkHash: (organisationId, tokenHash) =>
      selectGrants()
        .where("grants.organisation_id", "=", organisationId)
        .where("grants.approval_token_hash", "=", tokenHash)
        .executeTakeFirst(),
    async updateApprovalCodeWrong(id) {
      const row = await db
        .updateTable("grants")
        .set((eb) => ({ approval_code_wrong: eb("approval_code_wrong", "+", 1) }))
        .where("id", "=", id)
        .returning("approval_code_wrong")
        .executeTakeFirst();
      return row?.approval_code_wrong ?? 0;
    },
    countCodeFailuresSince: (organisationId, since) =>
      countSince(
        db
          .selectFrom("approval_code_failures")
          .select((eb) => [eb.fn.countAll<string>().as("n"), eb.fn.min("at").as("oldest")])
          .where("organisation_id", "=", organisationId)
          .where("at", ">", since)
          .executeTakeFirst() as Promise<{ n: string; oldest: Date | null } | undefined>,
      ),
    async insertCodeFailure(organisationId, at) {
      await db.insertInto("approval_code_failures").values({ organisation_id: organisationId, at }).execute();
    },
    deleteCodeFailuresBefore: (before, limit) =>
      deleteRowsBefore(db, "approval_code_failures", before, limit),
    async updateAgentGrantsRevoked(organisationId, agentId, now, revokedBy) {
      await db
        .updateTable("grants")
        .set({ status: "revoked", revoked_at: now, revoked_by: revokedBy })
        .where("organisation_id", "=", organisationId)
        .where("agent_id", "=", agentId)
        .where("status", "in", ["pending", "active"])
        .execute();
    },
    findGrantFolder: (organisationId, id) =>
      db
        .selectFrom("grants")
        .innerJoin("items", "items.id", "grants.item_id")
        .innerJoin("folders", "folders.id", "items.folder_id")
        .select(["folders.id", "folders.name"])
        .where("grants.organisation_id", "=", organisationId)
        .where("grants.id", "=", id)
        .executeTakeFirst(),
    async updateGrantRevoked(organisationId, id, now, revokedBy) {
      // A consumed one-call approval too: while its call's outcome is unknown (the proxy did not
      // answer) it may yet be given back (updateGrantRestored, which only restores a consumed one),
      // and an operator's revoke meanwhile must hold.
      for (const status of ["pending", "active", "consumed"] as const) {
        const result = await db
          .updateTable("grants")
          .set({ status: "revoked", revoked_at: now, revoked_by: revokedBy })
          .where("organisation_id", "=", organisationId)
          .where("id", "=", id)
          .where("status", "=", status)
          .executeTakeFirst();
        if (result.numUpdatedRows === 1n) return status;
      }
      return undefined;
    },
    async updateGrantHeld(id, ticketId, until) {
      await db
        .updateTable("grants")
        .set({ held_until: until })
        .where("id", "=", id)
        .where("status", "=", "consumed")
        .where("call_ticket_id", "=", ticketId)
        .execute();
    },
    async updateGrantHoldEnded(id) {
      await db
        .updateTable("grants")
        .set({ held_until: null })
        .where("id", "=", id)
        .where("held_until", "is not", null)
        .execute();
    },
    findHeldCallGrant: (scope, environment, call, now) =>
      db
        .selectFrom("grants")
        .select("id")
        .where("organisation_id", "=", scope.organisationId)
        .where("item_id", "=", scope.itemId)
        .where("agent_id", "=", scope.agentId)
        .where("tool_id", "=", scope.toolId)
        .where("environment", "=", environment)
        .where("policy", "=", "prompt")
        .where("status", "=", "consumed")
        .where("call_ticket_id", "is not", null)
        .where("held_until", ">", now)
        // As grant-coverage.ts judges a one-call approval: exactly its call, or any call of the
        // item where it was asked for the whole item (request_grant).
        .where((eb) =>
          eb.or([
            eb("call_method", "is", null),
            eb.and([
              eb("call_method", "=", call.method),
              eb("call_host", "=", call.host),
              eb("call_path", "=", call.path),
              call.bodySha256 === null
                ? eb("call_body_sha256", "is", null)
                : eb("call_body_sha256", "=", call.bodySha256),
            ]),
          ]),
        )
        .orderBy("consumed_at", "desc")
        .limit(1)
        .executeTakeFirst(),
  };
}

/**
 * The same request as `scope` asks: its item, agent and tool, and the same standing scope and call
 * (method, host, path with query, body digest). A request for another scope or call is another
 * request: the operator decides what the grant shows, so a second call never rides on the first.
 */
function isSameRequest(eb: ExpressionBuilder<Database, "grants">, scope: GrantScope) {
  const call = scope.requestedCall;
  const parts = [
    ...(["host", "method", "path"] as const).map(
      (part) => [`grants.scope_${part}`, scope.callScope?.[part] ?? null] as const,
    ),
    ["grants.call_method", call?.method ?? null] as const,
    ["grants.call_host", call?.host ?? null] as const,
    ["grants.call_path", call?.path ?? null] as const,
    ["grants.call_body_sha256", call?.bodySha256 ?? null] as const,
  ];
  return eb.and([
    eb("grants.organisation_id", "=", scope.organisationId),
    eb("grants.item_id", "=", scope.itemId),
    eb("grants.agent_id", "=", scope.agentId),
    eb("grants.tool_id", "=", scope.toolId),
    ...parts.map(([column, value]) => (value === null ? eb(column, "is", null) : eb(column, "=", value))),
  ]);
}
