// Approvals (spec 2.4, 3.1): request (pending), approve with a policy, revoke, and the check an
// http_request makes before anything leaves: find a usable grant and, for a one-call grant, spend
// it first (restored when the request never left the service).

import { randomBytes } from "node:crypto";
import { sha256Hex } from "@latch/shared/crypto/hash";
import { AppError } from "@latch/shared/errors";
import { newId } from "@latch/shared/ids";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { newEightDigitCode } from "../auth/codes.ts";
import type { NewGrant } from "../db/schema.ts";
import { checkRequestLimit } from "../limits/request-limit.ts";
import type { CallScope, GrantScope, GrantsRepo, GrantWithItem, RequestedCall } from "./grants.repo.ts";

/** Spec 8: a session approval lives 8 hours. */
export const SESSION_GRANT_MS = 8 * 60 * 60 * 1000;
/** Spec 8: the task description shown in the inbox. */
export const MAX_TASK_DESCRIPTION = 500;

export type GrantPolicy = "prompt" | "session" | "item_standing" | "folder_standing";

/** Spec 2.4's public fields, plus the names a listing needs. Never a value. */
export interface PublicGrant {
  grant_id: string;
  policy: string;
  status: string;
  environment_id: string;
  item_name: string;
  agent_id: string;
  tool_id: string;
  expires_at: string | null;
  created_at: string;
  approved_at: string | null;
  consumed_at: string | null;
  task_id: string | null;
  task_description: string | null;
  /** What a standing grant covers; null covers every call with the credential. */
  scope: { host: string | null; method: string | null; path: string | null } | null;
  /**
   * The exact call the grant was asked for, as the operator approves it (DECISIONS "Approvals");
   * null: asked for the whole item (request_grant), any call.
   */
  call: { method: string; host: string; path: string; body_sha256: string | null } | null;
}

export interface GrantsServiceDeps {
  repo: GrantsRepo;
  recordEvent(event: AuditEvent): Promise<void>;
  now?: () => Date;
  /**
   * Hosted: every approval request carries an 8-digit code (stored as a peppered hash) and counts
   * toward 30 requests per organisation per hour. The local variant has neither.
   */
  approvalCodes?: { hashCode(code: string): string };
  /** Hosted: the operator's role in the organisation (folder_standing is owner-only). */
  findMemberRole?: (organisationId: string, operatorId: string) => Promise<string | undefined>;
  /** Hosted: tells the organisation's operators about a new pending grant (code and link). */
  notifyApproval?: (notice: {
    organisationId: string;
    grant: PublicGrant;
    approvalCode: string;
    linkToken: string;
  }) => Promise<void>;
}

/** Spec 8: wrong approval codes per approval, and per organisation in a window. */
export const MAX_WRONG_CODES_PER_APPROVAL = 5;
export const MAX_WRONG_CODES_PER_WINDOW = 20;
export const WRONG_CODE_WINDOW_MS = 15 * 60 * 1000;
export const APPROVAL_CODE_TTL_MS = 60 * 60 * 1000;

export interface CallAuthorisation {
  grant: PublicGrant;
  /** Gives a spent one-call grant back: the request never left the service. */
  release(): Promise<void>;
}

export interface GrantRequest extends GrantScope {
  environment: string;
  actor: string;
  taskDescription?: string | undefined;
  taskId?: string | undefined;
}

/** A call as coverage judges it: its path with the query; the body digest where the call has one. */
export type CallTarget = CallScope & { bodySha256?: string | null | undefined };

type CoverageRow = {
  scope_host: string | null;
  scope_method: string | null;
  scope_path: string | null;
} & Partial<Pick<GrantWithItem, "policy" | "call_method" | "call_host" | "call_path" | "call_body_sha256">>;

/**
 * Whether a grant covers a call: inside its standing scope, and inside the call it was approved
 * for (a prompt approval: exactly that call; a session approval: that host and method under the
 * path's prefix up to its last `/`). Standing policies keep only the scope the operator gave.
 */
export function isCovering(row: CoverageRow, call: CallTarget | undefined): boolean {
  return isInsideScope(row, call) && isInsideApprovedCall(row, call);
}

function withoutQuery(path: string): string {
  const at = path.indexOf("?");
  return at === -1 ? path : path.slice(0, at);
}

/**
 * DECISIONS "Approvals": what the operator saw is what is covered. The path with its query is
 * compared byte for byte (the path was validated once, spec 4.2 rule 1) and so is the body digest:
 * a GET approval does not send a DELETE, and an approved body cannot be swapped for another.
 */
