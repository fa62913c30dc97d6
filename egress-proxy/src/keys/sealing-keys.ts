// The proxy's sealing keys: the only keys in Latch that open a stored secret. Created on first
// run in DATA_DIR/egress (owner-only); the first key seals new values, older ones still open.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { deriveSealingKeyId, readySodium } from "@latch/shared/crypto/seal";
import { AppError } from "@latch/shared/errors";
import { createPrivateFileExclusive } from "@latch/shared/files";

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
  const sodium = await readySodium();
  const path = keyFile ?? sealingKeyPath(dataDir);
  if (!existsSync(path)) {
    const pair = sodium.crypto_box_keypair();
    const key: StoredKey = {
      keyId: deriveSealingKeyId(pair.publicKey),
      publicKey: Buffer.from(pair.publicKey).toString("base64url"),
      privateKey: Buffer.from(pair.privateKey).toString("base64url"),
      createdAt: new Date().toISOString(),
    };
    createPrivateFileExclusive(path, `${JSON.stringify({ keys: [key] }, null, 2)}\n`);
  }
  const parsed = JSON.parse(readFileSync(path, "utf8")) as { keys?: StoredKey[] };
  const keys = new Map<string, { publicKey: Uint8Array; privateKey: Uint8Array }>();
  for (const k of parsed.keys ?? []) {
    const publicKey = Buffer.from(k.publicKey, "base64url");
    if (deriveSealingKeyId(publicKey) !== k.keyId)
      throw new Error(`sealing key ${k.keyId} does not match its id`);
    keys.set(k.keyId, { publicKey, privateKey: Buffer.from(k.privateKey, "base64url") });
  }
  const first = parsed.keys?.[0];
  if (!first) throw new Error(`${path} holds no sealing key`);

  return {
    current: { keyId: first.keyId, publicKey: Buffer.from(first.publicKey, "base64url") },
    open(keyId, sealed) {
      const key = keys.get(keyId);
      if (!key) throw new AppError("credential_unavailable", `no sealing key ${keyId} on this proxy`);
      try {
        return Buffer.from(sodium.crypto_box_seal_open(sealed, key.publicKey, key.privateKey)).toString(
          "utf8",
        );
      } catch (cause) {
        throw new AppError("credential_unavailable", "a sealed credential could not be opened", { cause });
      }
    },
  };
}
