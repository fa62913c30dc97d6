// Organisation policies (DECISIONS "Policies"): read and replace the list (versioned, audited),
// under the two-person rule keep a list that may allow more as a proposal a second member confirms
// (DECISIONS "Teams"), preview a list against the last 7 days of calls, and, for the call path, the
// decision of the list in force (compiled once per version and cached) with its rate limits held
// in the database, so that they hold across replicas.
import { randomBytes } from "node:crypto";
import { AppError } from "@latch/shared/errors";
import { canonicalJson } from "@latch/shared/ledger/canonical-json";
import { sha256Hex } from "@latch/shared/ledger/ledger-format";
import type { AuditEvent, AuditedCall, AuditRepo } from "../audit/audit.repo.ts";
import { isRole, mayPerform, requirePermission } from "../auth/permissions.ts";
import type { RateLimit, RateLimiter } from "../limits/rate-limit.ts";
import type { PoliciesRepo, PolicyProposalRow } from "./policies.repo.ts";
import { createPolicyCache } from "./policy-cache.ts";
import {
  type CompiledPolicy,
  compilePolicy,
  decide,
  type PolicyCall,
  type PolicyDecision,
} from "./policy-match.ts";
import {
  CALL_ACTIONS,
  MAX_PREVIEW_CALLS,
  type PolicyPreview,
  PREVIEW_DAYS,
  previewPolicy,
} from "./policy-preview.ts";
import { type PolicyRule, parsePolicyRules, rateWindowMs } from "./policy-rules.ts";
import { isWiderPolicy } from "./policy-widening.ts";

export interface PoliciesServiceDeps {
  repo: PoliciesRepo;
  /** The list and its audit row are written in one transaction: a change is never unaudited. */
  inTransaction<T>(
    fn: (tx: { repo: PoliciesRepo; recordEvent(event: AuditEvent): Promise<void> }) => Promise<T>,
  ): Promise<T>;
  recordEvent(event: AuditEvent): Promise<void>;
  rateLimiter: Pick<RateLimiter, "take" | "check">;
  findCallsBefore: AuditRepo["findCallsBefore"];
  /**
   * Every credential a call naming `itemName` is judged by today, that one first (token-plan.ts
   * `findPlanItems`: a provider's refresh token and client secret beside its app credential), so
   * that a preview counts a rule on `SPOTIFY_REFRESH` for the calls that named `SPOTIFY`, as
   * enforcement does. Without it a preview judges the named credential alone.
   */
  findJudgedItems?(organisationId: string, environment: string, itemName: string): Promise<readonly string[]>;
  now: () => Date;
  /**
   * The local vault: this process alone writes the list (local/local-lock.ts), so a cached
   * version is current without asking the database on every call.
   */
  isSoleWriter?: boolean;
  /** The compiled lists kept in memory (policy-cache.ts): its defaults unless a test sets them. */
  cacheBudget?: { lists: number; json: number };
}

export interface PolicyList {
  version: number;
  rules: PolicyRule[];
  updated_at: string | null;
  updated_by: string | null;
}

/** A list waiting for a second member (DECISIONS "Teams", two-person rule). */
export interface PolicyProposal {
  id: string;
  /** The version it was made from: a confirmation applies it only while that is still saved. */
  base_version: number;
  rules: PolicyRule[];
  proposed_by: string;
  proposed_at: string;
}

/** What a save did: applied, or (a wider list under the two-person rule) kept as the proposal. */
export type PolicySave =
  | { status: "saved"; list: PolicyList }
  | { status: "pending"; proposal: PolicyProposal };

/** What `If-Match` asked for: a version, or `*` (whatever is saved). */
export type ExpectedVersion = number | "any";

/**
 * Saves of an organisation's list by one member: each writes the whole list (up to 1 MiB) into its
 * permanent `policies_changed` ledger row, so a member saving in a loop would grow the shared
 * database without bound. Per member, so an admin's loop never keeps the owner from changing a
 * rule; only a save that would be written counts (a stale one is refused before). Counted in the
 * database, so it holds across replicas; the local vault's own database is not limited.
 */
