// What a policy list would have decided for the calls an organisation made (POST
// /api/policies/preview, `vault policy preview FILE`): each audited call of the window is replayed
// through the matcher, in order, with each rule's rate limit counted as it would have been. Pure:
// the service reads the rows. The replay gives the event loop back every slice of work and stops
// at a bound of work in all, so that no list, however costly, holds a replica.
import type { AuditedCall } from "../audit/audit.repo.ts";
import {
  type CompiledPolicy,
  decide,
  limitingDecisions,
  type PolicyCall,
  strictestDecision,
} from "./policy-match.ts";
import type { MatchMeter } from "./policy-patterns.ts";
import { type PolicyEffect, type PolicyRule, rateWindowMs } from "./policy-rules.ts";

/**
 * The audit actions that record one http_request attempt each, with its call (method, host, path).
 * `policy_allowed` is left out: it records the decision of a call whose own row follows.
 */
export const CALL_ACTIONS = [
  "http_request",
  "http_request_refused",
  "http_request_failed",
  "call_not_sent",
  "call_outcome_unknown",
  "grant_requested",
  "policy_denied",
  "rate_limited",
] as const;

/** The preview's window (DECISIONS "Policies": the last 7 days). */
export const PREVIEW_DAYS = 7;
/** Calls replayed at most; beyond it the preview says it is `truncated` (the newest are kept). */
export const MAX_PREVIEW_CALLS = 100_000;
/**
 * Matcher steps (policy-match.ts `decide`) between two turns given back to the event loop: about
 * a millisecond of work. One decision is at most about a million steps (policy-patterns.ts), so the
 * loop is never held for more than a few milliseconds.
 */
export const PREVIEW_SLICE_STEPS = 200_000;
/**
 * Matcher steps of one preview in all (some seconds of one core); past them the replay stops and
 * says it is `truncated`. An ordinary list over 100 000 calls takes a small part of it.
 */
export const MAX_PREVIEW_STEPS = 1_000_000_000;

/** How a replay shares the event loop; tests make it small. */
export interface PreviewWork {
  sliceSteps: number;
  maxSteps: number;
  /** Gives the event loop its turn (setImmediate: I/O waiting runs first). */
  pause(): Promise<void>;
}

const defaultWork: PreviewWork = {
  sliceSteps: PREVIEW_SLICE_STEPS,
  maxSteps: MAX_PREVIEW_STEPS,
  pause: () => new Promise((resolve) => setImmediate(resolve)),
};

export interface RulePreview {
  id: string;
  name: string;
  effect: PolicyEffect;
  enabled: boolean;
  /** Calls this rule would have decided (the first match), rate-limited ones included. */
  calls: number;
  /** Of those, the calls over its rate limit. */
  rate_limited: number;
}

export interface PolicyPreview {
  from: string;
  to: string;
  /** Audited calls replayed. */
  calls: number;
  /** Not every call of the window was replayed: over 100 000 (the oldest left out), or over the work bound (the newest). */
  truncated: boolean;
  /** How the calls would have gone: by effect, over a rate limit, or to today's approvals (none). */
  totals: Record<PolicyEffect | "rate_limited" | "none", number>;
  /** Calls whose decision differs from the saved list's. */
  changed: number;
  rules: RulePreview[];
}

/** A replayed call: every path and every credential enforcement judged it by. */
export type ReplayedCall = PolicyCall & { paths: string[]; items: readonly string[] };

/**
 * The call an audit row records, or undefined when it records no call a rule could judge. A call
 * sent by another path than it asked for (a provider's rename) is known by both: its row keeps
 * the one asked as `requested_path`, and enforcement judged both (`strictestDecision`). A row
 * names the credential the call named; `judgedItems` gives every credential a call with it is
 * judged by (the provider's refresh token and client secret beside it, token-plan.ts
 * `findPlanItems`), the named one first.
 */
export function callOfAuditRow(
  row: AuditedCall,
  judgedItems?: (row: AuditedCall & { item_name: string }) => readonly string[] | undefined,
): ReplayedCall | undefined {
  const agentId = /^agent:(.+)$/.exec(row.actor)?.[1];
  const { method, path, requested_path: requested } = row.detail;
  if (!agentId || !row.item_name || !row.host || typeof method !== "string" || typeof path !== "string")
    return undefined;
  return {
    agentId,
    agentName: row.actor_name ?? undefined,
    item: row.item_name,
    host: row.host,
    method,
    path,
    paths: typeof requested === "string" && requested !== path ? [requested, path] : [path],
    items: judgedItems?.({ ...row, item_name: row.item_name }) ?? [row.item_name],
    environment: row.environment ?? "",
  };
}

/**
 * A rule's rate limit replayed: the times of the calls it let through within its window.
 * `hasRoom`: whether a call at `at` would find a place; `take`: the call takes it.
 */
function replayedLimit(calls: number, windowMs: number) {
  const times: number[] = [];
  let head = 0;
  return {
    hasRoom(at: number): boolean {
      while (head < times.length && times[head]! <= at - windowMs) head++;
      return times.length - head < calls;
    },
    take(at: number): void {
      times.push(at);
    },
  };
}

