// The authorization server's signing keys (DECISIONS "OAuth authorization server"): RS256 private
// JWKs in DATA_DIR/oauth/jwks.json, shared by replicas like the other key files. The first key signs
// new tokens; `vault oauth-rotate-keys` puts a new key first and keeps the old one listed until
// every token it signed has expired. Also the keys oidc-provider signs its cookies with. A retired
// key signs nothing after its `retired_at` and is trusted by no replica once retired longer than
// RETIRED_KEY_KEEP_MS, whether or not a rotation has dropped it from the file yet (a rotation after
// a leak must end the old key's use within minutes, not at the next rotation).
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

export interface JwksFile {
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
  if (!parsed.keys.some((key) => key.retired_at === undefined)) {
    throw new Error(`${path} holds no signing key that is not retired`);
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

/** The key file as it is now (a rotation on another replica or by `vault` changes it). */
export function readOAuthKeys(dataDir: string, keyFile?: string): JwksFile {
  return readKeys(oauthKeysPath(dataDir, keyFile));
}

/**
 * The keys still trusted at `now`: the current one (the first not retired) first, then the retired
 * ones retired at most RETIRED_KEY_KEEP_MS ago, whose tokens may still be alive.
 */
function trustedKeys(file: JwksFile, now: number): StoredJwk[] {
  const current = file.keys.filter((key) => key.retired_at === undefined).slice(0, 1);
  const retired = file.keys.filter(
    (key) => key.retired_at !== undefined && now - key.retired_at <= RETIRED_KEY_KEEP_MS,
  );
  return [...current, ...retired];
}

/** The key id new tokens are signed with: the first key not retired. */
export function currentKid(file: JwksFile): string {
  const current = file.keys.find((key) => key.retired_at === undefined);
  if (!current) throw new Error("the OAuth key file holds no signing key that is not retired");
  return current.kid;
}

/**
 * The private keys oidc-provider holds, without our bookkeeping field: the current key first (it
 * signs whatever names no key id, such as ID tokens, with the first key of the algorithm; access
 * tokens name `currentKid`), then the retired keys still trusted.
 */
export function signingJwks(file: JwksFile, now = Date.now()): { keys: JWK[] } {
  return { keys: trustedKeys(file, now).map(({ retired_at: _retired, ...jwk }) => jwk) };
}

function publicJwk({ kty, n, e, kid }: StoredJwk): JWK {
  return { kty, n, e, kid, alg: "RS256", use: "sig" };
}

/** The public half of every trusted key, as /oauth/jwks publishes and /mcp verifies with. */
export function publicJwks(file: JwksFile, now = Date.now()): { keys: JWK[] } {
  return { keys: trustedKeys(file, now).map(publicJwk) };
}

/** Trusted public keys at one moment, and when each retired one was retired (ms). */
export interface OAuthKeyView {
  keys: JWK[];
  retiredAt: ReadonlyMap<string, number>;
}

/** How often a replica reads the key file again, so that a rotation reaches it without a restart. */
export const KEY_FILE_REFRESH_MS = 5_000;

export interface OAuthKeyReaderDeps {
  /** The key file (`readOAuthKeys`); a read that throws keeps the keys last read. */
  read(): JwksFile;
  /** The file as the process loaded it at its start. */
  initial: JwksFile;
  refreshMs?: number;
  clock?: () => number;
}

/**
 * The trusted keys of the key file, read again at most every `refreshMs` when asked for (a
 * comparison of two numbers otherwise, so /mcp pays nothing per call), or at once by `reload`. The
 * view is the same object while nothing changed, so a caller may key its own caches on it.
 */
export function createOAuthKeyReader(deps: OAuthKeyReaderDeps) {
  const refreshMs = deps.refreshMs ?? KEY_FILE_REFRESH_MS;
  const clock = deps.clock ?? Date.now;
  let file = deps.initial;
  let readAt = clock();
  let view = viewOf(file, readAt);
  let version = versionOf(view);

  function refresh(now: number): OAuthKeyView {
    readAt = now;
    try {
      file = deps.read();
    } catch {
      // A file mid-replacement or unreadable: the keys last read stay, each still leaving once
      // retired longer than the keep time.
    }
    const next = viewOf(file, now);
    const nextVersion = versionOf(next);
    if (nextVersion !== version) {
      view = next;
      version = nextVersion;
    }
    return view;
  }

  return {
    view(): OAuthKeyView {
      const now = clock();
      return now - readAt >= refreshMs ? refresh(now) : view;
    },
    /** Reads the file now (a token of a key id this replica has not seen). */
    reload: (): OAuthKeyView => refresh(clock()),
    /**
     * The key file as last read, private keys included, read again as `view` is: what the
     * authorization server signs with (its first key not retired), so that a rotation reaches a
     * running replica's new tokens within seconds, not at its restart.
     */
    file(): JwksFile {
      const now = clock();
      if (now - readAt >= refreshMs) refresh(now);
      return file;
    },
  };
}

export type OAuthKeyReader = ReturnType<typeof createOAuthKeyReader>;

function viewOf(file: JwksFile, now: number): OAuthKeyView {
  const trusted = trustedKeys(file, now);
  const retiredAt = new Map<string, number>();
  for (const key of trusted) if (key.retired_at !== undefined) retiredAt.set(key.kid, key.retired_at);
  return { keys: trusted.map(publicJwk), retiredAt };
}

function versionOf(view: OAuthKeyView): string {
  return JSON.stringify(view.keys.map((key) => [key.kid, key.n, view.retiredAt.get(key.kid ?? "")]));
}

export interface RotationResult {
  newKid: string;
  retiredKids: string[];
  droppedKids: string[];
}

/**
 * Puts a new key first; the keys before it are marked retired and dropped once they have been
 * retired longer than an access token lives. Every replica signs with it once it has read the file
 * again (KEY_FILE_REFRESH_MS), without a restart.
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
