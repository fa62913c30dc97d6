// An organisation's policy rules as the API, the CLI and the console write them (DECISIONS
// "Policies"): the zod shape, and the one parser every surface uses, whose refusal names the rule
// (its place and id) and the field, e.g. "rule 3 (block-admin): match.paths[0]: a path glob starts
// with /".
import { randomBytes } from "node:crypto";
import { AppError } from "@latch/shared/errors";
import { isIdShaped } from "@latch/shared/ids";
import { HTTP_METHODS } from "@latch/shared/requests/methods";
import { safeString } from "@latch/shared/text/safe-string";
import { z } from "zod";
import { ITEM_NAME } from "../items/items.schemas.ts";
import {
  checkHostPattern,
  compilePathGlob,
  globCost,
  MAX_LIST_FLOATING_SEGMENTS,
  MAX_LIST_GLOB_SEGMENTS,
} from "./policy-patterns.ts";

export const POLICY_EFFECTS = ["allow", "ask", "deny"] as const;
export type PolicyEffect = (typeof POLICY_EFFECTS)[number];

/** DECISIONS: at most 500 rules in a list. */
export const MAX_RULES = 500;
/** Entries in one match list: enough for any real list, bounded so matching stays cheap. */
export const MAX_MATCH_ENTRIES = 100;
export const RULE_ID = /^[a-z0-9-]{1,40}$/;
const RATE_WINDOWS = ["minute", "hour"] as const;

const entries = <T extends z.ZodType>(entry: T) => z.array(entry).max(MAX_MATCH_ENTRIES);

/** What a call must be for the rule to decide it; a field left out matches any call. */
export const policyMatch = z
  .strictObject({
    agents: entries(safeString().min(1).max(128))
      .optional()
      .describe(
        "client ids (cli_...) or names as issued or registered; a name matches without regard to case",
      ),
    items: entries(z.string().regex(ITEM_NAME, "is not a credential name (e.g. GITHUB_TOKEN)"))
      .optional()
      .describe("credential names, exactly"),
    hosts: entries(safeString().min(1).max(256))
      .optional()
      .describe("exact hosts, or *.suffix for every name under a suffix"),
    methods: entries(
      z
        .string()
        .transform((m) => m.toUpperCase())
        .pipe(z.enum(HTTP_METHODS)),
    )
      .optional()
      .describe("HTTP methods (GET, POST, PUT, PATCH, DELETE)"),
    paths: entries(safeString().min(1).max(512))
      .optional()
      .describe("path globs: start with /, * is one segment, ** any number; the query is not matched"),
    environments: entries(safeString().min(1).max(64)).optional().describe("environment names, exactly"),
  })
  .describe("all given fields must match (any entry of each list)");

export const policyRateLimit = z.strictObject({
  calls: z.number().int().min(1).max(100_000).describe("calls allowed in each window"),
  per: z.enum(RATE_WINDOWS),
});

/** One rule as written: `id` and `name` may be left out (the server makes them), `enabled` too (true). */
export const policyRuleInput = z.strictObject({
  id: z.string().regex(RULE_ID, "is 1 to 40 characters: lowercase letters, digits and -").optional(),
  name: safeString().min(1).max(100).optional(),
  effect: z.enum(POLICY_EFFECTS),
  match: policyMatch.default({}),
  rate_limit: policyRateLimit.optional(),
  enabled: z.boolean().default(true),
});

/** A rule as stored and answered: every field present. */
export const policyRule = z.object({
  id: z.string(),
  name: z.string(),
  effect: z.enum(POLICY_EFFECTS),
  match: z.object({
    agents: z.array(z.string()).optional(),
    items: z.array(z.string()).optional(),
    hosts: z.array(z.string()).optional(),
    methods: z.array(z.enum(HTTP_METHODS)).optional(),
    paths: z.array(z.string()).optional(),
    environments: z.array(z.string()).optional(),
  }),
  rate_limit: policyRateLimit.optional(),
  enabled: z.boolean(),
});
export type PolicyRule = z.infer<typeof policyRule>;
export type PolicyMatch = PolicyRule["match"];

const MATCH_FIELDS = ["agents", "items", "hosts", "methods", "paths", "environments"] as const;

/** "match.paths[0]" from zod's path ["match", "paths", 0]. */
function fieldName(path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (name, key) =>
      typeof key === "number" ? `${name}[${key}]` : name ? `${name}.${String(key)}` : String(key),
    "",
  );
}

function refusal(index: number, id: string | undefined, field: string, reason: string): AppError {
  const rule = id ? `rule ${index + 1} (${id})` : `rule ${index + 1}`;
  return new AppError("invalid_policy", `${rule}: ${field ? `${field}: ` : ""}${reason}`, {
    extra: { rule_index: index, ...(id ? { rule_id: id } : {}), ...(field ? { field } : {}) },
  });
}

/** A server-made rule id: the name's words where they fit the id's form, then a random tail. */
function newRuleId(name: string | undefined, taken: ReadonlySet<string>): string {
  const stem = (name ?? "rule")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 30);
  for (;;) {
    const id = `${stem || "rule"}-${randomBytes(4).toString("hex")}`;
    if (!taken.has(id)) return id;
  }
}

