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
  const read = readLock(lockPath(dataDir));
  return typeof read === "number" ? read : undefined;
}

/**
 * What the lock file holds: a pid, "missing" (no file: its holder released it, so the exclusive
 * create is tried again, never a takeover), or "unparsable" (present without a pid in it).
 */
function readLock(path: string): number | "missing" | "unparsable" {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return "missing";
    return "unparsable";
  }
  const holder = Number.parseInt(text.trim(), 10);
  return Number.isInteger(holder) && holder > 0 ? holder : "unparsable";
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
  hooks: {
    /** Tests: runs after the exclusive create found a lock, before it is read, as its holder would. */
    onFound?: () => void;
    /** Tests: runs after the stale holder is read and before the takeover, as a rival would. */
    onStale?: () => void;
  } = {},
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
    hooks.onFound?.();
    const holder = readLock(path);
    // Released between the create and the read: create it again now. Removing "it" could remove
    // the lock another process has just created.
    if (holder === "missing") continue;
    if (typeof holder === "number" && isAlive(holder) && holder !== process.pid) {
      return { heldBy: holder };
    }
    hooks.onStale?.();
    if (!takeOverStale(path, holder)) pause(20);
  }
  throw new Error(`could not take the lock ${path}`);
}

/**
 * Removes the lock at `path` if it still names `stale` (or is still present and unparsable), under
 * that pid's takeover mark. A lock gone meanwhile is left alone. False when another process holds
 * the mark: it is taking the lock over now.
 */
function takeOverStale(path: string, stale: number | "unparsable"): boolean {
  const mark = `${path}.takeover-${stale === "unparsable" ? "unreadable" : stale}`;
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
    if (readLock(path) === stale) unlinkSync(path);
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
