// Rotations of the sealing keyring that race: several `make-keys --new-sealing-key` started at
// once (two shells, two jobs on one volume) each add their key, and none drops another's.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readPrivateJson } from "@latch/shared/files";
import { describe, expect, it } from "vitest";
import { loadOrCreateSealingKeyring, sealingKeyPath } from "./sealing-keys.ts";

const sealingModule = new URL("./sealing-keys.ts", import.meta.url).pathname;

/** Runs addSealingKey in a process of its own, all of them released at `startAt`. */
function rotateInChild(path: string, startAt: number): Promise<{ code: number | null; out: string }> {
  const script = `
    const { addSealingKey } = await import(${JSON.stringify(sealingModule)});
    while (Date.now() < ${startAt});
    process.stdout.write(addSealingKey(${JSON.stringify(path)}));
  `;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script]);
    let out = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (out += chunk));
    child.on("exit", (code) => resolve({ code, out }));
  });
}

describe("rotating the sealing key from several processes at once", () => {
  it("ends with every key each rotation added, and the first one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "latch-seal-race-"));
    const keyring = await loadOrCreateSealingKeyring(dir);
    const first = keyring.current.keyId;
    keyring.close();
    const path = sealingKeyPath(dir);
    const startAt = Date.now() + 1500;
    const runs = await Promise.all(Array.from({ length: 6 }, () => rotateInChild(path, startAt)));
    for (const run of runs) expect(run.code, run.out).toBe(0);
    const held = (readPrivateJson(path) as { keys: { keyId: string }[] }).keys.map((k) => k.keyId);
    expect(new Set(held)).toEqual(new Set([first, ...runs.map((run) => run.out)]));
    expect(held.at(-1)).toBe(first);
  });
});
