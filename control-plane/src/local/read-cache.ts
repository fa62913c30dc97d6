// The local vault's call-path lookups (an item by name or host, the usable grants of a scope) kept
// in memory between writes. The process that holds the embedded database (local-lock.ts) is its
// only writer, and every write to items and grants goes through the repos wrapped here (items,
// item tokens, grants), so between two writes their answers cannot change except by time (a
// grant's expiry), which is re-checked on every hit. What is kept is what the rows hold: sealed
// values, never a plaintext.
//
// Durable state is untouched: the audit row, a one-call grant's spend and every other write still
// go to the database, awaited, before the answer leaves.
import type { GrantScope, GrantsRepo, GrantWithItem } from "../grants/grants.repo.ts";
import type { ItemTokensRepo } from "../items/item-tokens.repo.ts";
import type { ItemsRepo, ItemWithFolder } from "../items/items.repo.ts";

export interface ReadCache {
  items(repo: ItemsRepo): ItemsRepo;
  /** A connected item's tokens: rotating its refresh token rewrites the item row itself. */
  tokens(repo: ItemTokensRepo): ItemTokensRepo;
  grants(repo: GrantsRepo): GrantsRepo;
}

/**
 * Entries kept per lookup: an agent naming ever new items (each miss is remembered too) must not
 * grow the cache without end, so a full map is emptied before the next entry.
 */
export const MAX_ENTRIES = 1024;

/** The usable grants of one scope as read at `at`: each still active then, not yet expired. */
interface GrantsEntry {
  at: number;
  rows: GrantWithItem[];
}

/**
 * One cache over both repos: a write to either (an item renamed or deleted changes the grants'
 * rows too) empties all of it, before it starts and after it ends. A read that was in flight
 * while any write ran is returned but not kept, so a stale answer is never stored.
 *
 * @example
 * const cache = createReadCache();
 * const items = cache.items(createItemsRepo(db)); // findItemByName: one query, then memory
 */
export function createReadCache(): ReadCache {
  let generation = 0;
  let writesInFlight = 0;
  const items = new Map<string, ItemWithFolder | undefined>();
  const itemsByHost = new Map<string, ItemWithFolder[]>();
  const grants = new Map<string, GrantsEntry>();

  const clear = () => {
    generation++;
    items.clear();
    itemsByHost.clear();
    grants.clear();
  };

  async function write<T>(run: () => Promise<T>): Promise<T> {
    writesInFlight++;
    clear();
    try {
      return await run();
    } finally {
      writesInFlight--;
      clear();
    }
  }

  function keepIn<K, V>(map: Map<K, V>, key: K, value: V): void {
    if (map.size >= MAX_ENTRIES) map.clear();
    map.set(key, value);
  }

  async function read<T>(load: () => Promise<T>, keep: (value: T) => void): Promise<T> {
    const startedAt = generation;
    const value = await load();
    if (writesInFlight === 0 && generation === startedAt) keep(value);
    return value;
  }

  /** Every method of `repo` but the cached reads runs as a write (a find* that inserts included). */
  function wrap<R extends object>(repo: R, reads: Partial<R>): R {
    const wrapped: Record<string, unknown> = {};
    for (const [name, method] of Object.entries(repo)) {
      if (name in reads) wrapped[name] = reads[name as keyof R];
      else if (typeof method === "function") {
        wrapped[name] = (...args: unknown[]) =>
          write(() => (method as (...a: unknown[]) => Promise<unknown>).apply(repo, args));
      } else wrapped[name] = method;
    }
    return wrapped as R;
  }

  return {
    items(repo) {
      return wrap<ItemsRepo>(repo, {
        async findItemByName(organisationId, environment, name) {
          const key = keyOf(organisationId, environment, name);
          if (items.has(key)) return copyItem(items.get(key));
          const row = await read(
            () => repo.findItemByName(organisationId, environment, name),
            (found) => keepIn(items, key, copyItem(found)),
          );
          return copyItem(row);
        },
        async findItemsByHost(organisationId, environment, host) {
          const key = keyOf(organisationId, environment, host);
          const kept = itemsByHost.get(key);
          if (kept) return kept.map((row) => copyItem(row)!);
          const rows = await read(
            () => repo.findItemsByHost(organisationId, environment, host),
            (found) =>
              itemsByHost.set(
                key,
                found.map((row) => copyItem(row)!),
              ),
          );
          return rows.map((row) => copyItem(row)!);
        },
      });
    },
    tokens(repo) {
      // Its lookups read the database each time (minted tokens expire by the clock) and change
      // nothing (holdIfUnchanged only locks), so they pass through; the lock and both writes
      // empty the cache.
      return wrap<ItemTokensRepo>(repo, {
        findAccessToken: (itemId, notBefore) => repo.findAccessToken(itemId, notBefore),
        findSealedValue: (itemId) => repo.findSealedValue(itemId),
        holdIfUnchanged: (values) => repo.holdIfUnchanged(values),
      });
    },
    grants(repo) {
      return wrap<GrantsRepo>(repo, {
        async findUsableGrants(scope, now) {
          const key = scopeKeyOf(scope);
          const at = now.getTime();
          const kept = grants.get(key);
          // Time only removes grants (expiry); a clock that went back reads the database again.
          if (kept && at >= kept.at) {
            return kept.rows
              .filter((row) => row.expires_at === null || row.expires_at.getTime() > at)
              .map(copyGrant);
          }
          const rows = await read(
            () => repo.findUsableGrants(scope, now),
            (found) => keepIn(grants, key, { at, rows: found.map(copyGrant) }),
          );
          return rows.map(copyGrant);
        },
      });
    },
  };
}

function keyOf(...parts: string[]): string {
  return parts.join("\u0000");
}

/** What findUsableGrants reads of a scope (callScope and requestedCall are judged after it). */
function scopeKeyOf(scope: GrantScope): string {
  return keyOf(scope.organisationId, scope.itemId, scope.folderId ?? "", scope.agentId, scope.toolId);
}

/** Callers get their own copy, so nothing they do to a row reaches the cache. */
function copyItem(row: ItemWithFolder | undefined): ItemWithFolder | undefined {
  return row && { ...row, allowed_hosts: [...row.allowed_hosts] };
}

function copyGrant(row: GrantWithItem): GrantWithItem {
  return { ...row };
}
