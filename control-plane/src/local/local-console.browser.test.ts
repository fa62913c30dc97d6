// The `vault serve` console in Chromium once the vault stops: at its first failed refresh it drops
// the operator token from sessionStorage and stops polling, so a program that takes the freed port
// next receives no bearer. A real `vault serve` process.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { expect, it } from "vitest";
import { CHROMIUM, freePort, skipBrowserTests, watchPage } from "../../test/chromium.ts";

const VAULT = new URL("../cli/vault.ts", import.meta.url).pathname;
const SOON = { timeout: 15_000, interval: 100 };

async function startServe(dataDir: string, port: number): Promise<{ child: ChildProcess; console: string }> {
  const { BASE_URL: _vite, DATABASE_URL: _db, ...inherited } = process.env;
  const child = spawn(process.execPath, [VAULT, "serve", "--port", String(port)], {
    env: { ...(inherited as Record<string, string>), DATA_DIR: dataDir, NODE_ENV: "test", LOG_LEVEL: "warn" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (c: Buffer) => {
      output += c.toString();
      if (/console: +\S+\n/.test(output)) resolve();
    });
    child.once("exit", (code) => reject(new Error(`vault serve exited with ${code}`)));
  });
  return { child, console: output.match(/console: +(\S+)/)?.[1] ?? "" };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

it.skipIf(skipBrowserTests)(
  "after vault serve stops, the console forgets its token and sends nothing to the port's next program",
  async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), "latch-console-stop-")), ".latch");
    const port = await freePort();
    const serve = await startServe(dataDir, port);
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    const seen: (string | undefined)[] = [];
    const impostor = createServer((req, res) => {
      seen.push(req.headers.authorization);
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
    try {
      const page = await browser.newPage();
      const problems = watchPage(page);
      await page.goto(serve.console);
      const stored = () => page.evaluate(() => sessionStorage.getItem("latch-operator-token"));
      await expect.poll(() => page.locator("#items-empty").isVisible(), SOON).toBe(true);
      expect(await stored()).toMatch(/^lvo_/);

      await stop(serve.child);
      await expect.poll(() => page.locator("#status").textContent(), SOON).toContain("The vault stopped");
      expect(await stored()).toBeNull();

      // Another program on the freed port, for longer than one refresh (5 s): not one request.
      await new Promise<void>((resolve) => impostor.listen(port, "127.0.0.1", resolve));
      await page.waitForTimeout(7_000);
      expect(seen).toEqual([]);
      expect(await stored()).toBeNull();
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
      await new Promise((resolve) => impostor.close(resolve));
      await stop(serve.child);
    }
  },
  120_000,
);
