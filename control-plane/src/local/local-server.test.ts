// Which runtime.json the CLI trusts: it sends the operator token and plaintext values to the
// address inside, so a file left by a server that died must not send them to whoever took the port.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readLocalRuntime } from "./local-server.ts";

let dataDir: string;
const PROOF_KEY = "k".repeat(43);

function write(runtimePid: number, lockPid: number | undefined): void {
  mkdirSync(join(dataDir, "local"), { recursive: true });
  writeFileSync(
    join(dataDir, "local", "runtime.json"),
    JSON.stringify({ pid: runtimePid, url: "http://127.0.0.1:8788", proof_key: PROOF_KEY }),
  );
  if (lockPid !== undefined) writeFileSync(join(dataDir, "local", "db.lock"), `${lockPid}\n`);
}

/** The pid of a process that has already exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "process.exit(0)"]);
  return child.pid ?? 999_999_999;
}

beforeEach(() => {
  dataDir = mkdtempSync(join(tmpdir(), "latch-runtime-"));
});
afterEach(() => {
  rmSync(dataDir, { recursive: true, force: true });
});

describe("readLocalRuntime", () => {
  it("trusts a live server of ours that holds the vault lock", () => {
    write(process.pid, process.pid);
    expect(readLocalRuntime(dataDir)).toEqual({
      pid: process.pid,
      url: "http://127.0.0.1:8788",
      proofKey: PROOF_KEY,
    });
  });

  it("ignores a file without this start's proof key (the CLI could not tell the server from another)", () => {
    write(process.pid, process.pid);
    writeFileSync(
      join(dataDir, "local", "runtime.json"),
      JSON.stringify({ pid: process.pid, url: "http://127.0.0.1:8788" }),
    );
    expect(readLocalRuntime(dataDir)).toBeUndefined();
  });

  it("ignores a file left by a server that died (another user may hold the freed port)", () => {
    const pid = deadPid();
    write(pid, pid);
    expect(readLocalRuntime(dataDir)).toBeUndefined();
  });

  it("ignores a file whose process does not hold the vault lock", () => {
    write(process.pid, undefined);
    expect(readLocalRuntime(dataDir)).toBeUndefined();
    write(process.pid, deadPid());
    expect(readLocalRuntime(dataDir)).toBeUndefined();
  });
});
