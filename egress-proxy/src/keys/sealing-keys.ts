// The proxy's sealing keys: the only keys in Latch that open a stored secret. Created on first
// run in DATA_DIR/egress (owner-only); the first key seals new values, older ones still open.
// Opened with native libsodium (sodium-native): the same crypto_box_seal_open as the WebAssembly
// build the control plane seals with, about three times cheaper per call.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { deriveSealingKeyId } from "@latch/shared/crypto/sealing-key-id";
import { AppError } from "@latch/shared/errors";
import { createPrivateFileExclusive } from "@latch/shared/files";
import sodium from "sodium-native";

interface StoredKey {
  keyId: string;
  publicKey: string; // base64url
  privateKey: string; // base64url
  createdAt: string;
}

export interface SealingKeyring {
  /** The key new values are sealed to (public half only leaves this module). */
  current: { keyId: string; publicKey: Uint8Array };
  /** Opens one sealed value. The plaintext lives only as long as the caller keeps it. */
  open(keyId: string, sealed: Uint8Array): string;
}

export function sealingKeyPath(dataDir: string): string {
  return join(dataDir, "egress", "sealing-keys.json");
}

/**
 * Loads the keyring at `path` (default DATA_DIR/egress/sealing-keys.json), creating it on first
 * run. Every replica of one deployment must load the same file (a shared secret mount): a value
 * sealed to one replica's key is opened by whichever replica gets the ticket.
 */
export async function loadOrCreateSealingKeyring(dataDir: string, keyFile?: string): Promise<SealingKeyring> {
  const path = keyFile ?? sealingKeyPath(dataDir);
  if (!existsSync(path)) {
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
    createPrivateFileExclusive(path, `${JSON.stringify({ keys: [key] }, null, 2)}\n`);
  }
  const parsed = JSON.parse(readFileSync(path, "utf8")) as { keys?: StoredKey[] };
  const keys = new Map<string, { publicKey: Uint8Array; privateKey: Uint8Array }>();
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

  return {
    current: { keyId: first.keyId, publicKey: Buffer.from(first.publicKey, "base64url") },
    open(keyId, sealed) {
      const key = keys.get(keyId);
      if (!key) throw new AppError("credential_unavailable", `no sealing key ${keyId} on this proxy`);
      if (sealed.length < sodium.crypto_box_SEALBYTES) {
        throw new AppError("credential_unavailable", "a sealed credential could not be opened");
      }
      const plaintext = Buffer.alloc(sealed.length - sodium.crypto_box_SEALBYTES);
      if (!sodium.crypto_box_seal_open(plaintext, sealed, key.publicKey, key.privateKey)) {
        throw new AppError("credential_unavailable", "a sealed credential could not be opened");
      }
      const text = plaintext.toString("utf8");
      // The string is the one copy the call keeps; the bytes are wiped now, not at the next GC.
      sodium.sodium_memzero(plaintext);
      return text;
    },
  };
}
