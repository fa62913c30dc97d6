// The proxy's sealing keys: the only keys in Latch that open a stored secret. Created on first
// run in DATA_DIR/egress (owner-only); the first key seals new values, older ones still open.
// Opened with native libsodium (sodium-native): the same crypto_box_seal_open as the WebAssembly
// build the control plane seals with, about three times cheaper per call. A stored value is an
// envelope (shared/src/crypto/envelope.ts): its data key is opened once and kept for at most ten
// minutes (data-key-cache.ts), so a hot credential costs an XChaCha20-Poly1305 decryption a call.
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  DATA_KEY_BYTES,
  ENVELOPE_HEADER,
  type EnvelopeParts,
  joinEnvelope,
  NONCE_BYTES,
  SEALED_DATA_KEY_BYTES,
  splitEnvelope,
  TAG_BYTES,
} from "@latch/shared/crypto/envelope";
import { deriveSealingKeyId } from "@latch/shared/crypto/sealing-key-id";
import { AppError } from "@latch/shared/errors";
import { createPrivateFileExclusive, readPrivateJson, writePrivateFileAtomic } from "@latch/shared/files";
import { withKeyFileLock } from "@latch/shared/key-file-lock";
import sodium from "sodium-native";
import { createDataKeyCache, type DataKeyCache } from "./data-key-cache.ts";

interface StoredKey {
  keyId: string;
  publicKey: string; // base64url
  privateKey: string; // base64url
  createdAt: string;
}

export interface SealingKeyring {
  /** The key new values are sealed to (public half only leaves this module); moves on a rotation. */
  readonly current: { keyId: string; publicKey: Uint8Array };
  /**
   * Opens one stored value: an envelope (its data key from the cache, or opened and then kept
   * there) or a bare sealed box from before envelopes. The plaintext lives only as long as the
   * caller keeps it; nothing of it is kept here.
   */
  open(keyId: string, sealed: Uint8Array): string;
  /**
   * The same value sealed under the current key as an envelope (vault seal-rewrap): an envelope's
   * data key is opened and sealed again (the value is authenticated, never decoded), a bare
   * sealed box becomes an envelope. Throws credential_unavailable when it does not open.
   */
  rewrap(keyId: string, sealed: Uint8Array): { keyId: string; sealed: Uint8Array };
  /**
   * Reads the key file again. When its keys changed (a rotation: a new key first, or one retired)
   * every cached data key is wiped and the new keys are used from the next call; true then. A file
   * that cannot be read or parsed leaves the keys in use as they are and throws.
   */
  reload(): boolean;
  /** Wipes the cached data keys and frees their memory. */
  close(): void;
}

export function sealingKeyPath(dataDir: string): string {
  return join(dataDir, "egress", "sealing-keys.json");
}

/** A new X25519 key pair as the key file stores it. */
function newStoredKey(): StoredKey {
  const publicKey = Buffer.alloc(sodium.crypto_box_PUBLICKEYBYTES);
  const privateKey = Buffer.alloc(sodium.crypto_box_SECRETKEYBYTES);
  sodium.crypto_box_keypair(publicKey, privateKey);
  const key: StoredKey = {
    keyId: deriveSealingKeyId(publicKey),
    publicKey: publicKey.toString("base64url"),
    privateKey: privateKey.toString("base64url"),
    createdAt: new Date().toISOString(),
  };
  sodium.sodium_memzero(privateKey);
  return key;
}

/**
 * A rotation (deploy/make-keys.ts --new-sealing-key): a new key first in the key file at `path`,
 * the others kept after it so that what they sealed still opens. Proxies read the file again
 * within EGRESS_SEALING_KEY_REFRESH_MS (wiping their data keys) and seal new values to the new
 * key; `vault seal-rewrap` then moves every stored value to it, after which the old keys can go.
 */
export function addSealingKey(path: string): string {
  // Under the key file's lock: two rotations at once would each write back the keys they read
  // plus their own, and the later write would drop the earlier key and every value sealed to it.
  return withKeyFileLock(path, () => {
    const parsed = readPrivateJson(path) as { keys?: StoredKey[] };
    if (!Array.isArray(parsed.keys) || parsed.keys.length === 0)
      throw new Error(`${path} holds no sealing key`);
    const key = newStoredKey();
    writePrivateFileAtomic(path, `${JSON.stringify({ keys: [key, ...parsed.keys] }, null, 2)}\n`);
    return key.keyId;
  });
}

