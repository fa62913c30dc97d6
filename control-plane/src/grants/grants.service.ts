// Approvals (spec 2.4, 3.1): request (pending), approve with a policy, revoke; with the listings
// (grant-listings.ts) and the check an http_request makes before anything leaves
// (call-authorisation.ts), the grants service.

import { randomBytes } from "node:crypto";
import { sha256Hex } from "@latch/shared/crypto/hash";
import { AppError } from "@latch/shared/errors";
import { newId } from "@latch/shared/ids";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { isRole, mayPerform } from "../auth/permissions.ts";
import type { NewGrant } from "../db/schema.ts";
import { checkRequestLimit } from "../limits/request-limit.ts";
import {
  APPROVAL_CODE_TTL_MS,
  approvalCodeFor,
  findPendingByCode,
  isApprovalLinkLive,
} from "./approval-codes.ts";
import { createCallAuthorisation } from "./call-authorisation.ts";
import { isStandingPolicy } from "./grant-coverage.ts";
import { createGrantListings, findGrantOrFail } from "./grant-listings.ts";
import {
  bodyViewOfRow,
  type PendingApproval,
  type PublicGrant,
  requestedCallColumns,
  toPendingApproval,
  toPublicGrant,
} from "./grant-view.ts";
import type { ApprovalRow, GrantScope, GrantsRepo, GrantWithItem } from "./grants.repo.ts";
import type { BodyView } from "./request-body.ts";
import {
  describeStandingScope,
  operatorIdOf,
  type StandingScope,
  standingScopeOf,
} from "./standing-scope.ts";

/** Spec 8: a session approval lives 8 hours. */
export const SESSION_GRANT_MS = 8 * 60 * 60 * 1000;
/** Spec 8: the task description shown in the inbox. */
export const MAX_TASK_DESCRIPTION = 500;
/**
 * DECISIONS "The approval, readable and reversible": the same call asked again this soon after a
 * Deny is pending again (spec 3.1) but mails nobody, and the agent is told it was refused.
 */
export const DENY_MEMORY_MS = 10 * 60 * 1000;

export type GrantPolicy = "prompt" | "session" | "item_standing" | "folder_standing";

/** A decision's writes: the grant's row and its audit row, in one transaction where there is one. */
export interface GrantsTransaction {
  repo: GrantsRepo;
  recordEvent(event: AuditEvent): Promise<void>;
}

export interface GrantsServiceDeps {
  repo: GrantsRepo;
  recordEvent(event: AuditEvent): Promise<void>;
  /**
   * Runs `fn` in one transaction with an audit append of its own, so that a request or a
   * decision (an approval, a first approval, a revoke or deny) and its row are both written or
   * neither is: a crash or a refused row between them would leave one nobody can find in the
   * ledger, and a retry finds nothing left to record.
   */
  inTransaction: <T>(fn: (tx: GrantsTransaction) => Promise<T>) => Promise<T>;
  now?: () => Date;
  /**
   * Hosted: every approval request carries an 8-digit code (stored as a peppered hash). Both
   * variants count new requests toward 30 per organisation per hour.
   */
  approvalCodes?: { hashCode(code: string): string };
  /**
   * Hosted: how many members approve a standing grant before it is active (the organisation's
   * two-person rule, DECISIONS "Teams"); the local variant has one operator, so one.
   */
  findStandingApprovalsNeed?: (organisationId: string) => Promise<1 | 2>;
  /**
   * Hosted: a member's role in the organisation now (undefined: no longer a member). A first
   * approval of the two-person rule counts only while its member may still give it.
   */
  findMemberRole?: (organisationId: string, operatorId: string) => Promise<string | undefined>;
  /** Hosted: tells the organisation's operators about a new pending grant (code and link). */
  notifyApproval?: (notice: {
    organisationId: string;
    grant: PublicGrant;
    /** The body the request would send, as the operator reads it; null: none. */
    body: BodyView | null;
    approvalCode: string;
    linkToken: string;
  }) => Promise<void>;
}

