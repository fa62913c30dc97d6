// Opened data keys of envelope-sealed values (DECISIONS "The two tiers"): kept so that a hot
// credential costs one symmetric decryption per call instead of an X25519 sealed-box open. The
// rules: only data keys, never a value (a value is decrypted per call into the call's memory and
// nothing of it comes here); at most DATA_KEY_TTL_MS after the key was opened, whatever its use;
// at most `capacity` keys (the oldest goes first); all of them wiped when the sealing keys change.
//
// A data key is worth exactly as much as the proxy's private key already is for its one value
// (the private key opens the sealed data key again at any time), so keeping it gives the process
// nothing it did not hold. The keys live in one guarded, locked buffer (sodium_malloc: never
// swapped, guard pages around it), each slot zeroed the moment its entry dies.
import sodium from "sodium-native";

/** At most this long between opening a data key and forgetting it. */
export const DATA_KEY_TTL_MS = 10 * 60_000;
export const DEFAULT_DATA_KEY_CAPACITY = 4096;
const KEY_BYTES = 32;

interface Entry {
  slot: number;
  expiresAt: number;
}

export interface DataKeyCache {
  /**
   * The data key opened from `sealedDataKey` under sealing key `keyId`, or undefined. The view is
   * valid until the next call into the cache: use it at once, never keep it.
   */
  get(keyId: string, sealedDataKey: Uint8Array): Uint8Array | undefined;
  /** Keeps a copy of `dataKey` (32 bytes) for the sealed data key it was opened from. */
  set(keyId: string, sealedDataKey: Uint8Array, dataKey: Uint8Array): void;
  /** Forgets and zeroes every key (the sealing keys changed, or the proxy stops). */
  wipe(): void;
  /** Forgets the keys whose time is up (also run by a timer at the next expiry). */
  sweep(): void;
  readonly size: number;
  /** Test inspection: each entry's sealing key id and a copy of the bytes it holds. */
  inspect(): { keyId: string; bytes: Buffer }[];
  /** Test inspection: a copy of the whole locked buffer, free slots included. */
  inspectMemory(): Buffer;
  close(): void;
}

/**
 * @example
 * const cache = createDataKeyCache({ capacity: 4096 });
 * const key = cache.get(keyId, sealedDataKey) ?? openAndRemember();
 */
export function createDataKeyCache(
  options: { capacity?: number; now?: () => number; ttlMs?: number } = {},
): DataKeyCache {
  const capacity = options.capacity ?? DEFAULT_DATA_KEY_CAPACITY;
  const ttlMs = Math.min(options.ttlMs ?? DATA_KEY_TTL_MS, DATA_KEY_TTL_MS);
  // A monotonic clock: a wall clock stepped back (NTP) must not stretch the 10 minutes.
  const now = options.now ?? (() => performance.now());
  const memory = capacity > 0 ? sodium.sodium_malloc(capacity * KEY_BYTES) : Buffer.alloc(0);
  sodium.sodium_memzero(memory);
  // Map order is insertion order, and every entry lives ttlMs from insertion: the first entry is
  // always both the oldest and the next to expire.
  const entries = new Map<string, Entry>();
  const freeSlots: number[] = [];
  for (let slot = capacity - 1; slot >= 0; slot--) freeSlots.push(slot);
  let timer: NodeJS.Timeout | undefined;
  let isClosed = false;

  const slotView = (slot: number) => memory.subarray(slot * KEY_BYTES, (slot + 1) * KEY_BYTES);
  // The sealed data key is public (it is in every ticket that carries the value); with the key id
  // it names exactly one opened data key.
  const entryName = (keyId: string, sealedDataKey: Uint8Array) =>
    `${keyId}\0${Buffer.from(sealedDataKey.buffer, sealedDataKey.byteOffset, sealedDataKey.byteLength).toString("latin1")}`;

  function forget(name: string, entry: Entry): void {
    entries.delete(name);
    sodium.sodium_memzero(slotView(entry.slot));
    freeSlots.push(entry.slot);
  }

  function sweep(): void {
    const t = now();
    for (const [name, entry] of entries) {
      if (entry.expiresAt > t) break;
      forget(name, entry);
    }
    arm();
  }

  /** A timer at the first entry's expiry, so no key outlives its time for want of a lookup. */
  function arm(): void {
    if (timer !== undefined || entries.size === 0) return;
    const first = entries.values().next().value as Entry;
    timer = setTimeout(
      () => {
        timer = undefined;
        sweep();
      },
      Math.max(0, first.expiresAt - now()),
    );
    timer.unref();
  }

  function wipe(): void {
    entries.clear();
    sodium.sodium_memzero(memory);
    freeSlots.length = 0;
    for (let slot = capacity - 1; slot >= 0; slot--) freeSlots.push(slot);
    clearTimeout(timer);
    timer = undefined;
  }

  return {
    get(keyId, sealedDataKey) {
      if (capacity === 0 || isClosed) return undefined;
      const name = entryName(keyId, sealedDataKey);
      const entry = entries.get(name);
      if (entry === undefined) return undefined;
      if (entry.expiresAt <= now()) {
        forget(name, entry);
        return undefined;
      }
      return slotView(entry.slot);
    },
    set(keyId, sealedDataKey, dataKey) {
      if (capacity === 0 || isClosed || dataKey.length !== KEY_BYTES) return;
      const name = entryName(keyId, sealedDataKey);
      const existing = entries.get(name);
      if (existing !== undefined) forget(name, existing);
      if (freeSlots.length === 0) {
        const [oldestName, oldest] = entries.entries().next().value as [string, Entry];
        forget(oldestName, oldest);
      }
      const slot = freeSlots.pop() as number;
      slotView(slot).set(dataKey);
      entries.set(name, { slot, expiresAt: now() + ttlMs });
      arm();
    },
    wipe,
    sweep,
    get size() {
      return entries.size;
    },
    inspect() {
      return [...entries.entries()].map(([name, entry]) => ({
        keyId: name.slice(0, name.indexOf("\0")),
        bytes: Buffer.from(slotView(entry.slot)),
      }));
    },
    inspectMemory: () => (isClosed ? Buffer.alloc(0) : Buffer.from(memory)),
    close() {
      if (isClosed) return;
      wipe();
      isClosed = true;
      if (capacity > 0) sodium.sodium_free(memory);
    },
  };
}
