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
import { type CallTarget, isCovering } from "./grant-coverage.ts";
import { type PublicGrant, requestedCallColumns, toPublicGrant } from "./grant-view.ts";
import type { GrantScope, GrantsRepo, GrantWithItem } from "./grants.repo.ts";

/** Spec 8: a session approval lives 8 hours. */
export const SESSION_GRANT_MS = 8 * 60 * 60 * 1000;
/** Spec 8: the task description shown in the inbox. */
export const MAX_TASK_DESCRIPTION = 500;

export type GrantPolicy = "prompt" | "session" | "item_standing" | "folder_standing";

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
  /** A one-call grant, spent for this call (a session or standing grant is never spent). */
  isOneCall?: boolean;
}

export interface GrantRequest extends GrantScope {
  environment: string;
  actor: string;
  taskDescription?: string | undefined;
  taskId?: string | undefined;
  /** The policy rule (an ask rule) that sent this call to an approval: its audit row names it. */
  policyRule?: { rule_id: string } | undefined;
}

/** What a request's audit row says of its call: method and path without its query, and the rule. */
function requestedDetail(request: GrantRequest): Record<string, unknown> {
  const call = request.requestedCall;
  return {
    // As http_request rows do: the route without its query, which may carry personal data.
    ...(call ? { method: call.method, path: call.path.split("?")[0] } : {}),
    ...(request.policyRule ? { rule_id: request.policyRule.rule_id } : {}),
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
      host: request.requestedCall?.host,
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
        host: request.requestedCall?.host,
        detail: {
          grant_id: outcome.id,
          agent_id: request.agentId,
          tool_id: request.toolId,
          ...requestedDetail(request),
        },
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
        { tool_id: request.toolId, ...requestedDetail(request) },
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
      const was = await deps.repo.updateGrantRevoked(organisationId, id, at);
      if (!was) {
        throw new AppError("grant_not_revocable", `grant ${id} is ${toPublicGrant(row, at).status}`);
      }
      await deps.recordEvent({
        organisationId,
        environment: row.environment,
        actor,
        // A request still waiting is denied: it never became an approval.
        action: was === "pending" ? "grant_denied" : "grant_revoked",
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
          return {
            grant: toPublicGrant(spent, at),
            release: () => deps.repo.updateGrantRestored(row.id),
            isOneCall: true,
          };
        }
      }
      return undefined;
    },
  };
}

export type GrantsService = ReturnType<typeof createGrantsService>;