/**
 * Parses a whole list as a caller sent it: each rule's shape, then what zod cannot say (a host
 * pattern, a glob, an empty match list, a rate limit on a deny rule, a repeated id). Answers the
 * rules as stored (ids made, hosts and client ids lowercased, methods uppercased), or throws 400 `invalid_policy`
 * naming the rule and the field.
 */
export function parsePolicyRules(raw: unknown): PolicyRule[] {
  if (!Array.isArray(raw)) throw new AppError("invalid_policy", "rules must be a list of rules");
  if (raw.length > MAX_RULES)
    throw new AppError(
      "invalid_policy",
      `a policy holds at most ${MAX_RULES} rules; this one has ${raw.length}`,
    );
  const parsed = raw.map((candidate, index) => {
    const result = policyRuleInput.safeParse(candidate);
    const id =
      candidate && typeof candidate === "object" && typeof (candidate as { id?: unknown }).id === "string"
        ? (candidate as { id: string }).id
        : undefined;
    if (!result.success) {
      const issue = result.error.issues[0]!;
      const isUnknownKey = issue.code === "unrecognized_keys";
      const reason = isUnknownKey
        ? `unknown field ${issue.keys.map((k) => JSON.stringify(k.slice(0, 40))).join(", ")}`
        : issue.message;
      // An id is named only when it has the id's form: the message must not echo arbitrary text.
      return refusal(index, id && RULE_ID.test(id) ? id : undefined, fieldName(issue.path), reason);
    }
    return result.data;
  });
  const firstError = parsed.find((p): p is AppError => p instanceof AppError);
  if (firstError) throw firstError;
  const inputs = parsed as z.infer<typeof policyRuleInput>[];

  const taken = new Set(inputs.flatMap((rule) => (rule.id ? [rule.id] : [])));
  const seen = new Set<string>();
  // What matching the list's globs costs, summed over the list (policy-patterns.ts): bounded so
  // that no list, however written, holds a replica's event loop on a long path.
  let globSegments = 0;
  let floatingSegments = 0;
  return inputs.map((input, index) => {
    const id = input.id ?? newRuleId(input.name, taken);
    taken.add(id);
    if (seen.has(id)) throw refusal(index, id, "id", "another rule has this id; ids are unique");
    seen.add(id);
    const match: PolicyMatch = {};
    for (const field of MATCH_FIELDS) {
      const list = input.match[field];
      if (list === undefined) continue;
      // An empty list matches no call: the rule could never decide anything.
      if (list.length === 0)
        throw refusal(
          index,
          id,
          `match.${field}`,
          "an empty list matches no call; leave the field out to match any",
        );
      if (field === "hosts") {
        match.hosts = list.map((host, at) => {
          const checked = checkHostPattern(host);
          if (!checked.ok) throw refusal(index, id, `match.hosts[${at}]`, checked.message);
          return checked.value;
        });
      } else if (field === "paths") {
        for (const [at, glob] of list.entries()) {
          const checked = compilePathGlob(glob);
          if (!checked.ok) throw refusal(index, id, `match.paths[${at}]`, checked.message);
          const cost = globCost(checked.value);
          globSegments += cost.segments;
          floatingSegments += cost.floating;
          if (globSegments > MAX_LIST_GLOB_SEGMENTS)
            throw refusal(
              index,
              id,
              `match.paths[${at}]`,
              `a policy's path globs hold at most ${MAX_LIST_GLOB_SEGMENTS} segments in all`,
            );
          if (floatingSegments > MAX_LIST_FLOATING_SEGMENTS)
            throw refusal(
              index,
              id,
              `match.paths[${at}]`,
              `a policy's path globs hold at most ${MAX_LIST_FLOATING_SEGMENTS} segments between two ** in all (each is searched for along the whole path); anchor a glob at its start or end instead, e.g. /admin/** or /**/admin`,
            );
        }
        match.paths = [...list];
      } else if (field === "methods") {
        match.methods = [...new Set(input.match.methods)];
      } else if (field === "agents") {
        // A client id is matched exactly, as ids are made (lowercase): one written in capitals or
        // with spaces around it is stored as the id it names, as hosts are stored lowercase, else
        // the rule would be saved and never match its client (policy-match.ts compares ids exactly).
        match.agents = list.map((agent) =>
          isIdShaped("cli", agent.trim()) ? agent.trim().toLowerCase() : agent,
        );
      } else {
        match[field] = [...list];
      }
    }
    if (input.rate_limit && input.effect === "deny")
      throw refusal(
        index,
        id,
        "rate_limit",
        "a deny rule sends nothing, so a rate limit on it would never count",
      );
    return {
      id,
      name: input.name ?? id,
      effect: input.effect,
      match,
      ...(input.rate_limit ? { rate_limit: input.rate_limit } : {}),
      enabled: input.enabled,
    };
  });
}

/** The seconds of a rate limit's window. */
export function rateWindowMs(limit: NonNullable<PolicyRule["rate_limit"]>): number {
  return limit.per === "minute" ? 60_000 : 3_600_000;
}
