// One change at a time to a key file: a rotation reads the keyring, adds or drops a key and writes
// it back, so two at once (two shells, two replicas' jobs on one volume) would each write the
// keyring it read plus its own key, and the later write would lose the earlier key and every value
// sealed under it. Each read-modify-write holds `<key file>.lock`, created exclusively (O_EXCL);
// a holder that is gone (killed mid-rotation) is taken over on the same host.

import { readFileSync, statSync, unlinkSync } from "node:fs";
import { hostname } from "node:os";
import { createPrivateFileExclusive } from "./files.ts";

/** Thrown when another process holds a key file's lock past the wait: the change was not made. */
export class KeyFileBusyError extends Error {
  readonly code = "key_file_busy";
}

/** How long a change waits for another one to finish (a read-modify-write takes milliseconds). */
export const KEY_FILE_LOCK_WAIT_MS = 3_000;
/** A takeover mark older than this was left by a process killed while taking a lock over. */
const STALE_MARK_MS = 30_000;

interface Holder {
  pid: number;
  host: string;
}

export function keyFileLockPath(keyFile: string): string {
  return `${keyFile}.lock`;
}

function readHolder(lockPath: string): Holder | undefined {
  try {
    const [pid, host] = readFileSync(lockPath, "utf8").trim().split(" ");
    const parsed = Number.parseInt(pid ?? "", 10);
    return Number.isInteger(parsed) && parsed > 0 ? { pid: parsed, host: host ?? "" } : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the holder may still be working: alive here, or on another host (which we cannot ask). */
function isLive(holder: Holder): boolean {
  if (holder.host !== hostname()) return true;
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}

/**
 * Removes a lock whose holder is gone, if it still names that holder. Only the process that makes
 * the takeover mark may remove it: two processes that read the same dead holder must not both
 * remove "the" lock, or the slower one removes the lock the faster one has just taken.
 */
function takeOverStale(lockPath: string, stale: Holder | undefined): void {
  const mark = `${lockPath}.takeover-${stale?.pid ?? "unreadable"}`;
  if (!createPrivateFileExclusive(mark, `${process.pid} ${hostname()}\n`)) {
    try {
      if (Date.now() - statSync(mark).mtimeMs > STALE_MARK_MS) unlinkSync(mark);
    } catch {
      // Gone already.
    }
    return;
  }
  try {
    const now = readHolder(lockPath);
    if (now?.pid === stale?.pid && now?.host === stale?.host) unlinkSync(lockPath);
  } catch {
    // Removed by its holder meanwhile: the next attempt creates it.
  } finally {
    unlinkSync(mark);
  }
}

/** Waits `ms` without returning to the event loop (a key file's change is synchronous). */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function busy(keyFile: string, lockPath: string, holder: Holder | undefined): KeyFileBusyError {
  const who = holder ? `process ${holder.pid} on ${holder.host}` : "another process";
  return new KeyFileBusyError(
    `another change of ${keyFile} is running (${who} holds ${lockPath}); nothing was changed: ` +
      "run this again once it has finished (if that process is gone, remove the lock file)",
  );
}

/**
 * Runs `change` holding the key file's lock (until its promise settles, when it answers one),
 * waiting up to `waitMs` for another holder. Refuses with KeyFileBusyError (naming the holder and
 * the lock file, and nothing of the keys) when it is still held then; `change` has then not run.
 */
export function withKeyFileLock<T>(keyFile: string, change: () => T, options: { waitMs?: number } = {}): T {
  const lockPath = keyFileLockPath(keyFile);
  const deadline = Date.now() + (options.waitMs ?? KEY_FILE_LOCK_WAIT_MS);
  let holder: Holder | undefined;
  for (;;) {
    if (createPrivateFileExclusive(lockPath, `${process.pid} ${hostname()}\n`)) break;
    holder = readHolder(lockPath);
    if (holder === undefined || !isLive(holder)) takeOverStale(lockPath, holder);
    else if (Date.now() >= deadline) throw busy(keyFile, lockPath, holder);
    if (Date.now() >= deadline + STALE_MARK_MS) throw busy(keyFile, lockPath, holder);
    pause(25);
  }
  const release = () => {
    try {
      const now = readHolder(lockPath);
      if (now?.pid === process.pid && now.host === hostname()) unlinkSync(lockPath);
    } catch {
      // Already gone: nothing to release.
    }
  };
  let result: T;
  try {
    result = change();
  } catch (error) {
    release();
    throw error;
  }
  // A change that awaits (it reads, awaits, then writes) holds the lock until it has settled.
  if (result instanceof Promise) return result.finally(release) as T;
  release();
  return result;
}
