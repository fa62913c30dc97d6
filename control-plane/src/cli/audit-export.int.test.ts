// `vault audit export --output FILE` as a real `vault` process: FILE ends owner-only whatever its
// mode was, and an export that fails (here before the vault opens) leaves FILE as it was rather
// than truncated.
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";

const VAULT = new URL("./vault.ts", import.meta.url).pathname;

function vault(dataDir: string, args: string[]): Promise<{ code: number | null; stderr: string }> {
  const { BASE_URL: _vite, DATABASE_URL: _db, ...inherited } = process.env;
  const env = {
    ...(inherited as Record<string, string>),
    DATA_DIR: dataDir,
    NODE_ENV: "test",
    LOG_LEVEL: "warn",
  };
  const child = spawn(process.execPath, [VAULT, ...args], { env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stderr })));
}

it("vault audit export --output leaves an existing 0644 FILE 0600, and a failed export leaves FILE untouched", async () => {
  const dir = mkdtempSync(join(tmpdir(), "latch-audit-export-cli-"));
  const file = join(dir, "ledger.jsonl");
  writeFileSync(file, "an older export\n");
  chmodSync(file, 0o644);

  // DATA_DIR is a plain file: the vault cannot open, the export fails before its first line.
  const notADirectory = join(dir, "not-a-directory");
  writeFileSync(notADirectory, "");
  const failed = await vault(notADirectory, ["audit", "export", "--output", file]);
  expect(failed.code).toBe(1);
  expect(readFileSync(file, "utf8")).toBe("an older export\n");

  const done = await vault(join(dir, ".latch"), ["audit", "export", "--output", file]);
  expect({ code: done.code, stderr: done.stderr }).toMatchObject({ code: 0 });
  expect(done.stderr).toContain(`wrote ${file}`);
  expect(readFileSync(file, "utf8")).not.toContain("an older export");
  expect(statSync(file).mode & 0o777).toBe(0o600);
}, 120_000);
