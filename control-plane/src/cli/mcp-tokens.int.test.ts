// `vault mcp` holding the vault itself serves the operator API on loopback too: like `vault serve`,
// it takes a new operator token when it starts, so the token an earlier run printed (a console URL
// left in scrollback or history) is refused, while the CLI (which reads tokens.json anew) and the
// model token keep working. Real `vault` processes.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { VAULT, runVault as vault, vaultEnvironment } from "../../test/vault-process.ts";
import { readLocalRuntime } from "../local/local-server.ts";
import { loadOrCreateLocalTokens, localTokensPath } from "../local/local-tokens.ts";

const running: ChildProcess[] = [];

afterEach(async () => {
  for (const child of running.splice(0)) {
    if (child.exitCode !== null) continue;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.stdin?.end();
    child.kill("SIGTERM");
    await exited;
  }
});

async function startMcp(dataDir: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [VAULT, "mcp"], { env: vaultEnvironment(dataDir), stdio: "pipe" });
  running.push(child);
  let stderr = "";
  child.stderr?.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const runtime = readLocalRuntime(dataDir);
    if (runtime && runtime.pid === child.pid) return { child, url: runtime.url };
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`vault mcp did not start: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const items = (url: string, token: string) =>
  fetch(`${url}/api/items`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.status);

it("vault mcp holding the vault refuses the operator token of an earlier run; the CLI and the model token keep working", async () => {
  const dataDir = join(mkdtempSync(join(tmpdir(), "latch-mcp-tokens-")), ".latch");
  // What an earlier `vault serve` left in tokens.json and printed in its console URL.
  const earlier = loadOrCreateLocalTokens(dataDir);
  expect(existsSync(localTokensPath(dataDir))).toBe(true);

  const { url } = await startMcp(dataDir);
  const now = loadOrCreateLocalTokens(dataDir);
  expect(now.operator).toMatch(/^lvo_[A-Za-z0-9_-]{43}$/);
  expect(now.operator).not.toBe(earlier.operator);
  expect(now.model).toBe(earlier.model);
  expect(await items(url, earlier.operator)).toBe(401);
  expect(await items(url, now.operator)).toBe(200);

  // The CLI reads tokens.json anew and goes through this vault mcp.
  const list = await vault(dataDir, ["list"]);
  expect({ code: list.code, stderr: list.stderr }).toEqual({ code: 0, stderr: "" });
  expect(list.stdout).toContain("No credentials stored");
}, 120_000);
