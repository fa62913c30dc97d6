// The authorization server's signing keys (DECISIONS "OAuth authorization server"): RS256 private
// JWKs in DATA_DIR/oauth/jwks.json, shared by replicas like the other key files. The first key signs
// new tokens; `vault oauth-rotate-keys` puts a new key first and keeps the old one listed until
// every token it signed has expired. Also the keys oidc-provider signs its cookies with.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createPrivateFileExclusive, readPrivateJson, writePrivateFileAtomic } from "@latch/shared/files";
import { withKeyFileLock } from "@latch/shared/key-file-lock";
import { calculateJwkThumbprint, type JWK } from "jose";

/** Access tokens live 600 s with 30 s of skew; a retired key stays listed a little longer. */
export const RETIRED_KEY_KEEP_MS = 11 * 60_000;

/** A private RSA JWK as stored; `retired_at` (ms) marks a key that no longer signs. */
export interface StoredJwk extends JWK {
  kid: string;
  retired_at?: number;
}

interface JwksFile {
  keys: StoredJwk[];
  /** Keys for oidc-provider's signed cookies (not JWKs; random strings). */
  cookie_keys: string[];
}

/** DATA_DIR/oauth/jwks.json, or `keyFile` (OAUTH_JWKS_FILE: a file mounted from a secret store). */
export function oauthKeysPath(dataDir: string, keyFile?: string): string {
  return keyFile ?? join(dataDir, "oauth", "jwks.json");
}

async function newSigningKey(): Promise<StoredJwk> {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const jwk = privateKey.export({ format: "jwk" }) as JWK;
  const kid = await calculateJwkThumbprint(jwk);
  return { ...jwk, kid, alg: "RS256", use: "sig" };
}

function readKeys(path: string): JwksFile {
  const parsed = readPrivateJson(path) as JwksFile;
  if (!Array.isArray(parsed.keys) || parsed.keys.length === 0 || !Array.isArray(parsed.cookie_keys)) {
    throw new Error(`${path} holds no signing key`);
  }
  return parsed;
}

/** The keys in DATA_DIR, created on first start (two replicas starting at once keep one set). */
export async function loadOrCreateOAuthKeys(dataDir: string, keyFile?: string): Promise<JwksFile> {
  const path = oauthKeysPath(dataDir, keyFile);
  if (!existsSync(path)) {
    const fresh: JwksFile = {
      keys: [await newSigningKey()],
      cookie_keys: [randomBytes(32).toString("base64url")],
    };
    createPrivateFileExclusive(path, `${JSON.stringify(fresh, null, 2)}\n`);
  }
  return readKeys(path);
}

/** The private keys oidc-provider signs with, newest first, without our bookkeeping field. */
export function signingJwks(file: JwksFile): { keys: JWK[] } {
  return { keys: file.keys.map(({ retired_at: _retired, ...jwk }) => jwk) };
}

/** The public half of every listed key, as /oauth/jwks publishes and /mcp verifies with. */
export function publicJwks(file: JwksFile): { keys: JWK[] } {
  return {
    keys: file.keys.map(({ kty, n, e, kid }) => ({ kty, n, e, kid, alg: "RS256", use: "sig" })),
  };
}

/** Reads the public keys again (a replica that rotated may sign with a key this one has not loaded). */
export function readPublicJwks(dataDir: string, keyFile?: string): { keys: JWK[] } {
  return publicJwks(readKeys(oauthKeysPath(dataDir, keyFile)));
}

export interface RotationResult {
  newKid: string;
  retiredKids: string[];
  droppedKids: string[];
}

/**
 * Puts a new key first; the keys before it are marked retired and dropped once they have been
 * retired longer than an access token lives. Restart (or roll) the control plane to sign with it.
 */
export async function rotateOAuthKeys(
  dataDir: string,
  now = Date.now(),
  keyFile?: string,
): Promise<RotationResult> {
  const path = oauthKeysPath(dataDir, keyFile);
  const fresh = await newSigningKey();
  // One rotation at a time: two at once would each write back the keys they read plus their own,
  // and the later write would drop the key the earlier one added (its tokens would stop verifying
  // once a replica restarts). The lock is held from the read until the file is written.
  return withKeyFileLock(path, async () => {
    const file = await loadOrCreateOAuthKeys(dataDir, keyFile);
    return rotated(path, file, fresh, now);
  });
}

function rotated(
  path: string,
  file: Awaited<ReturnType<typeof loadOrCreateOAuthKeys>>,
  fresh: StoredJwk,
  now: number,
): RotationResult {
  const kept: StoredJwk[] = [];
  const retiredKids: string[] = [];
  const droppedKids: string[] = [];
  for (const key of file.keys) {
    const retiredAt = key.retired_at ?? now;
    if (now - retiredAt > RETIRED_KEY_KEEP_MS) {
      droppedKids.push(key.kid);
      continue;
    }
    if (key.retired_at === undefined) retiredKids.push(key.kid);
    kept.push({ ...key, retired_at: retiredAt });
  }
  writePrivateFileAtomic(path, `${JSON.stringify({ ...file, keys: [fresh, ...kept] }, null, 2)}\n`);
  return { newKid: fresh.kid, retiredKids, droppedKids };
}
