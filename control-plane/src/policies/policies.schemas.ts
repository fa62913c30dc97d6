// The policy routes' shapes (DECISIONS "Policies"): the list as answered, the body of PUT and of a
// preview, and the preview's answer. A body's rules are judged by policy-rules.ts
// `parsePolicyRules`, whose refusal names the rule and the field; the schema documents them.
import { z } from "zod";
import { policyRule, policyRuleInput } from "./policy-rules.ts";

export const policyList = z.object({
  version: z.number().int().describe("0 until a list is first saved; PUT sends it back in If-Match"),
  rules: z.array(policyRule),
  updated_at: z.string().nullable(),
  updated_by: z.string().nullable().describe("who saved this version (operator:<id>, or operator locally)"),
});

/** PUT's answer: the list saved, and what it trusts that its author may not have meant. */
export const savedPolicyList = policyList.extend({
  warnings: z
    .array(z.string())
    .describe("one sentence per enabled allow rule that names an agent by name (policy-warnings.ts)"),
});

/** A list waiting for a second member under the two-person rule (hosted, DECISIONS "Teams"). */
export const policyProposal = z.object({
  id: z.string(),
  base_version: z
    .number()
    .int()
    .describe("the version it was made from; confirming it applies it only while that is still saved"),
  rules: z.array(policyRule),
  proposed_by: z.string().describe("who proposed it (operator:<id>)"),
  proposed_at: z.string(),
});

/** GET's answer, hosted: the list and the proposal waiting for a second member, if any. */
export const policyListWithProposal = policyList.extend({
  proposal: policyProposal
    .nullable()
    .optional()
    .describe(
      "hosted: a list that may allow more than the saved one, waiting for a second member (standing_approvals_need 2)",
    ),
});

/** PUT's answer when the list is kept as a proposal (202): nothing applied yet. */
export const pendingPolicyList = z.object({
  status: z.literal("pending"),
  approvals: z.literal("1 of 2"),
  proposal: policyProposal,
});

export const confirmProposalBody = z.object({
  proposal_id: z.string().min(1).max(64).describe("the proposal's id, as GET /api/policies answered it"),
});

/** `{rules}`, judged by the service (its refusal names the rule and the field). */
export const policyRulesBody = z.object({
  rules: z.unknown().describe("the whole ordered list (first match decides); at most 500 rules"),
});

/** The same body as /openapi.json documents it: the rules' shape (policy-rules.ts). */
export const policyRulesBodyDoc = z.object({
  rules: z
    .array(policyRuleInput)
    .max(500)
    .describe("the whole ordered list (first match decides); at most 500 rules"),
});

export const policyPreviewAnswer = z.object({
  from: z.string(),
  to: z.string(),
  calls: z.number().int().describe("audited calls of the window replayed"),
  truncated: z
    .boolean()
    .describe(
      "not every call of the window was replayed: more than 100 000 (the newest were kept), or more matching work than a preview does (the oldest were replayed)",
    ),
  totals: z.object({
    allow: z.number().int(),
    ask: z.number().int(),
    deny: z.number().int(),
    rate_limited: z.number().int(),
    none: z.number().int().describe("matched by no rule: today's approvals decide"),
  }),
  changed: z.number().int().describe("calls whose decision differs from the saved list's"),
  rules: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      effect: z.enum(["allow", "ask", "deny"]),
      enabled: z.boolean(),
      calls: z.number().int(),
      rate_limited: z.number().int(),
    }),
  ),
});

export const ifMatchHeaders = z.looseObject({
  "if-match": z
    .string()
    .optional()
    .describe('the version being replaced, as GET answered it in ETag ("3"), or * for any'),
});