/** A request for approval as the agent's answer reports it. */
export interface GrantRequestOutcome {
  grant: PublicGrant;
  isNew: boolean;
  approvalCode?: string;
  notifyFailed?: boolean;
  /** The operator denied this same request within the last 10 minutes, at this time. */
  deniedAt: Date | null;
}

export interface GrantRequest extends GrantScope {
  environment: string;
  actor: string;
  taskDescription?: string | undefined;
  taskId?: string | undefined;
  /** The policy rule (an ask rule) that sent this call to an approval: its audit row names it. */
  policyRule?: { rule_id: string } | undefined;
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
    approved_by: null,
    revoked_by: null,
    last_used_at: null,
    after_deny_at: null,
    first_approved_by: null,
    first_approved_at: null,
    first_policy: null,
    first_scope: null,
    ...change,
  };
}

/** The 409 of a standing grant's second approval that asks for something else than the first. */
function mismatch(row: ApprovalRow): AppError {
  const who = row.first_approved_by_email ?? "another member";
  const covers =
    row.first_scope === "credential"
      ? " for the whole credential"
      : row.first_scope === "path_prefix"
        ? " under its path"
        : "";
  return new AppError(
    "approval_mismatch",
    `${who} approved this as ${row.first_policy}${covers}; a second member confirms that same approval, or denies the request`,
  );
}

/**
 * The 409 of a folder_standing confirmation whose credential is no longer in the folder the first
 * approval named: the second member would approve another folder than the first did.
 */
function movedSinceFirst(row: ApprovalRow): AppError {
  const who = row.first_approved_by_email ?? "another member";
  return new AppError(
    "approval_mismatch",
    `${who} approved the folder this credential was in; it has moved to another folder since, so the first approval does not cover this one: deny the request and let the agent ask again`,
  );
}

