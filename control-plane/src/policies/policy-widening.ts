// Whether a new policy list could decide `allow` for a call the saved list did not (DECISIONS
// "Teams", two-person rule): under `standing_approvals_need` 2 such a list is a proposal a second
// member confirms, since an allow rule sends calls with no approval at all and one admin must not
// give standing access alone. Pure, syntactic and conservative: a list is *not* wider only when it
// is the saved list after edits that cannot let a call through (a deny or ask rule inserted, an
// allow rule removed or disabled, rules below every enabled allow rule changed, names changed);
// anything else, a tighter rate limit or a reordered match list included, counts as wider.
import { canonicalJson } from "@latch/shared/ledger/canonical-json";
import type { PolicyRule } from "./policy-rules.ts";

/**
 * The rules that decide which calls are allowed, each by its content: the enabled rules down to
 * the last enabled allow rule (a disabled rule is inert; a rule below every allow rule can only
 * ask, deny or leave the call to the approvals, so it allows nothing).
 */
function allowingPrefix(rules: readonly PolicyRule[]) {
  const enabled = rules.filter((rule) => rule.enabled);
  let last = -1;
  enabled.forEach((rule, index) => {
    if (rule.effect === "allow") last = index;
  });
  return enabled.slice(0, last + 1).map((rule) => ({
    isAllow: rule.effect === "allow",
    hasRateLimit: rule.rate_limit !== undefined,
    // A rate limit is counted under its rule's id (policies.service.ts `bucketOf`): a new id on a
    // limited allow rule starts its count again, so there the id is part of what the rule does.
    key: canonicalJson({
      effect: rule.effect,
      match: rule.match,
      rate_limit: rule.rate_limit ?? null,
      ...(rule.effect === "allow" && rule.rate_limit ? { id: rule.id } : {}),
    }),
  }));
}

/**
 * True when `next` may allow a call `saved` does not. `next` is not wider only if its allowing
 * prefix is (the start of) the saved one's with allow rules taken out and deny or ask rules put in: a call a
 * removed allow rule decided was allowed already, and an inserted rule can only stop a call
 * earlier. A rate-limited allow rule counts as removable only when no allow rule follows it, since
 * the calls it refused over its limit would otherwise reach that later rule.
 */
export function isWiderPolicy(saved: readonly PolicyRule[], next: readonly PolicyRule[]): boolean {
  const before = allowingPrefix(saved);
  const after = allowingPrefix(next);
  const isRemovable = before.map(
    (rule, index) => rule.isAllow && (!rule.hasRateLimit || !before.slice(index + 1).some((r) => r.isAllow)),
  );
  // fits[i][j]: after[j..] is before[i..] by those edits alone, or before[i..]'s rules are below
  // every allow rule the new list kept (at most 501 x 501 cells).
  const width = after.length + 1;
  const fits = new Uint8Array((before.length + 1) * width);
  for (let i = before.length; i >= 0; i--) {
    for (let j = after.length; j >= 0; j--) {
      const here = i * width + j;
      // Nothing of the new prefix left: whatever the saved one has further down, no call reaches
      // an allow rule of the new list there.
      if (j === after.length) {
        fits[here] = 1;
        continue;
      }
      const kept =
        i < before.length && j < after.length && before[i]!.key === after[j]!.key && fits[here + width + 1];
      const removed = i < before.length && isRemovable[i] && fits[here + width];
      const inserted = j < after.length && !after[j]!.isAllow && fits[here + 1];
      fits[here] = kept || removed || inserted ? 1 : 0;
    }
  }
  return fits[0] !== 1;
}
