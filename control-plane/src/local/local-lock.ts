// One process at a time holds the local embedded database (PGlite is single-process). The holder
// writes DATA_DIR/local/db.lock with its pid; a lock whose process is gone is taken over.
import { readFileSync, statSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { createPrivateFileExclusive } from "@latch/shared/files";

export interface LocalLock {
  release(): void;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}

const lockPath = (dataDir: string) => join(dataDir, "local", "db.lock");

/** The pid written in the lock file, whether or not that process still lives; undefined if none. */
export function readLockHolder(dataDir: string): number | undefined {
  try {
    const holder = Number.parseInt(readFileSync(lockPath(dataDir), "utf8").trim(), 10);
    return Number.isInteger(holder) && holder > 0 ? holder : undefined;
  } catch {
    return undefined;
  }
}

/** A takeover mark older than this was left by a process killed while taking a lock over. */
const STALE_MARK_MS = 30_000;

/**
 * Takes the lock, or answers the pid of the live process that holds it.
 *
 * A lock whose process is gone is taken over, one process at a time: two processes that both read
 * the same dead pid must not both remove "the" lock, or the slower one removes the lock the faster
 * one has just taken, and both open the database. So only the process that creates the mark
 * `db.lock.takeover-<dead pid>` may remove a lock, and only after reading it again under that
 * mark and finding the same dead pid in it.
 */
export function tryLocalLock(
  dataDir: string,
  /** Tests: runs after the stale holder is read and before the takeover, as a rival would. */
  hooks: { onStale?: () => void } = {},
): LocalLock | { heldBy: number } {
  const path = lockPath(dataDir);
  for (let attempt = 0; attempt < 5; attempt++) {
    if (createPrivateFileExclusive(path, `${process.pid}\n`)) {
      return {
        release() {
          try {
            if (Number(readFileSync(path, "utf8").trim()) === process.pid) unlinkSync(path);
          } catch {
            // Already gone: nothing to release.
          }
        },
      };
    }
    const holder = readLockHolder(dataDir);
    if (holder !== undefined && isAlive(holder) && holder !== process.pid) {
      return { heldBy: holder };
    }
    hooks.onStale?.();
    if (!takeOverStale(path, holder, () => readLockHolder(dataDir))) pause(20);
  }
  throw new Error(`could not take the lock ${path}`);
}

/**
 * Removes the lock at `path` if it still names `stale`, under that pid's takeover mark. False when
 * another process holds the mark: it is taking the lock over now.
 */
function takeOverStale(
  path: string,
  stale: number | undefined,
  readHolder: () => number | undefined,
): boolean {
  const mark = `${path}.takeover-${stale ?? "unreadable"}`;
  if (!createPrivateFileExclusive(mark, `${process.pid}\n`)) {
    // Another process is taking it over now; a mark its maker left behind is cleared once old.
    try {
      if (Date.now() - statSync(mark).mtimeMs > STALE_MARK_MS) unlinkSync(mark);
    } catch {
      // Gone already.
    }
    return false;
  }
  try {
    if (readHolder() === stale) unlinkSync(path);
  } catch {
    // Removed by its holder meanwhile: the next attempt creates it.
  } finally {
    unlinkSync(mark);
  }
  return true;
}

/** Waits `ms` without returning to the event loop (taking the lock is synchronous). */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