export function createGrantsService(deps: GrantsServiceDeps) {
  const now = deps.now ?? (() => new Date());
  /** A request or decision and its audit row, in one transaction (GrantsServiceDeps). */
  const recorded = <T>(fn: (tx: GrantsTransaction) => Promise<T>): Promise<T> => deps.inTransaction(fn);

  function expiryFor(policy: GrantPolicy, at: Date): Date | null {
    return policy === "session" ? new Date(at.getTime() + SESSION_GRANT_MS) : null;
  }

  /** How many members a `policy` approval needs in the organisation: 2 only for a standing one under the rule. */
  async function approvalsNeeded(organisationId: string, policy: GrantPolicy): Promise<1 | 2> {
    if (!isStandingPolicy(policy) || !deps.findStandingApprovalsNeed) return 1;
    return deps.findStandingApprovalsNeed(organisationId);
  }

  const loadGrant = (organisationId: string, id: string) => findGrantOrFail(deps.repo, organisationId, id);

  /** Whether the member who gave `row`'s first approval may still approve `policy` there. */
  async function mayStillApprove(row: GrantWithItem, policy: GrantPolicy): Promise<boolean> {
    if (!deps.findMemberRole || !row.first_approved_by) return true;
    const role = await deps.findMemberRole(row.organisation_id, row.first_approved_by);
    const action = policy === "folder_standing" ? "approvals.decide_folder" : "approvals.decide";
    return isRole(role) && mayPerform(role, action);
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

  /** The audit row of a new request: which request it is (method, host, path without its query). */
  async function recordRequested(
    recordEvent: GrantsTransaction["recordEvent"],
    request: GrantRequest,
    row: GrantWithItem,
  ): Promise<void> {
    const call = request.requestedCall;
    await recordEvent({
      organisationId: request.organisationId,
      environment: request.environment,
      actor: request.actor,
      action: "grant_requested",
      itemName: row.item_name,
      host: call?.host ?? request.callScope?.host ?? undefined,
      detail: {
        grant_id: row.id,
        agent_id: request.agentId,
        tool_id: request.toolId,
        // As http_request rows do: the route without its query, which may carry personal data.
        ...(call ? { method: call.method, path: call.path.split("?")[0] } : { request: "any call" }),
        ...(row.after_deny_at ? { after_deny: true } : {}),
        // The ask rule that sent the call to an approval (DECISIONS "Policies").
        ...(request.policyRule ? { rule_id: request.policyRule.rule_id } : {}),
      },
    });
  }

  /** A Deny of exactly this request by the operator within the last 10 minutes, if there was one. */
  async function findRecentDeny(repo: GrantsRepo, request: GrantRequest, at: Date) {
    const denied = await repo.findDeniedGrantSince(request, new Date(at.getTime() - DENY_MEMORY_MS));
    return denied?.revoked_at ?? null;
  }

  /**
   * Hosted requests: the hourly limit counted under the organisation lock. A repeat of a request
   * still waiting answers the code it was first given (and mailed) while that code lives; once it
   * has expired or was voided, a new one (spec 8: its wrong-attempt count is kept). The new code is
   * not mailed, and the link mailed with the request keeps its own hour (isApprovalLinkLive).
   */
  async function requestCodedGrant(
    request: GrantRequest,
    codes: { hashCode(code: string): string },
  ): Promise<GrantRequestOutcome & { approvalCode: string; notifyFailed: boolean }> {
    const at = now();
    const linkToken = randomBytes(32).toString("base64url");
    const expiresAt = new Date(at.getTime() + APPROVAL_CODE_TTL_MS);
    /** A new code for `grantId`: the one its row's hash and expiry name. */
    const newCode = (grantId: string) => {
      const code = approvalCodeFor(codes, grantId, expiresAt);
      return { code, hash: codes.hashCode(`approval:${code}`) };
    };
    // The request and its audit row in one transaction: a request the ledger does not name would
    // be found pending by the retry and never announced (no row, no live event, no mail).
    const { row, isNew, code } = await recorded((tx) =>
      tx.repo.inOrganisationLock(request.organisationId, async (repo) => {
        const existing = await repo.findPendingGrant(request);
        if (existing) {
          const liveUntil = existing.approval_code_expires_at;
          // The live code, if it is one this derivation made (not a random code of an earlier
          // release, nor one an older replica drew during an upgrade): then it is the one mailed.
          const live =
            liveUntil !== null && liveUntil > at ? approvalCodeFor(codes, existing.id, liveUntil) : undefined;
          if (live !== undefined && existing.approval_code_hash === codes.hashCode(`approval:${live}`)) {
            const row = await findGrantOrFail(repo, request.organisationId, existing.id);
            return { row, isNew: false, code: live };
          }
          const fresh = newCode(existing.id);
          await repo.updateApprovalCode(existing.id, fresh.hash, expiresAt);
          const row = await findGrantOrFail(repo, request.organisationId, existing.id);
          return { row, isNew: false, code: fresh.code };
        }
        await checkRequestLimit((since) => repo.findRequestUsageSince(request.organisationId, since), at);
        const row = newGrantRow(request, at, {
          policy: "prompt",
          status: "pending",
          requested: true,
          approval_code_hash: null,
          approval_code_expires_at: expiresAt,
          approval_token_hash: sha256Hex(linkToken),
          after_deny_at: await findRecentDeny(repo, request, at),
        });
        const fresh = newCode(row.id);
        await repo.insertGrant({ ...row, approval_code_hash: fresh.hash });
        const inserted = await findGrantOrFail(repo, request.organisationId, row.id);
        await recordRequested(tx.recordEvent, request, inserted);
        return { row: inserted, isNew: true, code: fresh.code };
      }),
    );
    const grant = toPublicGrant(row, at);
    const deniedAt = row.after_deny_at;
    let notifyFailed = false;
    // A request repeated right after a Deny is not mailed again: the operator has just answered it.
    if (isNew && deps.notifyApproval && !deniedAt) {
      // Spec 6: notification is attempted; its outcome is reported, never fatal to the request.
      notifyFailed = await deps
        .notifyApproval({
          organisationId: request.organisationId,
          grant,
          body: bodyViewOfRow(row),
          approvalCode: code,
          linkToken,
        })
        .then(
          () => false,
          () => true,
        );
    }
    return { grant, isNew, approvalCode: code, notifyFailed, deniedAt };
  }

  const decisions = {
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
      // The link lives its own hour from its mail, which a repeat of the request never moves, and
      // is voided with the code after five wrong tries (approval-codes.ts): a mail read days
      // later, or forwarded, approves nothing. Voided answers as expired: ask again.
      if (!isApprovalLinkLive(row, now())) {
        throw new AppError(
          "approval_code_expired",
          "this approval link has expired; ask the agent to request again",
        );
      }
      return this.approveGrant(organisationId, actor, row.id, "prompt");
    },

    /**
     * The pending request an 8-digit code belongs to, as the Inbox shows it, approving nothing:
     * the console shows the call first and approves it by its id, so a code the agent handed out
     * for another request ("type A to approve my GET") is seen for what it approves. Wrong codes
     * count as approve-by-code's do (spec 8); reuse 409, expired 410.
     */
    async findByCode(organisationId: string, rawCode: unknown): Promise<PendingApproval> {
      const codes = deps.approvalCodes;
      if (!codes) throw new AppError("not_found", "approval codes are a hosted feature");
      const at = now();
      const row = await findPendingByCode(deps.repo, codes, organisationId, rawCode, undefined, at);
      return toPendingApproval(await loadGrant(organisationId, row.id), at);
    },

    /**
     * Approves the pending grant an 8-digit code belongs to (spec 4.3): reuse 409, expired 410; wrong
     * codes count per approval (5, then its code is void) and per organisation (20 per 15 minutes).
     */
    async approveByCode(
      organisationId: string,
      actor: string,
      rawCode: unknown,
      options: { grantId?: string | undefined; policy?: GrantPolicy; scope?: StandingScope | undefined } = {},
    ): Promise<PublicGrant> {
      const codes = deps.approvalCodes;
      if (!codes) throw new AppError("not_found", "approval codes are a hosted feature");
      const row = await findPendingByCode(deps.repo, codes, organisationId, rawCode, options.grantId, now());
      return this.approveGrant(organisationId, actor, row.id, options.policy ?? "prompt", {
        scope: options.scope,
      });
    },

    /**
     * A pending grant for the scope: the one already waiting, or a new one. Repeated requests do
     * not fill the operator's inbox.
     */
    /**
     * Spec 6: a request a standing approval already covers is answered with it and audited
     * `auto_approved`, with the credential's name and the host (the one asked for, or the
     * credential's only host): the same row whichever way it was asked (API or MCP tool).
     */
    async recordAutoApproved(event: {
      organisationId: string;
      environment: string;
      actor: string;
      agentId: string;
      itemName: string;
      host: string | undefined;
      grant: Pick<PublicGrant, "grant_id" | "policy">;
    }): Promise<void> {
      await deps.recordEvent({
        organisationId: event.organisationId,
        environment: event.environment,
        actor: event.actor,
        action: "auto_approved",
        itemName: event.itemName,
        host: event.host,
        detail: { grant_id: event.grant.grant_id, agent_id: event.agentId, policy: event.grant.policy },
      });
    },

    async requestGrant(request: GrantRequest): Promise<GrantRequestOutcome> {
      if (deps.approvalCodes) return requestCodedGrant(request, deps.approvalCodes);
      const at = now();
      // Spec 8's 30 new requests an hour hold locally too: an agent asking for ever new calls
      // must not fill the operator's list (and the database) without end.
      const { row, isNew } = await recorded((tx) =>
        tx.repo.inOrganisationLock(request.organisationId, async (repo) => {
          const existing = await repo.findPendingGrant(request);
          if (existing) {
            return { row: await findGrantOrFail(repo, request.organisationId, existing.id), isNew: false };
          }
          await checkRequestLimit((since) => repo.findRequestUsageSince(request.organisationId, since), at);
          const fresh = newGrantRow(request, at, {
            policy: "prompt",
            status: "pending",
            requested: true,
            after_deny_at: await findRecentDeny(repo, request, at),
          });
          await repo.insertGrant(fresh);
          const inserted = await findGrantOrFail(repo, request.organisationId, fresh.id);
          await recordRequested(tx.recordEvent, request, inserted);
          return { row: inserted, isNew: true };
        }),
      );
      return { grant: toPublicGrant(row, at), isNew, deniedAt: row.after_deny_at };
    },

    /**
     * Writes an approval that is active at once (the operator approving ahead of a request: a
     * fulfilled collect request, a connect). Under the two-person rule a standing one is written
     * pending with the operator's as its first approval ("1 of 2"), for a second member to confirm.
     */
    async createActiveGrant(request: GrantRequest & { policy: GrantPolicy }): Promise<PublicGrant> {
      const at = now();
      const by = operatorIdOf(request.actor);
      if (by && (await approvalsNeeded(request.organisationId, request.policy)) === 2) {
        const pending = newGrantRow(request, at, {
          policy: "prompt",
          status: "pending",
          first_approved_by: by,
          first_approved_at: at,
          first_policy: request.policy,
          // The scope is on the row already (callScope): the confirmation keeps it.
          first_scope: null,
        });
        const row = await insertRecorded(request, pending, "grant_first_approved", {
          policy: request.policy,
          approvals: "1 of 2",
        });
        return toPublicGrant(row, at);
      }
      const fresh = newGrantRow(request, at, {
        policy: request.policy,
        status: "active",
        approved_at: at,
        expires_at: expiryFor(request.policy, at),
        approved_by: operatorIdOf(request.actor),
      });
      const row = await insertRecorded(request, fresh, "grant_approved", { policy: request.policy });
      return toPublicGrant(row, at);
    },

    /**
     * pending -> active with `policy`. A standing policy may be given `scope`: "path_prefix" (the
     * request's method and host under its path's prefix) or "credential" (every call); without
     * it the grant keeps the scope it was asked with (none: the whole item).
     */
    async approveGrant(
      organisationId: string,
      actor: string,
      id: string,
      policy: GrantPolicy,
      options: {
        scope?: StandingScope | undefined;
        /** folder_standing: the folder the operator confirmed (confirmFolder), bound with the approval. */
        folderId?: string | undefined;
      } = {},
    ): Promise<PublicGrant> {
      let row = await loadGrant(organisationId, id);
      const folderId = policy === "folder_standing" ? options.folderId : undefined;
      if (policy === "folder_standing" && !folderId)
        throw new AppError("invalid_request", "a folder_standing approval names its folder (confirm_name)");
      const at = now();
      const approver = operatorIdOf(actor);
      let scopeChoice = options.scope;
      let firstApprovedBy: string | undefined;
      // The two-person rule (DECISIONS "Teams"): a standing approval is active only once a second
      // member confirms it; the first leaves it pending, "1 of 2".
      if (approver && (await approvalsNeeded(organisationId, policy)) === 2) {
        // A first approval whose member has since been removed or lost the right to give it is
        // no half of anything: this approval is the first one again.
        const voidFirst =
          row.status === "pending" && row.first_approved_by && !(await mayStillApprove(row, policy))
            ? row.first_approved_by
            : null;
        if (row.status === "pending" && (!row.first_approved_by || voidFirst)) {
          const scope = standingScopeOf(row, policy, options.scope);
          const pendingRow = row;
          const isRecorded = await recorded(async (tx) => {
            const isFirst = await tx.repo.updateGrantFirstApproval(organisationId, id, {
              by: approver,
              at,
              policy,
              scope: options.scope ?? null,
              folderId,
              replacing: voidFirst,
            });
            if (!isFirst) return false;
            await tx.recordEvent({
              organisationId,
              environment: pendingRow.environment,
              actor,
              action: "grant_first_approved",
              itemName: pendingRow.item_name,
              detail: {
                grant_id: id,
                agent_id: pendingRow.agent_id,
                policy,
                approvals: "1 of 2",
                ...(options.scope ? { covers: describeStandingScope(scope) } : {}),
              },
            });
            return true;
          });
          if (isRecorded) return toPublicGrant(await loadGrant(organisationId, id), at);
          // Another member recorded a first approval at the same moment: this one is the second.
          row = await loadGrant(organisationId, id);
        }
        if (row.status === "pending") {
          if (row.first_approved_by === approver) {
            throw new AppError(
              "second_member_required",
              "you gave the first approval of this request; another member who may approve it must confirm it",
            );
          }
          if (row.first_policy !== policy || (options.scope && options.scope !== row.first_scope))
            throw mismatch(row);
          // The first approval bound the folder the credential was in then; it may have moved since.
          if (folderId && row.folder_id !== folderId) throw movedSinceFirst(row);
          scopeChoice = (row.first_scope as StandingScope | null) ?? undefined;
          firstApprovedBy = row.first_approved_by ?? undefined;
        }
      }
      const scope = standingScopeOf(row, policy, scopeChoice);
      const approvedRow = row;
      await recorded(async (tx) => {
        const isApproved = await tx.repo.updateGrantApproved(organisationId, id, {
          policy,
          approvedAt: at,
          expiresAt: expiryFor(policy, at),
          approvedBy: approver,
          scope,
          firstApprovedBy,
          folderId,
        });
        if (!isApproved) {
          throw new AppError(
            "grant_not_pending",
            `grant ${id} is ${toPublicGrant(approvedRow, at).status}, not pending`,
          );
        }
        await tx.recordEvent({
          organisationId,
          environment: approvedRow.environment,
          actor,
          action: "grant_approved",
          itemName: approvedRow.item_name,
          detail: {
            grant_id: id,
            agent_id: approvedRow.agent_id,
            policy,
            ...(scopeChoice ? { covers: describeStandingScope(scope) } : {}),
            ...(firstApprovedBy ? { approvals: "2 of 2", first_approved_by: firstApprovedBy } : {}),
          },
        });
      });
      return toPublicGrant(await loadGrant(organisationId, id), at);
    },

    async revokeGrant(organisationId: string, actor: string, id: string): Promise<PublicGrant> {
      const row = await loadGrant(organisationId, id);
      const at = now();
      await recorded(async (tx) => {
        const was = await tx.repo.updateGrantRevoked(organisationId, id, at, operatorIdOf(actor));
        if (!was) {
          throw new AppError("grant_not_revocable", `grant ${id} is ${toPublicGrant(row, at).status}`);
        }
        await tx.recordEvent({
          organisationId,
          environment: row.environment,
          actor,
          // A request still waiting is denied: it never became an approval.
          action: was === "pending" ? "grant_denied" : "grant_revoked",
          itemName: row.item_name,
          detail: { grant_id: id, agent_id: row.agent_id },
        });
      });
      return toPublicGrant(await loadGrant(organisationId, id), at);
    },

    /**
     * Stops every approval an agent holds: its client was revoked (call in that transaction), by
     * `actor` when an operator did it.
     */
    revokeAgentGrants: (organisationId: string, agentId: string, at: Date, actor?: string): Promise<void> =>
      deps.repo.updateAgentGrantsRevoked(organisationId, agentId, at, actor ? operatorIdOf(actor) : null),

    /**
     * folder_standing: owner-only, on an item in a folder, with the folder's name typed to confirm.
     * Answers that folder's id, which approveGrant binds to the grant with the approval itself (a
     * first approval of two with its `first_*` columns, so the second confirms that same folder).
     */
    async confirmFolder(organisationId: string, id: string, confirmName: unknown): Promise<string> {
      // Spec 5 rule 5: another organisation's grant (or none) is 404 before any other answer. Who
      // may approve one (an owner, spec 2.4) is the route's action (auth/permissions.ts).
      await loadGrant(organisationId, id);
      const folder = await deps.repo.findGrantFolder(organisationId, id);
      if (!folder) throw new AppError("invalid_request", "this credential is in no folder");
      if (confirmName !== folder.name)
        throw new AppError("confirm_name_mismatch", "confirm_name must be the folder's name exactly");
      return folder.id;
    },
  };
  return {
    ...decisions,
    ...createGrantListings({ repo: deps.repo, now }),
    ...createCallAuthorisation({ repo: deps.repo, now }),
  };
}

export type GrantsService = ReturnType<typeof createGrantsService>;
