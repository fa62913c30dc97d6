// Writing key material and other private files: owner-only permissions, never half-written.
import {
  chmodSync,
  closeSync,
  fchmodSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname } from "node:path";

/**
 * Reads a private JSON file (a key file). A file that does not parse is refused naming the file
 * alone: JSON.parse's own message quotes the text around the fault, which in a key file is key
 * material, and that message would reach a log.
 */
export function readPrivateJson(path: string): unknown {
  const text = readFileSync(path, "utf8");
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${path} is not valid JSON (its content is not shown: it holds keys)`);
  }
}

/** Creates `dir` (and parents) readable by the owner only. */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/**
 * Writes a file with mode 0600 through a temporary file and a rename, so that a crash never
 * leaves a truncated key behind and no other user can read it at any moment. The temporary file
 * is flushed to disk before the rename and the folder after it: without the first, a power cut
 * soon after a rotation can leave the renamed file empty (the rename reached the disk, its
 * content did not), and the keyring with it. A process killed before the rename leaves the old
 * file as it was (and a `.tmp` file, removed by the next write of the same process id).
 */
export function writePrivateFileAtomic(path: string, data: string): void {
  ensurePrivateDir(dirname(path));
  const tmp = `${path}.${process.pid}.tmp`;
  const fd = openSync(tmp, "w", 0o600);
  try {
    fchmodSync(fd, 0o600);
    writeFileSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  syncDir(dirname(path));
}

/** Flushes a folder's entries (a rename in it) to disk; a platform that cannot is left as it is. */
function syncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, "r");
    fsyncSync(fd);
  } catch {
    // Not every platform opens a folder for fsync (Windows); the rename itself is still atomic.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Creates `path` only if it does not exist yet, complete or not at all. Two processes creating
 * the same key at once (two proxy replicas on one volume) end up with one key: the loser's link
 * fails and it reads the winner's file. Returns whether this call created it.
 */
export function createPrivateFileExclusive(path: string, data: string): boolean {
  ensurePrivateDir(dirname(path));
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
  writeFileSync(tmp, data, { mode: 0o600, flag: "wx" });
  chmodSync(tmp, 0o600);
  try {
    linkSync(tmp, path);
    return true;
  } catch (error) {
    if ((error as { code?: string }).code === "EEXIST") return false;
    throw error;
  } finally {
    unlinkSync(tmp);
  }
}
