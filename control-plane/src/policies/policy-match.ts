// The policy matcher (STYLE "A policy matcher is a pure function"): a list is compiled once per
// version, then `decide(policy, call)` answers the first enabled rule that matches the call, and
// its effect. No I/O, no clock: rate limits and audit rows are the service's.
import { isIdShaped } from "@latch/shared/ids";
import {
  compilePathGlob,
  isHostMatch,
  isPathMatch,
  type MatchMeter,
  nameKey,
  type PathForms,
  type PathGlob,
  pathForms,
  UNREADABLE,
} from "./policy-patterns.ts";
import type { PolicyEffect, PolicyRule } from "./policy-rules.ts";

/** A call as the matcher sees it, built by the control plane from what it trusts. */
export interface PolicyCall {
  /**
   * The calling client's id and its name as the operator issued it or the client registered it
   * (hosted), or the agent id fixed at MCP initialize (local): never a value from the call.
   */
  agentId: string;
  agentName?: string | undefined;
  /** The credential's name, as located. */
  item: string;
  /** Canonical (lowercase) host, as validated. */
  host: string;
  method: string;
  /** The validated path the proxy sends (its query is ignored). */
  path: string;
  environment: string;
}

export interface PolicyDecision {
  rule: PolicyRule;
  effect: PolicyEffect;
  /** The rule's place in the list, from 0. */
  index: number;
  /**
   * Rate-limited allow rules above the deciding one whose paths the call matches only when read
   * loosely (`/v1/search/`, `/V1/search`, `/v1/search;x` for `/v1/search`): each counts the call
   * (`limitingDecisions`), so a respelling never steps past a limit to a broader rule below it.
   */
  respelled?: readonly PolicyDecision[];
}

interface CompiledRule {
  rule: PolicyRule;
  index: number;
  agentIds?: ReadonlySet<string>;
  agentNames?: ReadonlySet<string>;
  items?: ReadonlySet<string>;
  hosts?: readonly string[];
  methods?: ReadonlySet<string>;
  paths?: readonly PathGlob[];
  environments?: ReadonlySet<string>;
  /** Only an allow rule reads paths strictly; deny and ask read them loosely (fail closed). */
  isStrict: boolean;
  /** A rate-limited allow rule with paths: a respelling of them counts against its limit. */
  isRespellable: boolean;
}

/** A list compiled for matching: its enabled rules, in order. */
export interface CompiledPolicy {
  readonly rules: readonly CompiledRule[];
}

/** A hosted client's id (`newId("cli")`), in any letter case. */
export function isClientIdShaped(agent: string): boolean {
  return isIdShaped("cli", agent.trim());
}

/**
 * Compiles a parsed list (policy-rules.ts `parsePolicyRules`): globs and name keys are made here,
 * once; disabled rules are left out.
 */
export function compilePolicy(rules: readonly PolicyRule[]): CompiledPolicy {
  const compiled: CompiledRule[] = [];
  rules.forEach((rule, index) => {
    if (!rule.enabled) return;
    const { agents, items, hosts, methods, paths, environments } = rule.match;
    compiled.push({
      rule,
      index,
      isStrict: rule.effect === "allow",
      isRespellable: rule.effect === "allow" && rule.rate_limit !== undefined && paths !== undefined,
      ...(agents
        ? {
            agentIds: new Set(agents),
            // An entry shaped like a client id names that client alone: a client that registered
            // that id as its name must not match it.
            agentNames: new Set(agents.filter((agent) => !isClientIdShaped(agent)).map(nameKey)),
          }
        : {}),
      ...(items ? { items: new Set(items) } : {}),
      ...(hosts ? { hosts } : {}),
      ...(methods ? { methods: new Set(methods.map((m) => m.toUpperCase())) } : {}),
      ...(paths
        ? {
            paths: paths.map((glob) => {
              const checked = compilePathGlob(glob);
              // parsePolicyRules refused a bad glob already; a stored one that fails matches nothing.
              return checked.ok ? checked.value : { source: glob, strict: [""], loose: [""] };
            }),
          }
        : {}),
      ...(environments ? { environments: new Set(environments) } : {}),
    });
  });
  return { rules: compiled };
}

/** The parts of a call every rule reads, normalised once per call. */
interface PreparedCall {
  host: string;
  method: string;
  forms: PathForms;
  /** The agent's name key, made on first use. */
  agentKey(): string;
}

/** `isLoose`: the paths read loosely whatever the rule's effect (a respelling's count). */
function isMatch(
  rule: CompiledRule,
  call: PolicyCall,
  prepared: PreparedCall,
  meter: MatchMeter,
  isLoose = false,
): boolean {
  meter.steps++;
  if (rule.environments && !rule.environments.has(call.environment)) return false;
  if (rule.items && !rule.items.has(call.item)) return false;
  if (rule.methods && !rule.methods.has(prepared.method)) return false;
  if (rule.hosts && !rule.hosts.some((pattern) => isHostMatch(pattern, prepared.host))) return false;
  if (rule.agentIds && !rule.agentIds.has(call.agentId)) {
    // A name is compared without regard to case or compatibility forms, so that an agent cannot
    // step around a deny rule by respelling the name it registered with.
    if (!rule.agentNames?.has(prepared.agentKey())) return false;
  }
  if (rule.paths) {
    const isStrict = rule.isStrict && !isLoose;
    const segments = isStrict ? prepared.forms.strict : prepared.forms.loose();
    // A path that is not one path when read loosely is every path a deny or ask rule names.
    if (segments === UNREADABLE) return true;
    if (!rule.paths.some((glob) => isPathMatch(isStrict ? glob.strict : glob.loose, segments, meter)))
      return false;
  }
  return true;
}

