// Changes of the KEK keyring that race: `vault kek-rotate` (adding a key) and `--stage` started at
// once from several shells on one DATA_DIR each change the keyring they read; none may drop a key
// another added, or the secrets wrapped under it never open again.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readPrivateJson } from "@latch/shared/files";
import { describe, expect, it } from "vitest";
import { loadOrCreateKeyring } from "./kek.ts";

const kekModule = new URL("./kek.ts", import.meta.url).pathname;

/** Runs `call` (over kek.ts's exports) in a process of its own, all of them released at `startAt`. */
function inChild(call: string, startAt: number): Promise<{ code: number | null; out: string }> {
  const script = `
    const kek = await import(${JSON.stringify(kekModule)});
    while (Date.now() < ${startAt});
    ${call};
  `;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script]);
    let out = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (out += chunk));
    child.on("exit", (code) => resolve({ code, out }));
  });
}

describe("the KEK keyring changed from several processes at once", () => {
  it("keeps every key each rotation added", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "latch-kek-race-")), "kek.json");
    const first = loadOrCreateKeyring(path).currentId;
    const startAt = Date.now() + 1500;
    const runs = await Promise.all(
      Array.from({ length: 5 }, () =>
        inChild(
          `process.stdout.write(kek.addKeyringKey(${JSON.stringify(path)}).keyIds().join(","))`,
          startAt,
        ),
      ),
    );
    for (const run of runs) expect(run.code, run.out).toBe(0);
    const file = readPrivateJson(path) as { current: string; keys: Record<string, string> };
    expect(Object.keys(file.keys)).toHaveLength(6);
    expect(Object.keys(file.keys)).toContain(first);
  });

  it("keeps every staged and added key when only additions race", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "latch-kek-race-")), "kek.json");
    const first = loadOrCreateKeyring(path).currentId;
    const startAt = Date.now() + 1500;
    const runs = await Promise.all([
      ...Array.from({ length: 5 }, () => inChild(`kek.addKeyringKey(${JSON.stringify(path)})`, startAt)),
      inChild(`process.stdout.write(kek.stageKeyringKey(${JSON.stringify(path)}))`, startAt),
    ]);
    for (const run of runs) expect(run.code, run.out).toBe(0);
    const file = readPrivateJson(path) as { current: string; keys: Record<string, string> };
    // The first key, one per addition and the staged one (taken by an addition when it came first).
    expect(Object.keys(file.keys)).toContain(first);
    expect(Object.keys(file.keys)).toContain(runs.at(-1)!.out);
    expect(Object.keys(file.keys).length).toBeGreaterThanOrEqual(6);
  });
});
