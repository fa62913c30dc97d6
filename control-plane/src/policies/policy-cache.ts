// The compiled policy lists a process keeps (policies.service.ts), least recently used first out,
// bounded by count and by the size of the lists as stored: a list of 500 rules with 100 entries in
// each match list is 1 MiB of JSON and several MB parsed and compiled, so a count alone would let
// a few tenants' lists (previewed or saved on every replica) hold gigabytes of every replica's heap.
import type { CompiledPolicy } from "./policy-match.ts";

/** Organisations whose compiled list a process keeps. */
export const MAX_CACHED_LISTS = 10_000;
/**
 * The stored JSON of the lists a process keeps, in all (UTF-16 code units, as `JSON.stringify`
 * counts them). Parsed and compiled, a list takes about 5 to 8 times its JSON on the heap
 * (measured with 500 rules of 100 agents, items and environments each), so the cache holds at
 * most some 250 MB however its lists are written; a list over the whole budget is never kept.
 */
export const MAX_CACHED_JSON = 32 * 1024 * 1024;

export interface CachedPolicy {
  version: number;
  compiled: CompiledPolicy;
  /** The stored list's JSON length: what it weighs in the budget. */
  size: number;
}

/**
 * A least-recently-used map from organisation to its compiled list. `budget` is for tests; the
 * service uses the defaults.
 * @example const cache = createPolicyCache(); cache.remember("org_1", { version: 1, compiled, size: 120 });
 */
export function createPolicyCache(
  budget: { lists: number; json: number } = {
    lists: MAX_CACHED_LISTS,
    json: MAX_CACHED_JSON,
  },
) {
  const entries = new Map<string, CachedPolicy>();
  let size = 0;

  function forget(organisationId: string) {
    const entry = entries.get(organisationId);
    if (!entry) return;
    entries.delete(organisationId);
    size -= entry.size;
  }

  return {
    /** The organisation's list, now the most recently used; undefined when not kept. */
    find(organisationId: string): CachedPolicy | undefined {
      const entry = entries.get(organisationId);
      if (entry) {
        entries.delete(organisationId);
        entries.set(organisationId, entry);
      }
      return entry;
    },

    /**
     * Keeps `entry` in place of the organisation's older one, first letting the least recently
     * used lists go until it fits. A list larger than the whole budget is not kept (its older
     * version goes too): it is compiled again on each use.
     */
    remember(organisationId: string, entry: CachedPolicy): CachedPolicy {
      forget(organisationId);
      if (entry.size > budget.json) return entry;
      for (const [oldest] of entries) {
        if (entries.size < budget.lists && size + entry.size <= budget.json) break;
        forget(oldest);
      }
      entries.set(organisationId, entry);
      size += entry.size;
      return entry;
    },

    /** What the cache holds now: lists and their stored JSON in all. */
    usage(): { lists: number; json: number } {
      return { lists: entries.size, json: size };
    },
  };
}

export type PolicyCache = ReturnType<typeof createPolicyCache>;
