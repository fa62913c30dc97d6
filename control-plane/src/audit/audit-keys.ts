// The ledger's checkpoint signing keys (DECISIONS "Ledger and telemetry"): Ed25519 in
// DATA_DIR/audit/signing-keys.json (or AUDIT_SIGNING_KEYS_FILE, mounted from a secret store),
// shared by replicas like the other key files, created on first start. The first key signs;
// `vault audit-rotate-keys` puts a new key first and strips the private half of the others, whose
// public halves stay published for ever (a checkpoint must verify as long as its ledger exists),
// each with its `retired_at`: a checkpoint it signs after that time does not verify, so a copy of
// a retired key taken before its private half was stripped cannot sign the rows that came after.
import { createPrivateKey, generateKeyPairSync, type KeyObject, sign } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createPrivateFileExclusive, readPrivateJson, writePrivateFileAtomic } from "@latch/shared/files";
import { withKeyFileLock } from "@latch/shared/key-file-lock";
import { ledgerTime } from "@latch/shared/ledger/ledger-format";
import { calculateJwkThumbprint } from "jose";
import type { AuditKeysDocument } from "./ledger-verify.ts";

interface StoredAuditKey {
  key_id: string;
  /** base64url, the 32 raw bytes. */
  public_key: string;
  /** base64url, the 32-byte seed; only the signing key keeps it. */
  private_key?: string;
  created_at: string;
  retired_at?: string;
}

interface AuditKeysFile {
  keys: StoredAuditKey[];
}

export interface AuditSigningKey {
  keyId: string;
  sign(data: Buffer): string;
}

export interface AuditSigner {
  /**
   * The key that signs now, read from the file again: a rotation (on this file, or another
   * replica's on a shared one) is signed with at once, never the retired key, whose checkpoints
   * after its retirement would not verify.
   */
  signingKey(): AuditSigningKey;
}

/** DATA_DIR/audit/signing-keys.json, or `keyFile`. */
export function auditKeysPath(dataDir: string, keyFile?: string): string {
  return keyFile ?? join(dataDir, "audit", "signing-keys.json");
}

async function newKey(now: Date): Promise<StoredAuditKey> {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const x = publicKey.export({ format: "jwk" }).x!;
  const d = privateKey.export({ format: "jwk" }).d!;
  return {
    // RFC 7638: the key's thumbprint, so a key id names exactly one public key.
    key_id: await calculateJwkThumbprint({ kty: "OKP", crv: "Ed25519", x }),
    public_key: x,
    private_key: d,
    created_at: now.toISOString(),
  };
}

function readKeys(path: string): AuditKeysFile {
  const parsed = readPrivateJson(path) as AuditKeysFile;
  if (!Array.isArray(parsed.keys) || !parsed.keys[0]?.private_key) {
    throw new Error(`${path} holds no audit signing key`);
  }
  return parsed;
}

/** The keys, created on first start (two replicas starting at once keep one set). */
export async function loadOrCreateAuditKeys(dataDir: string, keyFile?: string): Promise<AuditKeysFile> {
  const path = auditKeysPath(dataDir, keyFile);
  if (!existsSync(path)) {
    createPrivateFileExclusive(path, `${JSON.stringify({ keys: [await newKey(new Date())] }, null, 2)}\n`);
  }
  return readKeys(path);
}

/** What signs checkpoints: the first key of `file`. */
export function auditSigningKey(file: AuditKeysFile): AuditSigningKey {
  const key = file.keys[0]!;
  const privateKey: KeyObject = createPrivateKey({
    key: { kty: "OKP", crv: "Ed25519", x: key.public_key, d: key.private_key! },
    format: "jwk",
  });
  return { keyId: key.key_id, sign: (data) => sign(null, data, privateKey).toString("base64url") };
}

/**
 * GET /.well-known/latch-audit-keys.json: every key's public half, the signing key first, and a
 * retired key's `retired_at` (after which its checkpoints do not verify: ledger-verify.ts).
 */
export function publishedAuditKeys(file: AuditKeysFile): AuditKeysDocument {
  return {
    keys: file.keys.map((key) => ({
      key_id: key.key_id,
      alg: "Ed25519" as const,
      public_key: key.public_key,
      created_at: key.created_at,
      ...(key.retired_at === undefined ? {} : { retired_at: key.retired_at }),
    })),
  };
}

/** Reads the published keys again (another replica may have rotated). */
export function readPublishedAuditKeys(dataDir: string, keyFile?: string): AuditKeysDocument {
  return publishedAuditKeys(readKeys(auditKeysPath(dataDir, keyFile)));
}

/**
 * Puts a new signing key first. The keys before it keep their public half (old checkpoints keep
 * verifying) and lose their private half. Restart (or roll) the control plane to sign with it.
 */
export async function rotateAuditKeys(
  dataDir: string,
  now = new Date(),
  keyFile?: string,
): Promise<{ newKeyId: string; retiredKeyIds: string[] }> {
  const path = auditKeysPath(dataDir, keyFile);
  await loadOrCreateAuditKeys(dataDir, keyFile);
  const fresh = await newKey(now);
  // Read, changed and written under the file's lock: two rotations at once would otherwise each
  // write back the keys they read, and the later would drop the earlier's key from the published
  // ones (its checkpoints would no longer verify).
  return withKeyFileLock(path, () => {
    const file = readKeys(path);
    const retiredKeyIds: string[] = [];
    const kept = file.keys.map(({ private_key, ...key }) => {
      if (private_key !== undefined) retiredKeyIds.push(key.key_id);
      return { ...key, retired_at: key.retired_at ?? ledgerTime(now) };
    });
    writePrivateFileAtomic(path, `${JSON.stringify({ keys: [fresh, ...kept] }, null, 2)}\n`);
    return { newKeyId: fresh.key_id, retiredKeyIds };
  });
}

/**
 * What a plane needs: the signer and the published keys, both read from the file again each time,
 * so a key rotated in (here, or by another replica on a shared file) signs the next checkpoint and
 * is listed at once. A file that cannot be read meanwhile leaves the last keys read in use.
 */
export async function openAuditKeys(
  dataDir: string,
  keyFile?: string,
): Promise<{ signer: AuditSigner; published(): AuditKeysDocument }> {
  const path = auditKeysPath(dataDir, keyFile);
  const file = await loadOrCreateAuditKeys(dataDir, keyFile);
  const atStart = publishedAuditKeys(file);
  let signing = auditSigningKey(file);
  return {
    signer: {
      signingKey() {
        let first: StoredAuditKey | undefined;
        try {
          first = readKeys(path).keys[0];
        } catch {
          return signing;
        }
        if (first && first.key_id !== signing.keyId) signing = auditSigningKey({ keys: [first] });
        return signing;
      },
    },
    published() {
      try {
        return readPublishedAuditKeys(dataDir, keyFile);
      } catch {
        return atStart;
      }
    },
  };
}