type Outcome = PolicyEffect | "rate_limited" | "none";

/**
 * The audit action of a call no approval covered: it asked for one and was never sent
 * (tools/http-request.tool.ts). Every other call row was sent, or refused after an approval or an
 * allow rule let it through (a rate limit, a proxy refusal), or by a deny rule.
 */
const UNAPPROVED_CALL_ACTION = "grant_requested";

/** Replays calls through one list, each rule's rate limit counted as the calls go by. */
function replayer(policy: CompiledPolicy, meter: MatchMeter) {
  const limits = new Map<number, ReturnType<typeof replayedLimit>>();
  /**
   * `isApproved`: false for a call whose row asked for an approval (none covered it); any other
   * call is taken as let through by the approval or the allow rule it was made under.
   */
  return (call: ReplayedCall, at: Date, isApproved: boolean): { outcome: Outcome; index?: number } => {
    // As tools/http-request.tool.ts judges a call: each credential on each path.
    const views = call.items.flatMap((item) =>
      call.paths.map((path) => ({
        decision: decide(policy, { ...call, item, path }, meter),
        isLocated: item === call.item,
      })),
    );
    const decision = strictestDecision(views);
    if (decision?.effect === "deny") return { outcome: "deny", index: decision.index };
    // A call no allow rule decides is sent only under an approval, and a limit counts only calls
    // that would be sent (tools/http-request.tool.ts): one no approval covered waited in the inbox,
    // taking no place under any rule's limit, and is never refused by one.
    if (decision?.effect !== "allow" && !isApproved) {
      return decision ? { outcome: decision.effect, index: decision.index } : { outcome: "none" };
    }
    // Every rule that decided a view and has a rate limit counts the call; the first (earliest)
    // that is full refuses it, and then none takes a place (tools/http-request.tool.ts does the same).
    const counted = limitingDecisions(views).map((limiting) => {
      const limit = limiting.rule.rate_limit!;
      let replayed = limits.get(limiting.index);
      if (!replayed) {
        replayed = replayedLimit(limit.calls, rateWindowMs(limit));
        limits.set(limiting.index, replayed);
      }
      return { index: limiting.index, replayed };
    });
    const full = counted.find(({ replayed }) => !replayed.hasRoom(at.getTime()));
    if (full) return { outcome: "rate_limited", index: full.index };
    for (const { replayed } of counted) replayed.take(at.getTime());
    if (!decision) return { outcome: "none" };
    return { outcome: decision.effect, index: decision.index };
  };
}

/**
 * Replays `calls` (oldest first) through `candidate`, and through `saved` to count what changes,
 * giving the event loop its turn after each slice of work.
 */
export async function previewPolicy(input: {
  candidate: { rules: readonly PolicyRule[]; compiled: CompiledPolicy };
  saved: CompiledPolicy;
  calls: readonly AuditedCall[];
  from: Date;
  to: Date;
  truncated: boolean;
  /** Every credential a call with the row's is judged by (callOfAuditRow); the row's alone without. */
  judgedItems?: (row: AuditedCall & { item_name: string }) => readonly string[] | undefined;
  work?: PreviewWork;
}): Promise<PolicyPreview> {
  const work = input.work ?? defaultWork;
  const rules = input.candidate.rules.map((rule) => ({
    id: rule.id,
    name: rule.name,
    effect: rule.effect,
    enabled: rule.enabled,
    calls: 0,
    rate_limited: 0,
  }));
  const meter: MatchMeter = { steps: 0 };
  const candidate = replayer(input.candidate.compiled, meter);
  const saved = replayer(input.saved, meter);
  const totals = { allow: 0, ask: 0, deny: 0, rate_limited: 0, none: 0 };
  let replayed = 0;
  let changed = 0;
  let truncated = input.truncated;
  let sliceEnd = work.sliceSteps;
  for (const row of input.calls) {
    // A row costs a step even when it records no call, so that a slice always ends.
    meter.steps++;
    if (meter.steps >= sliceEnd) {
      if (meter.steps >= work.maxSteps) {
        truncated = true;
        break;
      }
      await work.pause();
      sliceEnd = meter.steps + work.sliceSteps;
    }
    const call = callOfAuditRow(row, input.judgedItems);
    if (!call) continue;
    replayed++;
    const isApproved = row.action !== UNAPPROVED_CALL_ACTION;
    const { outcome, index } = candidate(call, row.at, isApproved);
    if (saved(call, row.at, isApproved).outcome !== outcome) changed++;
    totals[outcome]++;
    if (index === undefined) continue;
    const counted = rules[index]!;
    counted.calls++;
    if (outcome === "rate_limited") counted.rate_limited++;
  }
  return {
    from: input.from.toISOString(),
    to: input.to.toISOString(),
    calls: replayed,
    truncated,
    totals,
    changed,
    rules,
  };
}