export const POLICY_SAVES_PER_MEMBER: RateLimit = {
  name: "policy_saves:member",
  limit: 60,
  windowMs: 3_600_000,
  what: "policy saves by one member",
};
/** The member who proposed a list confirming it: the two-person rule wants another. */
function secondMemberRequired(): AppError {
  return new AppError(
    "second_member_required",
    "you proposed this policy change; another member who may edit policies must confirm it",
  );
}

/** Whether the member behind `proposedBy` (an actor, `operator:<id>`) may still edit the policies. */
async function isStillProposer(repo: PoliciesRepo, organisationId: string, proposedBy: string) {
  if (!proposedBy.startsWith("operator:")) return false;
  const role = await repo.findMemberRole(organisationId, proposedBy.slice("operator:".length));
  return isRole(role) && mayPerform(role, "policies.write");
}

/**
 * The member saving or confirming may still edit policies, judged in the change's transaction
 * (the membership read under its share lock: a removal or demotion at the same moment waits for
 * this change, or is seen by it), not only when the request arrived.
 */
async function requireStillEditor(repo: PoliciesRepo, organisationId: string, actor: string) {
  if (!actor.startsWith("operator:")) return;
  const role = await repo.findMemberRole(organisationId, actor.slice("operator:".length));
  if (!isRole(role)) {
    throw new AppError("forbidden", "you are no longer a member of this organisation; nothing was saved");
  }
  requirePermission(role, "policies.write");
}

/** A save whose If-Match names a version the list has moved on from. */
function staleVersion(expected: ExpectedVersion, version: number): AppError {
  return new AppError(
    "stale_version",
    `the policy was changed since version ${expected} (it is now version ${version}); load it again and reapply your change`,
    { extra: { version } },
  );
}

/** A proposal's id: a type prefix and 96 random bits, as shared/src/ids.ts makes ids. */
function newProposalId(): string {
  return `ppl_${randomBytes(12).toString("base64url").toLowerCase().replace(/[-_]/g, "0")}`;
}

/** A proposal that is gone, was never there, or is another organisation's: all alike. */
function proposalGone(): AppError {
  return new AppError(
    "not_found",
    "no such policy proposal is waiting (it was confirmed, discarded or replaced)",
  );
}

/**
 * What a list's audit row holds: its counts, the list itself and a digest of its canonical form
 * (RFC 8785), so that a later reader finds what rule r1 allowed when a call named it although
 * versions are overwritten. `field` names the list: `saved_rules`, or `proposed_rules`.
 */
function listDetail(rules: readonly PolicyRule[], field: "saved_rules" | "proposed_rules") {
  const count = (effect: string) => rules.filter((r) => r.enabled && r.effect === effect).length;
  return {
    rules: rules.length,
    allow: count("allow"),
    ask: count("ask"),
    deny: count("deny"),
    disabled: rules.filter((r) => !r.enabled).length,
    rules_sha256: sha256Hex(canonicalJson(rules)),
    [field]: rules,
  };
}

/** Previews one process computes at once, across organisations. */
export const MAX_PREVIEWS_AT_ONCE = 4;
/** Named credentials whose siblings a preview reads (readJudgedItems). */
const MAX_PREVIEW_JUDGED_NAMES = 1_000;
/** Rows read per page when a preview walks the ledger back. */
const PREVIEW_PAGE = 5_000;

function judgedKey(environment: string | null, itemName: string): string {
  return `${environment ?? ""}\0${itemName}`;
}

/** How a call a rule decided is named in its audit rows and answers. */
export function ruleReference(decision: PolicyDecision): { rule_id: string; rule_name: string } {
  return { rule_id: decision.rule.id, rule_name: decision.rule.name };
}