/**
 * The first enabled rule that matches `call`, or undefined (no rule: today's approvals decide).
 * An allow rule reads the path exactly, so a respelling of a rate-limited allow rule's path falls
 * to the rules below it: there it is `respelled` on the decision, counted by that rule's limit too,
 * and where no rule below decides, the rate-limited rule decides it as `ask` (today's approvals,
 * counted), so that `/v1/search/` is neither sent unlimited nor let past the limit of `/v1/search`.
 * `meter` counts the work done (a step per rule judged and per path segment compared): a list
 * that parsePolicyRules accepted takes a few million steps at most (policy-patterns.ts).
 * @example decide(compilePolicy([{ id: "r", name: "r", effect: "deny", match: {}, enabled: true }]), call)?.effect // "deny"
 */
export function decide(
  policy: CompiledPolicy,
  call: PolicyCall,
  meter: MatchMeter = { steps: 0 },
): PolicyDecision | undefined {
  if (policy.rules.length === 0) return undefined;
  // Hosts are case-insensitive (RFC 4343) and the validated host is lowercase already; methods are
  // uppercase in every call and in every parsed rule. The matcher does not lean on its caller.
  const host = call.host.toLowerCase().replace(/\.$/, "");
  let agentKey: string | undefined;
  const prepared: PreparedCall = {
    host,
    method: call.method.toUpperCase(),
    forms: pathForms(call.path),
    agentKey: () => {
      agentKey ??= nameKey(call.agentName ?? call.agentId);
      return agentKey;
    },
  };
  const respelled: PolicyDecision[] = [];
  for (const compiled of policy.rules) {
    if (isMatch(compiled, call, prepared, meter)) {
      const decision = { rule: compiled.rule, effect: compiled.rule.effect, index: compiled.index };
      return respelled.length > 0 ? { ...decision, respelled } : decision;
    }
    if (compiled.isRespellable && isMatch(compiled, call, prepared, meter, true))
      respelled.push({ rule: compiled.rule, effect: "ask", index: compiled.index });
  }
  const [first, ...others] = respelled;
  if (first === undefined) return undefined;
  return others.length > 0 ? { ...first, respelled: others } : first;
}

/** One view of a call (a credential it uses, a path it is known by) and the rule that decides it. */
export interface PolicyView<D extends Pick<PolicyDecision, "effect" | "index">> {
  decision: D | undefined;
  /** The view of the credential the call names (or, found by host, the one picked). */
  isLocated: boolean;
}

/**
 * The strictest answer over a call's views (tools/http-request.tool.ts `decidePolicy` says which
 * views a call has, and why). A deny on any view refuses the call; else an ask on any view asks;
 * else an allow holds only where it decides the located credential on every path: an allow never
 * sends what it was not written for, while a view that no rule names does not take back the
 * located credential's allow. Among rules of one effect, the one earliest in the list decides.
 * The policy preview replays an audited call through this same function, so the two agree.
 * @example strictestDecision([{ decision: deny, isLocated: false }, { decision: allow, isLocated: true }]) // deny
 */
export function strictestDecision<D extends Pick<PolicyDecision, "effect" | "index">>(
  views: readonly PolicyView<D>[],
): D | undefined {
  const earliest = (decisions: (D | undefined)[], effect: PolicyEffect) =>
    decisions
      .filter((decision): decision is D => decision?.effect === effect)
      .reduce<D | undefined>(
        (first, decision) => (first === undefined || decision.index < first.index ? decision : first),
        undefined,
      );
  const all = views.map((view) => view.decision);
  const refusing = earliest(all, "deny") ?? earliest(all, "ask");
  if (refusing) return refusing;
  const onLocated = views.filter((view) => view.isLocated).map((view) => view.decision);
  return onLocated.length > 0 && onLocated.every((decision) => decision?.effect === "allow")
    ? earliest(onLocated, "allow")
    : undefined;
}

/**
 * Every rule that decided some view of a call and carries a rate limit, once each, earliest in the
 * list first: each one counts the call, not only the rule `strictestDecision` names. Else a limit
 * on the path a provider's rename sends (or on a sibling credential) would never count when
 * another rule decides the path the agent named. So does every rate-limited allow rule a view was
 * a respelling of (`respelled`, see `decide`). The preview replays the same.
 * @example limitingDecisions([{ decision: tracks, isLocated: true }, { decision: itemsLimited, isLocated: true }]) // [itemsLimited]
 */
export function limitingDecisions<
  D extends Pick<PolicyDecision, "rule" | "effect" | "index"> & { respelled?: readonly D[] },
>(views: readonly PolicyView<D>[]): D[] {
  const limiting = new Map<number, D>();
  for (const { decision } of views) {
    for (const counted of decision ? [decision, ...(decision.respelled ?? [])] : []) {
      if (counted.rule.rate_limit && !limiting.has(counted.index)) limiting.set(counted.index, counted);
    }
  }
  return [...limiting.values()].sort((a, b) => a.index - b.index);
}
