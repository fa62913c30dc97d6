// The ledger's checkpoint signing keys (DECISIONS "Ledger and telemetry"): Ed25519 in
// DATA_DIR/audit/signing-keys.json (or AUDIT_SIGNING_KEYS_FILE, mounted from a secret store),
// shared by replicas like the other key files, created on first start. The first key signs;
// `vault audit-rotate-keys` puts a new key first and strips the private half of the others, whose
// public halves stay published for ever (a checkpoint must verify as long as its ledger exists),
// each with its `retired_at`: a checkpoint it signs after that time vouches for nothing, so a copy
// of a retired key taken before its private half was stripped cannot sign the rows that came after.
// A running plane reads the file at each checkpoint and never signs from memory: when the file
// cannot be read, it signs nothing (AuditKeysUnreadableError) until it can.
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
   * after its retirement vouch for nothing. Throws AuditKeysUnreadableError when the file cannot
   * be read or holds no signing key: the key held in memory may have been retired meanwhile.
   */
  signingKey(): AuditSigningKey;
}

/**
 * The key file cannot be read (a rotation left it to another owner, a broken mount) or holds no
 * usable signing key: no checkpoint is signed. The message names the file and the cause, never
 * anything the file holds.
 */
export class AuditKeysUnreadableError extends Error {
  readonly code = "audit_keys_unreadable";
  readonly file: string;
  readonly reason: string;
  constructor(file: string, reason: string) {
    super(
      `the audit signing key file ${file} cannot be used (${reason}); no checkpoint is signed until it can`,
    );
    this.name = "AuditKeysUnreadableError";
    this.file = file;
    this.reason = reason;
  }
}

/** Why reading the key file failed, in words that hold nothing of the file. */
function readFailure(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  if (typeof code === "string" && /^E[A-Z]+$/.test(code)) {
    const syscall = (error as NodeJS.ErrnoException).syscall;
    return `${syscall ?? "read"} failed: ${code}`;
  }
  // Ours (readPrivateJson, readKeys): they name the file and what is wrong, not its content.
  if (error instanceof KeyFileProblem) return error.message;
  return "its first key is not an Ed25519 signing key";
}

/** A key file that reads but is not one: a sentence that shows nothing of its content. */
class KeyFileProblem extends Error {}

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
  let parsed: AuditKeysFile;
  try {
    parsed = readPrivateJson(path) as AuditKeysFile;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== undefined) throw error;
    throw new KeyFileProblem("not valid JSON");
  }
  if (!Array.isArray(parsed?.keys) || !parsed.keys[0]?.private_key) {
    throw new KeyFileProblem(`${path} holds no audit signing key`);
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
 * is listed at once. A file that cannot be read meanwhile signs nothing (the key in memory may be
 * retired in the file the plane cannot read: its checkpoints would vouch for nothing, and a plane
 * signing them would never notice); the checkpoint round logs it (ledger.service.ts). The
 * published keys are then the last ones read, and `onUnreadable` hears why (the route logs it): never
 * older than what this plane signed with, whereas a 503 would stop every auditor's check of the
 * checkpoints already signed.
 */
export async function openAuditKeys(
  dataDir: string,
  keyFile?: string,
): Promise<{
  signer: AuditSigner;
  published(onUnreadable?: (error: AuditKeysUnreadableError) => void): AuditKeysDocument;
}> {
  const path = auditKeysPath(dataDir, keyFile);
  let file = await loadOrCreateAuditKeys(dataDir, keyFile);
  let signing = auditSigningKey(file);
  /** The file read again, or AuditKeysUnreadableError; what reads is kept as the last read. */
  const reread = (): AuditKeysFile => {
    try {
      file = readKeys(path);
      return file;
    } catch (error) {
      throw new AuditKeysUnreadableError(path, readFailure(error));
    }
  };
  return {
    signer: {
      signingKey() {
        const first = reread().keys[0]!;
        if (first.key_id !== signing.keyId) {
          try {
            signing = auditSigningKey({ keys: [first] });
          } catch (error) {
            throw new AuditKeysUnreadableError(path, readFailure(error));
          }
        }
        return signing;
      },
    },
    published(onUnreadable) {
      try {
        return publishedAuditKeys(reread());
      } catch (error) {
        onUnreadable?.(error as AuditKeysUnreadableError);
        return publishedAuditKeys(file);
      }
    },
  };
}