export function createPoliciesService(deps: PoliciesServiceDeps) {
  // Each organisation's compiled list, bounded by count and by stored size (policy-cache.ts).
  const cache = createPolicyCache(deps.cacheBudget);
  /** Organisations whose preview this process is computing now. */
  const previewing = new Set<string>();

  /** The stored rules, parsed again (they were written by the same parser); a bad list fails closed. */
  function readRules(stored: unknown[]): PolicyRule[] {
    try {
      return parsePolicyRules(stored);
    } catch (error) {
      // Never a silent "no rules": a deny rule must not vanish because its list could not be read.
      throw new AppError("internal", "the saved policy could not be read", { cause: error });
    }
  }

  /** Compiles `rules` and keeps them, weighed by their stored JSON, if the cache's budget allows. */
  function remember(organisationId: string, version: number, rules: readonly PolicyRule[]) {
    const size = JSON.stringify(rules).length;
    return cache.remember(organisationId, { version, compiled: compilePolicy(rules), size });
  }

  /**
   * The compiled list in force: one read of its version per call, the rules only when it moved.
   * `knownVersion` is that version when the caller read it already (the hosted call's one
   * statement, calls/call-context.repo.ts): then nothing is read while it matches the cache.
   */
  async function policyInForce(organisationId: string, knownVersion?: number): Promise<CompiledPolicy> {
    const cached = cache.find(organisationId);
    if (cached && (deps.isSoleWriter || knownVersion === cached.version)) return cached.compiled;
    const found = await deps.repo.findPolicyIfChanged(organisationId, cached?.version);
    if (cached && found.version === cached.version) return cached.compiled;
    return remember(organisationId, found.version, readRules(found.rules ?? [])).compiled;
  }

  function bucketOf(organisationId: string, rule: PolicyRule): RateLimit | undefined {
    if (!rule.rate_limit) return undefined;
    return {
      name: `policy:${organisationId}`,
      limit: rule.rate_limit.calls,
      windowMs: rateWindowMs(rule.rate_limit),
      what: `calls under policy rule ${rule.id}`,
    };
  }

  /**
   * The credentials each named credential of `calls` is judged by, read once per name and
   * environment, for the first 1 000 names (a name no longer stored, or past them, is judged alone:
   * an agent's made-up names must not turn one preview into a read per row).
   */
  async function readJudgedItems(organisationId: string, calls: readonly AuditedCall[]) {
    const judged = new Map<string, readonly string[]>();
    if (!deps.findJudgedItems) return judged;
    for (const row of calls) {
      if (!row.item_name) continue;
      const key = judgedKey(row.environment, row.item_name);
      if (judged.has(key)) continue;
      if (judged.size >= MAX_PREVIEW_JUDGED_NAMES) break;
      judged.set(key, await deps.findJudgedItems(organisationId, row.environment ?? "", row.item_name));
    }
    return judged;
  }

  async function readRecentCalls(organisationId: string, since: Date) {
    const calls: AuditedCall[] = [];
    let beforeSeq: number | undefined;
    let truncated = false;
    for (;;) {
      const page = await deps.findCallsBefore(organisationId, {
        actions: CALL_ACTIONS,
        beforeSeq,
        limit: PREVIEW_PAGE,
      });
      const recent = page.filter((row) => row.at >= since);
      calls.push(...recent);
      if (calls.length >= MAX_PREVIEW_CALLS) {
        truncated = true;
        calls.length = MAX_PREVIEW_CALLS;
        break;
      }
      // The ledger's times only move forward: an older row means every row before it is older too.
      if (page.length < PREVIEW_PAGE || recent.length < page.length) break;
      beforeSeq = page.at(-1)!.seq;
    }
    return { calls: calls.reverse(), truncated };
  }

  function proposalOf(row: PolicyProposalRow): PolicyProposal {
    return {
      id: row.id,
      base_version: row.base_version,
      rules: readRules(row.rules),
      proposed_by: row.proposed_by,
      proposed_at: row.proposed_at.toISOString(),
    };
  }

  /**
   * Replaces the whole list, if its version is still `expected` (else 409 `stale_version`), with
   * its audit row in the same transaction; any proposal waiting is dropped with it (audited), as
   * it was made against a list no longer saved. `isTwoPersonJudged` (hosted): under
   * `standing_approvals_need` 2 a list that may allow a call the saved one does not
   * (policy-widening.ts) is not applied but kept as the organisation's one proposal (replacing
   * one there), audited `policy_proposed`, until another member confirms it.
   */
  async function savePolicies(
    organisationId: string,
    actor: string,
    expected: ExpectedVersion,
    rawRules: unknown,
    options: { isTwoPersonJudged: boolean },
  ): Promise<PolicySave> {
    const rules = parsePolicyRules(rawRules);
    if (!deps.isSoleWriter) {
      // A save that would be refused as stale takes no place (the transaction below checks again).
      if (expected !== "any") {
        const current = await deps.repo.findPolicyList(organisationId);
        if (current.version !== expected) throw staleVersion(expected, current.version);
      }
      // Before the transaction: a full window is 429 `rate_limited` with nothing written.
      await deps.rateLimiter.take(POLICY_SAVES_PER_MEMBER, `${organisationId}:${actor}`);
    }
    const at = deps.now();
    const outcome = await deps.inTransaction(async (tx) => {
      if (!deps.isSoleWriter) await requireStillEditor(tx.repo, organisationId, actor);
      let writeOver = expected;
      if (options.isTwoPersonJudged && (await tx.repo.findStandingApprovalsNeed(organisationId)) >= 2) {
        // Judged against the list as it is saved now, held until this commits.
        const current = await tx.repo.findPolicyList(organisationId, { isLocked: true });
        if (expected !== "any" && current.version !== expected) throw staleVersion(expected, current.version);
        if (isWiderPolicy(readRules(current.rules), rules)) {
          const replaced = await tx.repo.findProposal(organisationId, { isLocked: true });
          const proposal: PolicyProposalRow = {
            id: newProposalId(),
            base_version: current.version,
            rules,
            proposed_by: actor,
            proposed_at: at,
          };
          await tx.repo.insertProposal(organisationId, proposal);
          await tx.recordEvent({
            organisationId,
            actor,
            action: "policy_proposed",
            detail: {
              proposal_id: proposal.id,
              base_version: proposal.base_version,
              ...listDetail(rules, "proposed_rules"),
              ...(replaced ? { replaced_proposal_id: replaced.id } : {}),
            },
          });
          return { status: "pending" as const, proposal: proposalOf(proposal) };
        }
        // What was judged is what is replaced: `*` becomes the version just read.
        writeOver = current.version;
      }
      const saved = await tx.repo.updatePolicyList(organisationId, writeOver, { rules, at, by: actor });
      if (saved === undefined) {
        const current = await tx.repo.findPolicyList(organisationId);
        throw staleVersion(expected, current.version);
      }
      await tx.recordEvent({
        organisationId,
        actor,
        action: "policies_changed",
        detail: { version: saved, ...listDetail(rules, "saved_rules") },
      });
      const dropped = deps.isSoleWriter ? undefined : await tx.repo.deleteProposal(organisationId);
      if (dropped) {
        await tx.recordEvent({
          organisationId,
          actor,
          action: "policy_proposal_discarded",
          reason: "superseded",
          detail: { proposal_id: dropped.id, base_version: dropped.base_version, version: saved },
        });
      }
      return { status: "saved" as const, version: saved };
    });
    if (outcome.status === "pending") return outcome;
    remember(organisationId, outcome.version, rules);
    return {
      status: "saved",
      list: { version: outcome.version, rules, updated_at: at.toISOString(), updated_by: actor },
    };
  }

  return {
    async getPolicies(organisationId: string): Promise<PolicyList> {
      const row = await deps.repo.findPolicyList(organisationId);
      return {
        version: row.version,
        rules: readRules(row.rules),
        updated_at: row.updated_at?.toISOString() ?? null,
        updated_by: row.updated_by,
      };
    },

    /** The list waiting for a second member, if any (hosted, under the two-person rule). */
    async findProposal(organisationId: string): Promise<PolicyProposal | null> {
      const row = await deps.repo.findProposal(organisationId);
      return row ? proposalOf(row) : null;
    },

    /**
     * Replaces the whole list, if its version is still `expected` (else 409 `stale_version` with
     * the version now saved). The change and its audit row commit together. At most 60 saves an
     * hour per member (429 `rate_limited` with `retry_after`). Locally, and hosted under
     * `standing_approvals_need` 1, that is all; under 2 see `savePolicies`.
     */
    async replacePolicies(
      organisationId: string,
      actor: string,
      expected: ExpectedVersion,
      rawRules: unknown,
    ): Promise<PolicyList> {
      const save = await savePolicies(organisationId, actor, expected, rawRules, {
        isTwoPersonJudged: false,
      });
      if (save.status !== "saved") throw new AppError("internal", "the policy was not saved");
      return save.list;
    },

    savePolicies: (organisationId: string, actor: string, expected: ExpectedVersion, rawRules: unknown) =>
      savePolicies(organisationId, actor, expected, rawRules, { isTwoPersonJudged: !deps.isSoleWriter }),

    /**
     * A second member applies the organisation's proposal `proposalId`: in one transaction, if the
     * saved version is still the one it was made from (else it is dropped and the answer is 409
     * `stale_version`); audited as a save naming both members. The member who proposed it gets
     * 409 `second_member_required`; a proposal that is gone (confirmed, discarded, replaced, or
     * another organisation's) is 404, as is one whose proposer is no longer a member who may edit
     * policies (removed or demoted): it is discarded, audited with reason `proposer_gone`.
     */
    async confirmProposal(organisationId: string, actor: string, proposalId: string): Promise<PolicyList> {
      const known = await deps.repo.findProposal(organisationId);
      if (!known || known.id !== proposalId) throw proposalGone();
      if (known.proposed_by === actor) throw secondMemberRequired();
      // A confirmation writes the list into the ledger as a save does: it counts as the confirmer's save.
      await deps.rateLimiter.take(POLICY_SAVES_PER_MEMBER, `${organisationId}:${actor}`);
      const at = deps.now();
      const outcome = await deps.inTransaction(async (tx) => {
        // The list's row before the proposal's, as every transaction here takes them.
        const current = await tx.repo.findPolicyList(organisationId, { isLocked: true });
        const proposal = await tx.repo.findProposal(organisationId, { isLocked: true });
        await requireStillEditor(tx.repo, organisationId, actor);
        // A confirmation that raced this one applied it (or someone discarded or replaced it).
        if (!proposal || proposal.id !== proposalId) throw proposalGone();
        if (proposal.proposed_by === actor) throw secondMemberRequired();
        // The proposal speaks for the member who made it, as a first approval does
        // (grants.service.ts mayStillApprove): once they are gone or may no longer edit policies,
        // it is the first of no one and goes, so one member alone never applies it.
        if (!(await isStillProposer(tx.repo, organisationId, proposal.proposed_by))) {
          await tx.repo.deleteProposal(organisationId);
          await tx.recordEvent({
            organisationId,
            actor,
            action: "policy_proposal_discarded",
            reason: "proposer_gone",
            detail: {
              proposal_id: proposal.id,
              base_version: proposal.base_version,
              proposed_by: proposal.proposed_by,
            },
          });
          return { isGone: true as const };
        }
        const rules = readRules(proposal.rules);
        await tx.repo.deleteProposal(organisationId);
        const saved =
          current.version === proposal.base_version
            ? await tx.repo.updatePolicyList(organisationId, proposal.base_version, { rules, at, by: actor })
            : undefined;
        if (saved === undefined) {
          await tx.recordEvent({
            organisationId,
            actor,
            action: "policy_proposal_discarded",
            reason: "stale_version",
            detail: {
              proposal_id: proposal.id,
              base_version: proposal.base_version,
              version: current.version,
            },
          });
          return { isStale: true as const, version: current.version, base: proposal.base_version };
        }
        await tx.recordEvent({
          organisationId,
          actor,
          action: "policies_changed",
          detail: {
            version: saved,
            ...listDetail(rules, "saved_rules"),
            proposal_id: proposal.id,
            proposed_by: proposal.proposed_by,
            confirmed_by: actor,
          },
        });
        return { isStale: false as const, version: saved, rules };
      });
      // Thrown after the commit: the discard and its audit row stay.
      if ("isGone" in outcome) throw proposalGone();
      if (outcome.isStale) throw staleVersion(outcome.base, outcome.version);
      remember(organisationId, outcome.version, outcome.rules);
      return {
        version: outcome.version,
        rules: outcome.rules,
        updated_at: at.toISOString(),
        updated_by: actor,
      };
    },

    /** Discards the organisation's proposal (404 when none is waiting), audited. */
    async discardProposal(organisationId: string, actor: string): Promise<void> {
      await deps.inTransaction(async (tx) => {
        const dropped = await tx.repo.deleteProposal(organisationId);
        if (!dropped) throw proposalGone();
        await tx.recordEvent({
          organisationId,
          actor,
          action: "policy_proposal_discarded",
          detail: {
            proposal_id: dropped.id,
            base_version: dropped.base_version,
            proposed_by: dropped.proposed_by,
          },
        });
      });
    },

    /** What `rawRules` would have decided for the organisation's calls of the last 7 days. */
    async previewPolicies(organisationId: string, rawRules: unknown): Promise<PolicyPreview> {
      const rules = parsePolicyRules(rawRules);
      // A preview reads up to 100 000 ledger rows and replays them through two lists: one at a
      // time per organisation (and a few per process), so that a member pressing Preview in a
      // loop cannot hold a replica's CPU and memory.
      if (previewing.has(organisationId) || previewing.size >= MAX_PREVIEWS_AT_ONCE) {
        throw new AppError("rate_limited", "a policy preview is already running; try again in a moment", {
          extra: { retry_after: 5 },
        });
      }
      previewing.add(organisationId);
      try {
        const to = deps.now();
        const from = new Date(to.getTime() - PREVIEW_DAYS * 86_400_000);
        const saved = await policyInForce(organisationId);
        const { calls, truncated } = await readRecentCalls(organisationId, from);
        const judged = await readJudgedItems(organisationId, calls);
        // Awaited here, so that the place is freed when the replay ends, not when it starts.
        return await previewPolicy({
          candidate: { rules, compiled: compilePolicy(rules) },
          saved,
          calls,
          from,
          to,
          truncated,
          judgedItems: (row) => judged.get(judgedKey(row.environment, row.item_name)),
        });
      } finally {
        previewing.delete(organisationId);
      }
    },

    /** The rule that decides `call` (the first enabled match), or undefined: today's approvals decide. */
    async decideCall(
      organisationId: string,
      call: PolicyCall,
      knownVersion?: number,
    ): Promise<PolicyDecision | undefined> {
      return decide(await policyInForce(organisationId, knownVersion), call);
    },

    /**
     * Counts the call against its rule's rate limit, in the database (so the limit holds across
     * replicas); a dry run only looks. Answers the seconds until a place frees up when it is full.
     */
    async admitCall(
      organisationId: string,
      decision: PolicyDecision,
      options: { isDryRun?: boolean } = {},
    ): Promise<{ retryAfter: number } | undefined> {
      const limit = bucketOf(organisationId, decision.rule);
      if (!limit) return undefined;
      try {
        if (options.isDryRun) await deps.rateLimiter.check(limit, decision.rule.id);
        else await deps.rateLimiter.take(limit, decision.rule.id);
        return undefined;
      } catch (error) {
        if (error instanceof AppError && error.code === "rate_limited")
          return { retryAfter: Number(error.extra.retry_after) || 1 };
        throw error;
      }
    },

    /** What the cache of compiled lists holds now (lists, and their stored JSON in all). */
    cacheUsage: () => cache.usage(),

    /** Writes a call's policy row: `policy_denied`, `policy_allowed` or `rate_limited`, naming the rule. */
    recordPolicyEvent: (event: AuditEvent) => deps.recordEvent(event),
  };
}

export type PoliciesService = ReturnType<typeof createPoliciesService>;