interface KeyPair {
  publicKey: Uint8Array;
  privateKey: Uint8Array;
}

/** The key file's keys, checked: each id derived from its public half, each an X25519 pair. */
function readKeys(path: string): {
  keys: Map<string, KeyPair>;
  current: { keyId: string; publicKey: Uint8Array };
} {
  const parsed = readPrivateJson(path) as { keys?: StoredKey[] };
  const keys = new Map<string, KeyPair>();
  for (const k of parsed.keys ?? []) {
    const publicKey = Buffer.from(k.publicKey, "base64url");
    if (deriveSealingKeyId(publicKey) !== k.keyId)
      throw new Error(`sealing key ${k.keyId} does not match its id`);
    const privateKey = Buffer.from(k.privateKey, "base64url");
    if (
      publicKey.length !== sodium.crypto_box_PUBLICKEYBYTES ||
      privateKey.length !== sodium.crypto_box_SECRETKEYBYTES
    ) {
      throw new Error(`sealing key ${k.keyId} is not an X25519 key pair`);
    }
    keys.set(k.keyId, { publicKey, privateKey });
  }
  const first = parsed.keys?.[0];
  if (!first) throw new Error(`${path} holds no sealing key`);
  return { keys, current: { keyId: first.keyId, publicKey: Buffer.from(first.publicKey, "base64url") } };
}

/** Whether two loaded key sets hold the same keys in the same order (the first seals). */
function isSameKeys(a: Map<string, KeyPair>, b: Map<string, KeyPair>): boolean {
  if (a.size !== b.size) return false;
  const ids = [...b.keys()];
  return [...a.entries()].every(
    ([id, pair], i) => ids[i] === id && Buffer.compare(pair.privateKey, b.get(id)!.privateKey) === 0,
  );
}

const unavailable = () => new AppError("credential_unavailable", "a sealed credential could not be opened");

/**
 * Loads the keyring at `path` (default DATA_DIR/egress/sealing-keys.json), creating it on first
 * run. Every replica of one deployment must load the same file (a shared secret mount): a value
 * sealed to one replica's key is opened by whichever replica gets the ticket. `dataKeys` is where
 * opened data keys are kept (data-key-cache.ts); by default a cache of DEFAULT_DATA_KEY_CAPACITY.
 */
