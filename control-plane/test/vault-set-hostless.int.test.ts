// `vault set NAME` without --host, as POST /api/secrets without allowed_hosts (spec 4.4): stored,
// listed with no host, and the output says the credential is sent nowhere until hosts are added.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const VAULT = new URL("../src/cli/vault.ts", import.meta.url).pathname;
const CANARY = "ghp_hostlesscanary_0123456789ab";

function vault(args: string[], env: Record<string, string>, stdin = "") {
  const child = spawn(process.execPath, [VAULT, ...args], { env, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  child.stdin.end(stdin);
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.once("close", (code) => resolve({ code, stdout, stderr })),
  );
}

describe("vault set without --host", () => {
  it("stores the credential with no host and says how to add one", async () => {
    const { BASE_URL: _vite, DATABASE_URL: _db, ...inherited } = process.env;
    const env = {
      ...(inherited as Record<string, string>),
      DATA_DIR: join(mkdtempSync(join(tmpdir(), "latch-vault-hostless-")), ".latch"),
      NODE_ENV: "test",
    };
    const stored = await vault(["set", "LATER_TOKEN"], env, `${CANARY}\n`);
    expect(stored.code, stored.stderr).toBe(0);
    expect(stored.stdout).toBe(
      "Stored LATER_TOKEN with no allowed host (inject bearer, ends in 89ab): agents cannot use it until you run vault set LATER_TOKEN --host HOST.\n",
    );
    const listed = await vault(["list"], env);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/LATER_TOKEN\s+\(none\)\s+bearer\s+89ab/);
    expect(stored.stdout + stored.stderr + listed.stdout + listed.stderr).not.toContain(CANARY);
  }, 90_000);
});
