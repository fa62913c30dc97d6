// The `vault serve` console in Chromium: once the vault stops, at its first failed refresh it drops
// the operator token from sessionStorage and stops polling, so a program that takes the freed port
// next receives no bearer (a real `vault serve` process); a body shown cut at 64 KiB is approved
// only once the operator says they approve it unread, as in the hosted console.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { expect, it } from "vitest";
import { CHROMIUM, freePort, skipBrowserTests, watchPage } from "../../test/chromium.ts";
import { startEgressHarness } from "../../test/egress-harness.ts";
import {
  connectLocalAgent,
  LOCAL_TOKENS,
  localOperator,
  startLocalVault,
  toolPayload,
} from "../../test/local.ts";

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

it.skipIf(skipBrowserTests)(
  "a body over 64 KiB, shown cut, is approved only after the operator says it approves it unread",
  async () => {
    const harness = await startEgressHarness();
    const local = await startLocalVault(harness);
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    let agent: Awaited<ReturnType<typeof connectLocalAgent>> | undefined;
    try {
      const stored = await localOperator(local, "POST", "/api/secrets", {
        name: "API_KEY",
        value: "sk_local_unread_canary_5a1c",
        allowed_hosts: ["api.latch.test"],
      });
      expect(stored.status).toBe(201);
      agent = await connectLocalAgent(local.url, "big-body-agent");
      const body = { head: "Ship it", padding: "x".repeat(70 * 1024), tail: "and then delete everything" };
      const asked = toolPayload(
        await agent.callTool({
          name: "http_request",
          arguments: { item_name: "API_KEY", method: "POST", path: "/v1/big", body },
        }),
      );
      expect(asked.status).toBe("pending");
      const statusOfGrant = async () =>
        (
          await localOperator<{ grants: { grant_id: string; status: string }[] }>(local, "GET", "/api/grants")
        ).json.grants.find((g) => g.grant_id === asked.grant_id)?.status;

      const page = await browser.newPage();
      const problems = watchPage(page);
      await page.goto(`${local.url}/#token=${encodeURIComponent(LOCAL_TOKENS.operator)}`);
      const question =
        "Only the first 64 KiB of this request's body is shown. Approve it without reading the rest?";
      for (const [name, done] of [
        ["Approve for 8 hours: API_KEY for big-body-agent", ""],
        ["Approve once: API_KEY for big-body-agent", "Approved API_KEY for big-body-agent for one call."],
      ] as const) {
        const opener = page.getByRole("button", { name, exact: true });
        await opener.waitFor({ state: "visible", timeout: SOON.timeout });
        await opener.click();
        await page.getByRole("group", { name: question }).waitFor({ state: "visible" });
        // Nothing is approved yet; Cancel, focused, gives the decisions back.
        expect(await statusOfGrant()).toBe("pending");
        expect(await page.evaluate("document.activeElement.textContent")).toBe("Cancel");
        await page.getByRole("button", { name: "Cancel" }).click();
        await opener.waitFor({ state: "visible" });
        expect(await statusOfGrant()).toBe("pending");
        if (!done) continue;
        await opener.click();
        await page.getByRole("button", { name: "Approve unread" }).click();
        await expect.poll(() => page.locator("#status").textContent(), SOON).toBe(done);
      }
      expect(await statusOfGrant()).toBe("active");
      expect(problems).toEqual([]);
    } finally {
      await agent?.close();
      await browser.close();
      await local.app.close();
      await local.vault.close();
      await harness.close();
    }
  },
  120_000,
);