function isInsideApprovedCall(row: CoverageRow, call: CallTarget | undefined): boolean {
  if (!row.call_method || !row.call_host || row.call_path == null) return true;
  if (row.policy === "item_standing" || row.policy === "folder_standing") return true;
  if (!call) return false;
  if (call.host !== row.call_host || call.method !== row.call_method) return false;
  if (row.policy === "session") {
    const approved = withoutQuery(row.call_path);
    const prefix = approved.slice(0, approved.lastIndexOf("/") + 1);
    return withoutQuery(call.path ?? "").startsWith(prefix);
  }
  return call.path === row.call_path && (call.bodySha256 ?? null) === (row.call_body_sha256 ?? null);
}

/**
 * Spec 3.1: a standing grant covers a call by host, method and path. A scope part left unset covers
 * everything; a path scope covers itself and everything below it (segment by segment, so /v1/rep
 * does not cover /v1/repos).
 */
function isInsideScope(row: CoverageRow, call: CallTarget | undefined): boolean {
  if (!row.scope_host && !row.scope_method && !row.scope_path) return true;
  if (!call) return false;
  if (row.scope_host && row.scope_host !== call.host) return false;
  if (row.scope_method && row.scope_method !== call.method) return false;
  if (row.scope_path) {
    const path = (call.path ?? "").split("?")[0]!;
    const prefix = row.scope_path.endsWith("/") ? row.scope_path : `${row.scope_path}/`;
    if (path !== row.scope_path && !path.startsWith(prefix)) return false;
  }
  return true;
}

function iso(date: Date | null): string | null {
  return date ? date.toISOString() : null;
}

export function toPublicGrant(row: GrantWithItem, now: Date): PublicGrant {
  const isExpired = row.status === "active" && row.expires_at !== null && row.expires_at <= now;
  return {
    grant_id: row.id,
    policy: row.policy,
    status: isExpired ? "expired" : row.status,
    environment_id: row.environment,
    item_name: row.item_name,
    agent_id: row.agent_id,
    tool_id: row.tool_id,
    expires_at: iso(row.expires_at),
    created_at: row.created_at.toISOString(),
    approved_at: iso(row.approved_at),
    consumed_at: iso(row.consumed_at),
    task_id: row.task_id,
    task_description: row.task_description,
    scope:
      row.scope_host || row.scope_method || row.scope_path
        ? { host: row.scope_host, method: row.scope_method, path: row.scope_path }
        : null,
    call: toPublicCall(row),
  };
}

/** The columns a requested call is stored in, on a grant or a need request. */
export interface RequestedCallColumns {
  call_method: string | null;
  call_host: string | null;
  call_path: string | null;
  call_body_sha256: string | null;
}

/** The requested call of a row as callers see it (PublicGrant.call); null: the whole item. */
export function toPublicCall(row: RequestedCallColumns): PublicGrant["call"] {
  return row.call_method && row.call_host && row.call_path != null
    ? { method: row.call_method, host: row.call_host, path: row.call_path, body_sha256: row.call_body_sha256 }
    : null;
}

/** The requested call a row records, back in the shape grants are asked with. */
export function requestedCallOfRow(row: RequestedCallColumns): RequestedCall | undefined {
  return row.call_method && row.call_host && row.call_path != null
    ? { method: row.call_method, host: row.call_host, path: row.call_path, bodySha256: row.call_body_sha256 }
    : undefined;
}

/** The row columns for a requested call (none: the whole item). */
export function requestedCallColumns(call: RequestedCall | undefined): RequestedCallColumns {
  return {
    call_method: call?.method ?? null,
    call_host: call?.host ?? null,
    call_path: call?.path ?? null,
    call_body_sha256: call?.bodySha256 ?? null,
  };
}

/** The row of a new grant for `request`; `change` sets its policy, status and the rest. */
function newGrantRow(
  request: GrantRequest,
  at: Date,
  change: Pick<NewGrant, "policy" | "status"> & Partial<NewGrant>,
): NewGrant {
  return {
    id: newId("grt"),
    organisation_id: request.organisationId,
    environment: request.environment,
    item_id: request.itemId,
    agent_id: request.agentId,
    tool_id: request.toolId,
    task_id: request.taskId ?? null,
    task_description: request.taskDescription?.slice(0, MAX_TASK_DESCRIPTION) ?? null,
    created_at: at,
    approved_at: null,
    expires_at: null,
    consumed_at: null,
    revoked_at: null,
    scope_host: request.callScope?.host ?? null,
    scope_method: request.callScope?.method ?? null,
    scope_path: request.callScope?.path ?? null,
    ...requestedCallColumns(request.requestedCall),
    ...change,
  };
}

