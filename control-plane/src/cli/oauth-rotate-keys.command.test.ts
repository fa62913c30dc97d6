// `vault oauth-rotate-keys` twice at once on one DATA_DIR: each rotation adds its key or refuses
// clearly, and every key added stays listed (before, both went on and the later write dropped the
// earlier key).
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { KeyFileBusyError, keyFileLockPath } from "@latch/shared/key-file-lock";
import { describe, expect, it } from "vitest";
import { loadOrCreateOAuthKeys, oauthKeysPath } from "../oauth/oauth-keys.ts";
import { runOAuthRotateKeys } from "./oauth-rotate-keys.command.ts";

describe("vault oauth-rotate-keys", () => {
  it("two rotations at once: each either adds its key or refuses, and no key is lost", async () => {
    const dataDir = mkdtempSync(`${tmpdir()}/latch-oauth-rotate-`);
    const first = (await loadOrCreateOAuthKeys(dataDir)).keys[0]!.kid;
    const lines: string[][] = [[], []];
    const runs = await Promise.allSettled(
      lines.map((out) => runOAuthRotateKeys({ DATA_DIR: dataDir }, (line) => out.push(line))),
    );
    for (const run of runs) {
      if (run.status === "fulfilled") continue;
      expect(run.reason).toBeInstanceOf(KeyFileBusyError);
      expect((run.reason as Error).message).toContain("nothing was changed");
    }
    const added = lines
      .flat()
      .filter((line) => line.startsWith("new signing key "))
      .map((line) => line.slice("new signing key ".length));
    expect(added).toHaveLength(runs.filter((run) => run.status === "fulfilled").length);
    expect(added.length).toBeGreaterThan(0);
    const kids = (await loadOrCreateOAuthKeys(dataDir)).keys.map((key) => key.kid);
    expect(kids.sort()).toEqual([...added, first].sort());
  });

  it("refuses while another live process holds the key file's lock, and changes nothing", async () => {
    const dataDir = mkdtempSync(`${tmpdir()}/latch-oauth-rotate-`);
    const before = await loadOrCreateOAuthKeys(dataDir);
    // A rotation in another process on this host, in the middle of its change.
    const holder = spawn(process.execPath, ["-e", "setTimeout(() => {}, 20000)"], { stdio: "ignore" });
    try {
      writeFileSync(keyFileLockPath(oauthKeysPath(dataDir)), `${holder.pid} ${hostname()}\n`);
      await expect(runOAuthRotateKeys({ DATA_DIR: dataDir }, () => {})).rejects.toBeInstanceOf(
        KeyFileBusyError,
      );
      expect(await loadOrCreateOAuthKeys(dataDir)).toEqual(before);
    } finally {
      holder.kill("SIGKILL");
    }
  });
});
