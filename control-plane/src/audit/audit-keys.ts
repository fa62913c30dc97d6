// The ledger's checkpoint signing keys (DECISIONS "Ledger and telemetry"): Ed25519 in
// DATA_DIR/audit/signing-keys.json (or AUDIT_SIGNING_KEYS_FILE, mounted from a secret store),
// shared by replicas like the other key files, created on first start. The first key signs;
// `vault audit-rotate-keys` puts a new key first and strips the private half of the others, whose
// public halves stay published for ever: a checkpoint must verify as long as its ledger exists.
import { createPrivateKey, generateKeyPairSync, type KeyObject, sign } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createPrivateFileExclusive, readPrivateJson, writePrivateFileAtomic } from "@latch/shared/files";
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

export interface AuditSigner {
  keyId: string;
  sign(data: Buffer): string;
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

/** What signs checkpoints: the first key. */
export function auditSigner(file: AuditKeysFile): AuditSigner {
  const key = file.keys[0]!;
  const privateKey: KeyObject = createPrivateKey({
    key: { kty: "OKP", crv: "Ed25519", x: key.public_key, d: key.private_key! },
    format: "jwk",
  });
  return { keyId: key.key_id, sign: (data) => sign(null, data, privateKey).toString("base64url") };
}

/** GET /.well-known/latch-audit-keys.json: every key's public half, the signing key first. */
export function publishedAuditKeys(file: AuditKeysFile): AuditKeysDocument {
  return {
    keys: file.keys.map((key) => ({
      key_id: key.key_id,
      alg: "Ed25519" as const,
      public_key: key.public_key,
      created_at: key.created_at,
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
  const file = await loadOrCreateAuditKeys(dataDir, keyFile);
  const fresh = await newKey(now);
  const retiredKeyIds: string[] = [];
  const kept = file.keys.map(({ private_key, ...key }) => {
    if (private_key !== undefined) retiredKeyIds.push(key.key_id);
    return { ...key, retired_at: key.retired_at ?? now.toISOString() };
  });
  writePrivateFileAtomic(path, `${JSON.stringify({ keys: [fresh, ...kept] }, null, 2)}\n`);
  return { newKeyId: fresh.key_id, retiredKeyIds };
}

/**
 * What a plane needs: the signer loaded once (a rotation signs after a restart, as with the other
 * keys), and the published keys read again on each request, so a key another replica rotated in
 * is listed at once.
 */
export async function openAuditKeys(
  dataDir: string,
  keyFile?: string,
): Promise<{ signer: AuditSigner; published(): AuditKeysDocument }> {
  const file = await loadOrCreateAuditKeys(dataDir, keyFile);
  const atStart = publishedAuditKeys(file);
  return {
    signer: auditSigner(file),
    published() {
      try {
        return readPublishedAuditKeys(dataDir, keyFile);
      } catch {
        return atStart;
      }
    },
  };
}
