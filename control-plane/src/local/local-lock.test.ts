import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { processStart, readLockHolder, tryLocalLock } from "./local-lock.ts";

/** A pid no process has: above Linux's pid_max (4 194 304). */
const DEAD_PID = 2 ** 22 + 17;

describe("the local vault's lock", () => {
  let dataDir: string;
  const lockFile = () => join(dataDir, "local", "db.lock");
  const writeLock = (pid: number) => writeFileSync(lockFile(), `${pid}\n`, { mode: 0o600 });

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), "latch-lock-"));
    mkdirSync(join(dataDir, "local"), { mode: 0o700 });
  });
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  it("is held by one process: a second take names the live holder", () => {
    writeLock(process.ppid);
    expect(tryLocalLock(dataDir)).toEqual({ heldBy: process.ppid });
    expect(readLockHolder(dataDir)).toBe(process.ppid);
  });

  it("writes when its holder started, and names a live holder that started then", () => {
    const lock = tryLocalLock(dataDir) as { release(): void };
    const started = processStart(process.pid);
    expect(started).toMatch(/^[0-9a-f-]{36}:\d+$/);
    expect(readFileSync(lockFile(), "utf8")).toBe(`${process.pid} ${started}\n`);
    lock.release();
    writeFileSync(lockFile(), `${process.ppid} ${processStart(process.ppid)}\n`, { mode: 0o600 });
    expect(tryLocalLock(dataDir)).toEqual({ heldBy: process.ppid });
  });

  it("takes over a lock whose pid now names a process started another time (a reused pid)", () => {
    // The parent lives, but did not write this lock: the process that did started at tick 1.
    const [boot] = (processStart(process.ppid) ?? "").split(":");
    writeFileSync(lockFile(), `${process.ppid} ${boot}:1\n`, { mode: 0o600 });
    const lock = tryLocalLock(dataDir);
    expect(readLockHolder(dataDir)).toBe(process.pid);
    expect(readdirSync(join(dataDir, "local"))).toEqual(["db.lock"]);
    (lock as { release(): void }).release();
    // And one written before a reboot (another boot id).
    writeFileSync(
      lockFile(),
      `${process.ppid} 00000000-0000-0000-0000-000000000000:${(processStart(process.ppid) ?? "").split(":")[1]}\n`,
      { mode: 0o600 },
    );
    const again = tryLocalLock(dataDir);
    expect(readLockHolder(dataDir)).toBe(process.pid);
    (again as { release(): void }).release();
  });

  it("takes over a lock whose process is gone, and leaves no takeover mark", () => {
    writeLock(DEAD_PID);
    const lock = tryLocalLock(dataDir);
    expect("release" in lock).toBe(true);
    expect(readLockHolder(dataDir)).toBe(process.pid);
    expect(readdirSync(join(dataDir, "local"))).toEqual(["db.lock"]);
    (lock as { release(): void }).release();
    expect(existsSync(lockFile())).toBe(false);
  });

  it("never removes the lock a rival took over first from the same dead process", () => {
    writeLock(DEAD_PID);
    // Both read the dead pid; the rival (a live process) takes the lock over before this one acts.
    const outcome = tryLocalLock(dataDir, {
      onStale: () => {
        rmSync(lockFile());
        writeLock(process.ppid);
      },
    });
    expect(outcome).toEqual({ heldBy: process.ppid });
    expect(readFileSync(lockFile(), "utf8")).toBe(`${process.ppid}\n`);
  });

  it("waits for a rival's takeover in progress, then names the rival", () => {
    writeLock(DEAD_PID);
    const mark = `${lockFile()}.takeover-${DEAD_PID}`;
    writeFileSync(mark, `${process.ppid}\n`);
    let stale = 0;
    const outcome = tryLocalLock(dataDir, {
      onStale: () => {
        // The rival finishes while this one waits: it removed the stale lock and took it.
        if (++stale === 2) {
          rmSync(mark);
          writeLock(process.ppid);
        }
      },
    });
    expect(stale).toBe(2);
    expect(outcome).toEqual({ heldBy: process.ppid });
  });

  it("creates the lock again when its holder released it between the create and the read: no takeover", () => {
    writeLock(process.ppid);
    let found = 0;
    let stale = 0;
    const lock = tryLocalLock(dataDir, {
      // The live holder releases it just after this process found it there.
      onFound: () => {
        if (++found === 1) rmSync(lockFile());
      },
      onStale: () => {
        stale++;
      },
    });
    expect(stale).toBe(0);
    expect(found).toBe(1);
    expect(readLockHolder(dataDir)).toBe(process.pid);
    // No takeover mark was ever made, so nothing could remove a lock another process just took.
    expect(readdirSync(join(dataDir, "local"))).toEqual(["db.lock"]);
    (lock as { release(): void }).release();
  });

  it("takes over a lock that is present but names no pid", () => {
    writeFileSync(lockFile(), "not a pid\n", { mode: 0o600 });
    const lock = tryLocalLock(dataDir);
    expect(readLockHolder(dataDir)).toBe(process.pid);
    expect(readdirSync(join(dataDir, "local"))).toEqual(["db.lock"]);
    (lock as { release(): void }).release();
  });

  it("clears a takeover mark left by a process killed mid-way, once it is old", () => {
    writeLock(DEAD_PID);
    const mark = `${lockFile()}.takeover-${DEAD_PID}`;
    writeFileSync(mark, `${DEAD_PID + 1}\n`);
    const old = new Date(Date.now() - 60_000);
    utimesSync(mark, old, old);
    const lock = tryLocalLock(dataDir);
    expect(readLockHolder(dataDir)).toBe(process.pid);
    expect(existsSync(mark)).toBe(false);
    (lock as { release(): void }).release();
  });
});
