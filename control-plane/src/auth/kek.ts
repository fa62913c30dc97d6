// The control plane's key-encryption keys: authenticator secrets are stored AES-256-GCM-encrypted
// under the current key, bound to their operator (the id is the additional data, so a wrapped
// secret moved to another row does not open). `vault kek-rotate` adds a key and re-wraps.
// The keyring also holds the pepper that HMACs short codes (email codes, backup codes), so a copy
// of the database alone does not let anyone brute-force them.
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createPrivateFileExclusive, readPrivateJson, writePrivateFileAtomic } from "@latch/shared/files";
import { withKeyFileLock } from "@latch/shared/key-file-lock";
import { z } from "zod";

const keyringFile = z.object({
  current: z.string(),
  keys: z.record(z.string(), z.string()),
  pepper: z.string(),
  /** A key every replica is given before anything is wrapped under it (`vault kek-rotate --stage`). */
  staged: z.string().optional(),
});
type KeyringFile = z.infer<typeof keyringFile>;

export interface Keyring {
  currentId: string;
  wrap(plaintext: Buffer, boundTo: string): { kekId: string; blob: Buffer };
  unwrap(kekId: string, blob: Uint8Array, boundTo: string): Buffer;
  /** HMAC-SHA256 of a short code under the pepper, hex. */
  hashCode(code: string): string;
  keyIds(): string[];
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

export function keyringPath(dataDir: string): string {
  return join(dataDir, "control-plane", "kek.json");
}

function newKeyId(): string {
  return `kek_${randomBytes(6).toString("hex")}`;
}

export function loadOrCreateKeyring(path: string): Keyring {
  if (!existsSync(path)) {
    const id = newKeyId();
    const fresh: KeyringFile = {
      current: id,
      keys: { [id]: randomBytes(32).toString("base64") },
      pepper: randomBytes(32).toString("base64"),
    };
    createPrivateFileExclusive(path, `${JSON.stringify(fresh, null, 2)}\n`);
  }
  return keyringAt(path);
}

function readKeyringFile(path: string): KeyringFile {
  return keyringFile.parse(readPrivateJson(path));
}

/**
 * A keyring backed by its file. `vault kek-rotate` may change the file while the service runs:
 * wrapping re-reads it (so new secrets go under the new current key) and unwrapping re-reads it
 * when it meets a key id it does not know yet.
 */
function keyringAt(path: string): Keyring {
  let file = readKeyringFile(path);
  const pepper = Buffer.from(file.pepper, "base64");
  const keyOf = (id: string) => {
    if (!file.keys[id]) file = readKeyringFile(path);
    const b64 = file.keys[id];
    if (!b64) throw new Error(`key-encryption key ${id} is not in the keyring`);
    return Buffer.from(b64, "base64");
  };
  return {
    get currentId() {
      return file.current;
    },
    wrap(plaintext, boundTo) {
      file = readKeyringFile(path);
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", keyOf(file.current), iv);
      cipher.setAAD(Buffer.from(boundTo));
      const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
      return { kekId: file.current, blob: Buffer.concat([iv, cipher.getAuthTag(), body]) };
    },
    unwrap(kekId, blob, boundTo) {
      const bytes = Buffer.from(blob);
      const decipher = createDecipheriv("aes-256-gcm", keyOf(kekId), bytes.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(boundTo));
      decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
    },
    hashCode: (code) => createHmac("sha256", pepper).update(code).digest("hex"),
    keyIds: () => Object.keys(file.keys),
  };
}

/**
 * A rotation's key made current, the old ones kept so that rows not yet re-wrapped still open: the
 * staged key when there is one (every replica has it already), else a new one. Rerunning after an
 * interruption reuses a new key that no row uses yet.
 */
export function addKeyringKey(path: string): Keyring {
  changeKeyringFile(path, (file) => {
    const staged = file.staged !== undefined && file.keys[file.staged] ? file.staged : undefined;
    const id = staged ?? newKeyId();
    if (!staged) file.keys[id] = randomBytes(32).toString("base64");
    file.current = id;
    delete file.staged;
  });
  return keyringAt(path);
}

/**
 * One read-modify-write of the keyring, under its lock (`@latch/shared/key-file-lock`): two
 * changes at once (two shells, `make-keys` beside a rotation) would otherwise each write back the
 * keyring it read, and the later would drop the key the earlier added, with every secret wrapped
 * under it. Written whole or not at all.
 */
function changeKeyringFile<T>(path: string, change: (file: KeyringFile) => T): T {
  return withKeyFileLock(path, () => {
    const file = readKeyringFile(path);
    const result = change(file);
    writePrivateFileAtomic(path, `${JSON.stringify(file, null, 2)}\n`);
    return result;
  });
}

/**
 * A hosted rotation's first step: a new key in the file, not yet current, so that the replicas
 * given this file can open what is re-wrapped under it before anything is. Answers its id (the
 * one already staged, on a rerun).
 */
export function stageKeyringKey(path: string): string {
  return changeKeyringFile(path, (file) => {
    if (file.staged !== undefined && file.keys[file.staged]) return file.staged;
    const id = newKeyId();
    file.keys[id] = randomBytes(32).toString("base64");
    file.staged = id;
    return id;
  });
}

/** The key ids `path` holds (none when there is no file yet; nothing is created). */
export function keyringKeyIds(path: string): string[] {
  return existsSync(path) ? Object.keys(readKeyringFile(path).keys) : [];
}

/** The staged key's id, if a rotation staged one. */
export function stagedKeyringKey(path: string): string | undefined {
  const file = readKeyringFile(path);
  return file.staged !== undefined && file.keys[file.staged] ? file.staged : undefined;
}

/** Last step of a rotation: drop keys no row uses any more. */
export function retireKeyringKeys(path: string, stillUsed: ReadonlySet<string>): string[] {
  return changeKeyringFile(path, (file) => {
    const retired = Object.keys(file.keys).filter(
      (id) => id !== file.current && id !== file.staged && !stillUsed.has(id),
    );
    for (const id of retired) delete file.keys[id];
    return retired;
  });
}
