// Whether a new policy list could let through a call the saved list did not (DECISIONS "Teams",
// two-person rule): under `standing_approvals_need` 2 such a list is a proposal a second member
// confirms. An `allow` rule sends calls with no approval at all, and a `deny` rule (or a rate
// limit) refuses calls even where a standing approval covers them: taking either away, or
// shadowing it, gives standing access, which one admin must not do alone. An `ask` rule is the
// same as no rule for the call path (today's approvals decide).
//
// Pure, syntactic and conservative. Over the enabled rules (a disabled rule is inert), a list is
// *not* wider only when it is the saved list after edits each of which can only stop a call sooner:
// - a `deny` rule inserted anywhere;
// - an `ask` rule inserted where no `deny` rule and no rate-limited rule follows it (else the calls
//   it catches were refused below it, and now go to the approvals);
// - an `allow` rule without a rate limit removed (or disabled);
// - an `ask` rule without a rate limit removed where no `allow` rule follows it, nor an `allow`
//   rule naming `items` precedes it;
// - names changed.
// A call is judged in several views (each credential its plan uses, each path it is known by;
// policy-match.ts `strictestDecision`), and an ask on any view asks: an allow rule above the ask
// rule may decide the located credential while the ask rule decides a sibling (`allow SPOTIFY`
// above `ask SPOTIFY_REFRESH`), so removing the ask rule would let that call go with no approval.
// An allow holds only when it decides the located credential on every path, so a view it leaves
// to a rule below differs from one it decides by its credential alone: an allow rule that names
// no `items` decides a sibling's view wherever it decides the located credential's.
// Anything else counts as wider: a `deny` rule removed, narrowed or moved, a rate-limited rule
// removed or its limit changed, a reordered match list.
import { canonicalJson } from "@latch/shared/ledger/canonical-json";
import type { PolicyRule } from "./policy-rules.ts";

interface JudgedRule {
  effect: PolicyRule["effect"];
  hasRateLimit: boolean;
  /** It names credentials: it may decide one view of a call (its credential) and not another. */
  isPerView: boolean;
  /** What the rule does, by content (its name aside). */
  key: string;
}

function judged(rules: readonly PolicyRule[]): JudgedRule[] {
  return rules
    .filter((rule) => rule.enabled)
    .map((rule) => ({
      effect: rule.effect,
      hasRateLimit: rule.rate_limit !== undefined,
      isPerView: rule.match.items !== undefined,
      // A rate limit is counted under its rule's id (policies.service.ts `bucketOf`): a new id on a
      // limited rule starts its count again, so there the id is part of what the rule does.
      key: canonicalJson({
        effect: rule.effect,
        match: rule.match,
        rate_limit: rule.rate_limit ?? null,
        ...(rule.rate_limit ? { id: rule.id } : {}),
      }),
    }));
}

/** True when `next` may let through a call `saved` refuses or leaves to an approval. */
export function isWiderPolicy(saved: readonly PolicyRule[], next: readonly PolicyRule[]): boolean {
  const before = judged(saved);
  const after = judged(next);
  // Removable from the saved list: a plain allow rule (its calls were allowed already; below it
  // they are allowed, asked or refused), a plain ask rule with no allow rule below it and no allow
  // rule above it that could decide another view of the same call.
  const isRemovable = before.map((rule, index) => {
    if (rule.hasRateLimit) return false;
    if (rule.effect === "allow") return true;
    if (rule.effect === "ask")
      return (
        !before.slice(index + 1).some((r) => r.effect === "allow") &&
        !before.slice(0, index).some((r) => r.effect === "allow" && r.isPerView)
      );
    return false;
  });
  // Insertable into the new list: a deny rule; an ask rule with no deny or rate-limited rule below.
  const isInsertable = after.map((rule, index) => {
    if (rule.effect === "deny") return true;
    if (rule.effect === "ask")
      return !after.slice(index + 1).some((r) => r.effect === "deny" || r.hasRateLimit);
    return false;
  });
  // fits[i][j]: after[j..] is before[i..] by those edits alone (at most 501 x 501 cells).
  const width = after.length + 1;
  const fits = new Uint8Array((before.length + 1) * width);
  for (let i = before.length; i >= 0; i--) {
    for (let j = after.length; j >= 0; j--) {
      const here = i * width + j;
      if (i === before.length && j === after.length) {
        fits[here] = 1;
        continue;
      }
      const kept =
        i < before.length && j < after.length && before[i]!.key === after[j]!.key && fits[here + width + 1];
      const removed = i < before.length && isRemovable[i] && fits[here + width];
      const inserted = j < after.length && isInsertable[j] && fits[here + 1];
      fits[here] = kept || removed || inserted ? 1 : 0;
    }
  }
  return fits[0] !== 1;
}