export function createGrantsService(deps: GrantsServiceDeps) {
  const now = deps.now ?? (() => new Date());

  function expiryFor(policy: GrantPolicy, at: Date): Date | null {
    return policy === "session" ? new Date(at.getTime() + SESSION_GRANT_MS) : null;
  }

  async function loadGrant(organisationId: string, id: string): Promise<GrantWithItem> {
    const row = await deps.repo.findGrantById(organisationId, id);
    if (!row) throw new AppError("not_found", "no such grant");
    return row;
  }

  /** Inserts a grant row and audits it under `action`; the row as read back, with its item's name. */
  async function insertRecorded(
    request: GrantRequest,
    fresh: ReturnType<typeof newGrantRow>,
    action: string,
    detail: Record<string, unknown>,
  ): Promise<GrantWithItem> {
    await deps.repo.insertGrant(fresh);
    const row = await loadGrant(request.organisationId, fresh.id);
    await deps.recordEvent({
      organisationId: request.organisationId,
      environment: request.environment,
      actor: request.actor,
      action,
      itemName: row.item_name,
      detail: { grant_id: fresh.id, agent_id: request.agentId, ...detail },
    });
    return row;
  }

  /** Hosted requests: a fresh code each time, the hourly limit counted under the organisation lock. */
  async function requestCodedGrant(
    request: GrantRequest,
    codes: { hashCode(code: string): string },
  ): Promise<{ grant: PublicGrant; isNew: boolean; approvalCode: string; notifyFailed: boolean }> {
    const at = now();
    const code = newEightDigitCode();
    const linkToken = randomBytes(32).toString("base64url");
    const codeHash = codes.hashCode(`approval:${code}`);
    const expiresAt = new Date(at.getTime() + APPROVAL_CODE_TTL_MS);
    const outcome = await deps.repo.inOrganisationLock(request.organisationId, async (repo) => {
      const existing = await repo.findPendingGrant(request);
      if (existing) {
        // A new code replaces the old one; its wrong-attempt count is kept (spec 8).
        await repo.updateApprovalCode(existing.id, codeHash, expiresAt);
        return { id: existing.id, isNew: false };
      }
      await checkRequestLimit((since) => repo.findRequestUsageSince(request.organisationId, since), at);
      const row = newGrantRow(request, at, {
        policy: "prompt",
        status: "pending",
        approval_code_hash: codeHash,
        approval_code_expires_at: expiresAt,
        approval_token_hash: sha256Hex(linkToken),
      });
      await repo.insertGrant(row);
      const id = row.id;
      return { id, isNew: true };
    });
    const row = await loadGrant(request.organisationId, outcome.id);
    if (outcome.isNew) {
      await deps.recordEvent({
        organisationId: request.organisationId,
        environment: request.environment,
        actor: request.actor,
        action: "grant_requested",
        itemName: row.item_name,
        detail: { grant_id: outcome.id, agent_id: request.agentId, tool_id: request.toolId },
      });
    }
    const grant = toPublicGrant(row, at);
    let notifyFailed = false;
    if (outcome.isNew && deps.notifyApproval) {
      // Spec 6: notification is attempted; its outcome is reported, never fatal to the request.
      notifyFailed = await deps
        .notifyApproval({ organisationId: request.organisationId, grant, approvalCode: code, linkToken })
        .then(
          () => false,
          () => true,
        );
    }
    return { grant, isNew: outcome.isNew, approvalCode: code, notifyFailed };
  }

  return {
    /** Approves the pending grant an emailed link names (single use: a second use is 409). */
    async approveByLink(organisationId: string, actor: string, token: string): Promise<PublicGrant> {
      const row = await deps.repo.findGrantByLinkHash(organisationId, sha256Hex(token));
      if (!row)
        throw new AppError(
          "not_found",
          "this approval link is unknown here; sign in to the organisation it was sent for",
        );
      if (row.status !== "pending")
        throw new AppError("approval_code_used", "this approval link was already used");
      return this.approveGrant(organisationId, actor, row.id, "prompt");
    },

    /**
     * Approves the pending grant an 8-digit code belongs to (spec 4.3): reuse 409, expired 410; wrong
     * codes count per approval (5, then its code is void) and per organisation (20 per 15 minutes).
     */
    async approveByCode(
      organisationId: string,
      actor: string,
      rawCode: unknown,
      options: { grantId?: string | undefined; policy?: GrantPolicy } = {},
    ): Promise<PublicGrant> {
      const codes = deps.approvalCodes;
      if (!codes) throw new AppError("not_found", "approval codes are a hosted feature");
      const at = now();
      const failures = await deps.repo.countCodeFailuresSince(
        organisationId,
        new Date(at.getTime() - WRONG_CODE_WINDOW_MS),
      );
      if (failures.count >= MAX_WRONG_CODES_PER_WINDOW) {
        const retryAfter = Math.ceil(
          ((failures.oldest?.getTime() ?? at.getTime()) + WRONG_CODE_WINDOW_MS - at.getTime()) / 1000,
        );
        throw new AppError(
          "rate_limited",
          "too many wrong approval codes for this organisation; wait before trying again",
          {
            extra: { retry_after: Math.max(retryAfter, 1) },
          },
        );
      }
      // Spec 5 rule 5: a grant_id of another organisation is 404, and its wrong-code count (which
      // voids the code at five) is never touched from here.
      if (options.grantId && !(await deps.repo.findGrantById(organisationId, options.grantId))) {
        await deps.repo.insertCodeFailure(organisationId, at);
        throw new AppError("not_found", "no such grant");
      }
      const code = typeof rawCode === "string" ? rawCode.trim() : "";
      const row = /^\d{8}$/.test(code)
        ? await deps.repo.findGrantByCodeHash(organisationId, codes.hashCode(`approval:${code}`))
        : undefined;
      if (!row || (options.grantId && row.id !== options.grantId)) {
        await deps.repo.insertCodeFailure(organisationId, at);
        if (options.grantId) {
          const wrong = await deps.repo.updateApprovalCodeWrong(options.grantId);
          if (wrong >= MAX_WRONG_CODES_PER_APPROVAL)
            // Void the code but keep an expiry: the request still counts toward the hourly limit,
            // which counts coded requests (limits/request-limit.ts).
            await deps.repo.updateApprovalCode(options.grantId, null, at);
        }
        throw new AppError("approval_code_invalid", "that approval code matches no pending approval");
      }
      if (row.status !== "pending")
        throw new AppError("approval_code_used", "that approval code was already used");
      if (!row.approval_code_expires_at || row.approval_code_expires_at <= at) {
        throw new AppError(
          "approval_code_expired",
          "that approval code has expired; ask the agent to request again",
        );
      }
      if (row.approval_code_wrong >= MAX_WRONG_CODES_PER_APPROVAL) {
        throw new AppError(
          "approval_code_invalid",
          "this approval's code is void after too many wrong attempts",
        );
      }
      return this.approveGrant(organisationId, actor, row.id, options.policy ?? "prompt");
    },

    /**
     * A pending grant for the scope: the one already waiting, or a new one. Repeated requests do
     * not fill the operator's inbox.
     */
    async requestGrant(
      request: GrantRequest,
    ): Promise<{ grant: PublicGrant; isNew: boolean; approvalCode?: string; notifyFailed?: boolean }> {
      if (deps.approvalCodes) return requestCodedGrant(request, deps.approvalCodes);
      const existing = await deps.repo.findPendingGrant(request);
      if (existing) return { grant: toPublicGrant(existing, now()), isNew: false };
      const at = now();
      const row = await insertRecorded(
        request,
        newGrantRow(request, at, { policy: "prompt", status: "pending" }),
        "grant_requested",
        { tool_id: request.toolId },
      );
      return { grant: toPublicGrant(row, at), isNew: true };
    },

    /** Writes an approval that is active at once (the operator approving ahead of a request). */
    async createActiveGrant(request: GrantRequest & { policy: GrantPolicy }): Promise<PublicGrant> {
      const at = now();
      const fresh = newGrantRow(request, at, {
        policy: request.policy,
        status: "active",
        approved_at: at,
        expires_at: expiryFor(request.policy, at),
      });
      const row = await insertRecorded(request, fresh, "grant_approved", { policy: request.policy });
      return toPublicGrant(row, at);
    },

    async approveGrant(
      organisationId: string,
      actor: string,
      id: string,
      policy: GrantPolicy,
    ): Promise<PublicGrant> {
      const row = await loadGrant(organisationId, id);
      const at = now();
      const isApproved = await deps.repo.updateGrantApproved(organisationId, id, {
        policy,
        approvedAt: at,
        expiresAt: expiryFor(policy, at),
      });
      if (!isApproved) {
        throw new AppError(
          "grant_not_pending",
          `grant ${id} is ${toPublicGrant(row, at).status}, not pending`,
        );
      }
      await deps.recordEvent({
        organisationId,
        environment: row.environment,
        actor,
        action: "grant_approved",
        itemName: row.item_name,
        detail: { grant_id: id, agent_id: row.agent_id, policy },
      });
      return toPublicGrant(await loadGrant(organisationId, id), at);
    },

    async revokeGrant(organisationId: string, actor: string, id: string): Promise<PublicGrant> {
      const row = await loadGrant(organisationId, id);
      const at = now();
      if (!(await deps.repo.updateGrantRevoked(organisationId, id, at))) {
        throw new AppError("grant_not_revocable", `grant ${id} is ${toPublicGrant(row, at).status}`);
      }
      await deps.recordEvent({
        organisationId,
        environment: row.environment,
        actor,
        action: "grant_revoked",
        itemName: row.item_name,
        detail: { grant_id: id, agent_id: row.agent_id },
      });
      return toPublicGrant(await loadGrant(organisationId, id), at);
    },

    async listGrants(organisationId: string, filter: { agentId?: string } = {}): Promise<PublicGrant[]> {
      const at = now();
      return (await deps.repo.findGrants(organisationId, filter)).map((row) => toPublicGrant(row, at));
    },

    /** The grants with the item each one is for (the access snapshot). */
    async listGrantsWithItem(organisationId: string) {
      const at = now();
      return (await deps.repo.findGrants(organisationId, {})).map((row) => ({
        ...toPublicGrant(row, at),
        item_id: row.item_id,
      }));
    },

    /** Stops every approval an agent holds: its client was revoked (call in that transaction). */
    revokeAgentGrants: (organisationId: string, agentId: string, at: Date): Promise<void> =>
      deps.repo.updateAgentGrantsRevoked(organisationId, agentId, at),

    /**
     * folder_standing: owner-only, on an item in a folder, with the folder's name typed to confirm.
     * Gives the pending grant its folder; approveGrant then refuses any grant no longer pending.
     */
    async bindFolderStanding(
      organisationId: string,
      operatorId: string,
      id: string,
      confirmName: unknown,
    ): Promise<void> {
      // Spec 5 rule 5: another organisation's grant (or none) is 404 before any other answer.
      await loadGrant(organisationId, id);
      const role = await deps.findMemberRole?.(organisationId, operatorId);
      if (role !== "owner")
        throw new AppError("not_owner", "only an owner can approve a folder-standing grant");
      const folder = await deps.repo.findGrantFolder(organisationId, id);
      if (!folder) throw new AppError("invalid_request", "this credential is in no folder");
      if (confirmName !== folder.name)
        throw new AppError("confirm_name_mismatch", "confirm_name must be the folder's name exactly");
      await deps.repo.updateGrantFolder(organisationId, id, folder.id);
    },

    /**
     * The approval a call would use right now, without spending it (dry_run).
     */
    async findUsableGrant(scope: GrantScope, call?: CallTarget): Promise<PublicGrant | undefined> {
      const at = now();
      const [first] = (await deps.repo.findUsableGrants(scope, at)).filter((row) => isCovering(row, call));
      return first && toPublicGrant(first, at);
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
     * sent. Undefined when there is none (or another call spent the last one first).
     */
    async authoriseCall(scope: GrantScope, call?: CallTarget): Promise<CallAuthorisation | undefined> {
      const at = now();
      for (const row of await deps.repo.findUsableGrants(scope, at)) {
        if (!isCovering(row, call)) continue;
        if (row.policy !== "prompt") return { grant: toPublicGrant(row, at), release: async () => {} };
        if (await deps.repo.updateGrantConsumed(row.id, at)) {
          const spent = { ...row, status: "consumed", consumed_at: at };
          return { grant: toPublicGrant(spent, at), release: () => deps.repo.updateGrantRestored(row.id) };
        }
      }
      return undefined;
    },
  };
}

export type GrantsService = ReturnType<typeof createGrantsService>;
