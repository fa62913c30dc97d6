// Real `vault` processes for tests of the command line: its path, the environment each runs with
// (its own DATA_DIR, the embedded database whatever the test run uses, quiet logs), and one command
// run to its end.
import { spawn } from "node:child_process";

export const VAULT = new URL("../src/cli/vault.ts", import.meta.url).pathname;

export interface VaultRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Ours without BASE_URL (vitest's) or DATABASE_URL: the local vault is always embedded. */
export function vaultEnvironment(dataDir: string): Record<string, string> {
  const { BASE_URL: _vite, DATABASE_URL: _db, ...inherited } = process.env;
  return { ...(inherited as Record<string, string>), DATA_DIR: dataDir, NODE_ENV: "test", LOG_LEVEL: "warn" };
}

/** `vault ...args` to its end, `stdin` written to it first. */
export function runVault(dataDir: string, args: string[], stdin = ""): Promise<VaultRun> {
  const child = spawn(process.execPath, [VAULT, ...args], { env: vaultEnvironment(dataDir), stdio: "pipe" });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  child.stdin.end(stdin);
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
}
