// The rig of the browser tests: Debian's headless Chromium (playwright-core drives it) against the
// real hosted plane listening on a real port, with BASE_URL naming that port (the pages refuse a
// foreign Origin). Screenshots go to test-artifacts/browser/.
import { existsSync, mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { type Browser, chromium } from "playwright-core";
import { type HostedHarness, startHosted } from "./hosted.ts";

export const CHROMIUM = "/usr/bin/chromium";
export const hasChromium = existsSync(CHROMIUM);
/** Browser tests are skipped without Chromium, except on CI, where a missing one is a failure. */
export const skipBrowserTests = !hasChromium && !process.env.CI;
export const SHOTS = fileURLToPath(new URL("../../test-artifacts/browser/", import.meta.url));

export interface BrowserRig {
  h: HostedHarness;
  base: string;
  browser: Browser;
  close(): Promise<void>;
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (!address || typeof address === "string") throw new Error("no port");
  return address.port;
}

export async function startBrowserRig(
  options: { providerHosts?: readonly string[] } = {},
): Promise<BrowserRig> {
  if (!hasChromium) {
    throw new Error(
      `${CHROMIUM} is missing: install Debian's chromium (apt-get install chromium; .ci/run does it)`,
    );
  }
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const h = await startHosted({
    baseUrl: base,
    ...(options.providerHosts ? { providerHosts: options.providerHosts } : {}),
  });
  await h.app.listen({ host: "127.0.0.1", port });
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  mkdirSync(SHOTS, { recursive: true });
  return {
    h,
    base,
    browser,
    async close() {
      await browser.close();
      await h.close();
    },
  };
}
