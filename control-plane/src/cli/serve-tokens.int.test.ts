// `vault serve` mints a new operator token at each start (the model token stays): a console tab or
// a printed URL of an earlier run carries a bearer the next run refuses. Real `vault` processes.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { VAULT, runVault as vault, vaultEnvironment } from "../../test/vault-process.ts";

interface Started {
  child: ChildProcess;
  operator: string;
  model: string;
  url: string;
}

const running: ChildProcess[] = [];

async function startServe(dataDir: string): Promise<Started> {
  const child = spawn(process.execPath, [VAULT, "serve", "--port", "0"], {
    env: vaultEnvironment(dataDir),
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.push(child);
  let output = "";
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (c: Buffer) => {
      output += c.toString();
      if (/console: +\S+/.test(output)) resolve();
    });
    child.once("exit", (code) => reject(new Error(`vault serve exited with ${code}`)));
  });
  const line = (name: string) => output.match(new RegExp(`^${name}=(\\S+)$`, "m"))?.[1] ?? "";
  const url = output.match(/listening on (\S+)/)?.[1] ?? "";
  expect(output).toContain(`${url}/#token=${line("LATCH_OPERATOR_TOKEN")}`);
  return { child, operator: line("LATCH_OPERATOR_TOKEN"), model: line("LATCH_MODEL_TOKEN"), url };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

const items = (url: string, token: string) =>
  fetch(`${url}/api/items`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.status);

afterEach(async () => {
  for (const child of running.splice(0)) await stop(child);
});

it("two starts print two operator tokens, the first refused by the second run; the model token and the CLI keep working", async () => {
  const dataDir = join(mkdtempSync(join(tmpdir(), "latch-serve-tokens-")), ".latch");
  const first = await startServe(dataDir);
  expect(first.operator).toMatch(/^lvo_[A-Za-z0-9_-]{43}$/);
  expect(await items(first.url, first.operator)).toBe(200);
  await stop(first.child);

  const second = await startServe(dataDir);
  expect(second.operator).toMatch(/^lvo_/);
  expect(second.operator).not.toBe(first.operator);
  expect(second.model).toBe(first.model);
  expect(await items(second.url, first.operator)).toBe(401);
  expect(await items(second.url, second.operator)).toBe(200);
  // The CLI reads tokens.json anew: it goes through the restarted server with the new token.
  const list = await vault(dataDir, ["list"]);
  expect({ code: list.code, stderr: list.stderr }).toEqual({ code: 0, stderr: "" });
  expect(list.stderr).not.toContain("Opening the local vault");
}, 180_000);
