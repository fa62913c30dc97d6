// One process at a time holds the local embedded database (PGlite is single-process). The holder
// writes DATA_DIR/local/db.lock with its pid; a lock whose process is gone is taken over.
import { readFileSync, unlinkSync } from "node:fs";
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

/** Takes the lock, or answers the pid of the live process that holds it. */
export function tryLocalLock(dataDir: string): LocalLock | { heldBy: number } {
  const path = lockPath(dataDir);
  for (let attempt = 0; attempt < 2; attempt++) {
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
    // Stale: its process has exited without releasing it.
    try {
      unlinkSync(path);
    } catch {
      // Another process removed it first; try again.
    }
  }
  throw new Error(`could not take the lock ${path}`);
}
