// One process at a time holds the local embedded database (PGlite is single-process). The holder
// writes DATA_DIR/local/db.lock with its pid and, where the system tells it (Linux's /proc), when
// that process started; a lock whose process is gone, or whose pid now names a process started
// another time (the pid reused after a crash or a reboot), is taken over.
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

/**
 * When the process `pid` started, as `<boot id>:<start time in clock ticks>`, read from Linux's
 * /proc; undefined where that cannot be read (another system, the process gone, /proc hidden).
 */
export function processStart(pid: number): string | undefined {
  try {
    const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Field 2 (the command, in parentheses) may hold spaces and parentheses: count from the last ")".
    // The start time is field 22, the 20th after it.
    const startTicks = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
    return boot && startTicks && /^\d+$/.test(startTicks) ? `${boot}:${startTicks}` : undefined;
  } catch {
    return undefined;
  }
}

const lockPath = (dataDir: string) => join(dataDir, "local", "db.lock");

/** The pid written in the lock file, whether or not that process still lives; undefined if none. */
export function readLockHolder(dataDir: string): number | undefined {
  const read = readLock(lockPath(dataDir));
  return typeof read === "object" ? read.pid : undefined;
}

interface LockContent {
  /** The file as read, so that a takeover removes only the lock it judged stale. */
  text: string;
  pid: number;
  /** `processStart` of the holder when it wrote the lock; absent in older locks and elsewhere. */
  started?: string;
}

/**
 * What the lock file holds: a pid (and its start), "missing" (no file: its holder released it, so
 * the exclusive create is tried again, never a takeover), or "unparsable" (present without a pid).
 */
function readLock(path: string): LockContent | "missing" | "unparsable" {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return "missing";
    return "unparsable";
  }
  const [pidField, started] = text.trim().split(/\s+/);
  const pid = Number.parseInt(pidField ?? "", 10);
  if (!Number.isInteger(pid) || pid <= 0) return "unparsable";
  return started ? { text, pid, started } : { text, pid };
}

/** The lock's holder still runs: its pid lives and, where both are known, started when it wrote. */
function holderRuns(holder: LockContent): boolean {
  if (!isAlive(holder.pid)) return false;
  if (holder.started === undefined) return true;
  const now = processStart(holder.pid);
  return now === undefined || now === holder.started;
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
    const started = processStart(process.pid);
    if (createPrivateFileExclusive(path, started ? `${process.pid} ${started}\n` : `${process.pid}\n`)) {
      return {
        release() {
          try {
            const held = readLock(path);
            if (typeof held === "object" && held.pid === process.pid) unlinkSync(path);
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
    if (typeof holder === "object" && holder.pid !== process.pid && holderRuns(holder)) {
      return { heldBy: holder.pid };
    }
    hooks.onStale?.();
    if (!takeOverStale(path, holder)) pause(20);
  }
  throw new Error(`could not take the lock ${path}`);
}

/**
 * Removes the lock at `path` if it still reads as `stale` did (or is still present and
 * unparsable), under that pid's takeover mark. A lock gone or changed meanwhile is left alone.
 * False when another process holds the mark: it is taking the lock over now.
 */
function takeOverStale(path: string, stale: LockContent | "unparsable"): boolean {
  const mark = `${path}.takeover-${stale === "unparsable" ? "unreadable" : stale.pid}`;
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
    const now = readLock(path);
    const same =
      stale === "unparsable" ? now === "unparsable" : typeof now === "object" && now.text === stale.text;
    if (same) unlinkSync(path);
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