export async function loadOrCreateSealingKeyring(
  dataDir: string,
  keyFile?: string,
  options: { dataKeys?: DataKeyCache } = {},
): Promise<SealingKeyring> {
  const path = keyFile ?? sealingKeyPath(dataDir);
  if (!existsSync(path)) {
    createPrivateFileExclusive(path, `${JSON.stringify({ keys: [newStoredKey()] }, null, 2)}\n`);
  }
  let loaded = readKeys(path);
  const dataKeys = options.dataKeys ?? createDataKeyCache();

  /** A bare sealed box of the value: what every value was before envelopes. */
  function openSealedBox(key: KeyPair, sealed: Uint8Array): string {
    if (sealed.length < sodium.crypto_box_SEALBYTES) throw unavailable();
    const plaintext = Buffer.alloc(sealed.length - sodium.crypto_box_SEALBYTES);
    if (!sodium.crypto_box_seal_open(plaintext, sealed, key.publicKey, key.privateKey)) throw unavailable();
    const text = plaintext.toString("utf8");
    // The string is the one copy the call keeps; the bytes are wiped now, not at the next GC.
    sodium.sodium_memzero(plaintext);
    return text;
  }

  /** The data key of an envelope, authenticated on its value (a copy the caller wipes), or undefined. */
  function openDataKey(key: KeyPair, parts: EnvelopeParts): Buffer | undefined {
    const dataKey = Buffer.alloc(DATA_KEY_BYTES);
    if (!sodium.crypto_box_seal_open(dataKey, parts.sealedDataKey, key.publicKey, key.privateKey)) {
      return undefined;
    }
    const value = Buffer.alloc(parts.ciphertext.length - TAG_BYTES);
    try {
      sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(
        value,
        null,
        parts.ciphertext,
        ENVELOPE_HEADER,
        parts.nonce,
        dataKey,
      );
      return dataKey;
    } catch {
      sodium.sodium_memzero(dataKey);
      return undefined;
    } finally {
      sodium.sodium_memzero(value);
    }
  }

  /** An envelope under the current key around `dataKey` (sealed again) or a new one around `value`. */
  function sealUnderCurrent(
    content: { dataKey: Uint8Array; nonce: Uint8Array; ciphertext: Uint8Array } | { value: Uint8Array },
  ): Uint8Array {
    const publicKey = loaded.current.publicKey;
    if ("dataKey" in content) {
      const sealedDataKey = Buffer.alloc(SEALED_DATA_KEY_BYTES);
      sodium.crypto_box_seal(sealedDataKey, content.dataKey, publicKey);
      return joinEnvelope({ sealedDataKey, nonce: content.nonce, ciphertext: content.ciphertext });
    }
    const dataKey = Buffer.alloc(DATA_KEY_BYTES);
    const nonce = Buffer.alloc(NONCE_BYTES);
    sodium.randombytes_buf(dataKey);
    sodium.randombytes_buf(nonce);
    try {
      const ciphertext = Buffer.alloc(content.value.length + TAG_BYTES);
      sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(
        ciphertext,
        content.value,
        ENVELOPE_HEADER,
        null,
        nonce,
        dataKey,
      );
      return sealUnderCurrent({ dataKey, nonce, ciphertext });
    } finally {
      sodium.sodium_memzero(dataKey);
    }
  }

  /** The value of an envelope, or undefined when it does not open as one. */
  function openEnvelope(keyId: string, key: KeyPair, parts: EnvelopeParts): string | undefined {
    const cached = dataKeys.get(keyId, parts.sealedDataKey);
    let opened: Buffer | undefined;
    if (cached === undefined) {
      opened = Buffer.alloc(DATA_KEY_BYTES);
      if (!sodium.crypto_box_seal_open(opened, parts.sealedDataKey, key.publicKey, key.privateKey)) {
        return undefined;
      }
    }
    const plaintext = Buffer.alloc(parts.ciphertext.length - TAG_BYTES);
    try {
      sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(
        plaintext,
        null,
        parts.ciphertext,
        ENVELOPE_HEADER,
        parts.nonce,
        (cached ?? opened) as Uint8Array,
      );
      // Kept only once it has opened its value: the key, never the value.
      if (opened !== undefined) dataKeys.set(keyId, parts.sealedDataKey, opened);
      return plaintext.toString("utf8");
    } catch {
      return undefined;
    } finally {
      sodium.sodium_memzero(plaintext);
      if (opened !== undefined) sodium.sodium_memzero(opened);
    }
  }

  return {
    get current() {
      return loaded.current;
    },
    open(keyId, sealed) {
      const key = loaded.keys.get(keyId);
      if (!key) throw new AppError("credential_unavailable", `no sealing key ${keyId} on this proxy`);
      const parts = splitEnvelope(sealed);
      // Nothing marks a bare sealed box (its first bytes are random): one that happens to begin
      // like an envelope fails to open as one and is opened as what it is.
      const value = parts === undefined ? undefined : openEnvelope(keyId, key, parts);
      return value ?? openSealedBox(key, sealed);
    },
    rewrap(keyId, sealed) {
      const key = loaded.keys.get(keyId);
      if (!key) throw new AppError("credential_unavailable", `no sealing key ${keyId} on this proxy`);
      const parts = splitEnvelope(sealed);
      const dataKey = parts === undefined ? undefined : openDataKey(key, parts);
      if (parts !== undefined && dataKey !== undefined) {
        try {
          return {
            keyId: loaded.current.keyId,
            sealed: sealUnderCurrent({ dataKey, nonce: parts.nonce, ciphertext: parts.ciphertext }),
          };
        } finally {
          sodium.sodium_memzero(dataKey);
        }
      }
      // A bare sealed box (or one that only looked like an envelope): opened, sealed as one.
      if (sealed.length < sodium.crypto_box_SEALBYTES) throw unavailable();
      const value = Buffer.alloc(sealed.length - sodium.crypto_box_SEALBYTES);
      try {
        if (!sodium.crypto_box_seal_open(value, sealed, key.publicKey, key.privateKey)) throw unavailable();
        return { keyId: loaded.current.keyId, sealed: sealUnderCurrent({ value }) };
      } finally {
        sodium.sodium_memzero(value);
      }
    },
    reload() {
      const next = readKeys(path);
      if (isSameKeys(loaded.keys, next.keys)) return false;
      // A rotation: no data key opened under the old set outlives it.
      dataKeys.wipe();
      loaded = next;
      return true;
    },
    close: () => dataKeys.close(),
  };
}
