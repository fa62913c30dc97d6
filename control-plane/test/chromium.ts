// The rig of the browser tests: Debian's headless Chromium (playwright-core drives it) against the
// real hosted plane listening on a real port, with BASE_URL naming that port (the pages refuse a
// foreign Origin). Screenshots go to test-artifacts/browser/.
import { existsSync, mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import * as OTPAuth from "otpauth";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { expect } from "vitest";
import { forgetEmailCodeSends, type HostedHarness, lastCodeFor, startHosted, uniqueEmail } from "./hosted.ts";

export const CHROMIUM = "/usr/bin/chromium";
export const hasChromium = existsSync(CHROMIUM);
/** Browser tests are skipped without Chromium, except on CI, where a missing one is a failure. */
export const skipBrowserTests = !hasChromium && !process.env.CI;
export const SHOTS = fileURLToPath(new URL("../../test-artifacts/browser/", import.meta.url));

/**
 * Saves a full-page screenshot to test-artifacts/browser/`name`: evidence for a reviewer, never
 * an assertion. Chromium now and then refuses a full-page capture on a busy machine ("Unable to
 * capture screenshot"); the visible part is kept instead, and a capture that still fails only warns.
 */
export async function saveScreenshot(page: Page, name: string): Promise<void> {
  const path = `${SHOTS}${name}`;
  try {
    await page.screenshot({ path, fullPage: true });
  } catch {
    await page.screenshot({ path }).catch((error: unknown) => {
      console.warn(`screenshot ${name} not saved: ${(error as Error).message.split("\n")[0]}`);
    });
  }
}

export interface BrowserRig {
  h: HostedHarness;
  base: string;
  browser: Browser;
  close(): Promise<void>;
}

/**
 * What should fail a test on `page`, from now on: a script error, anything the CSP refused, and a
 * request or script failure the pages report themselves (common.js logs "Latch: ...").
 */
export function watchPage(page: Page): string[] {
  const problems: string[] = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (/content security policy|refused to|^Latch: /i.test(message.text())) problems.push(message.text());
  });
  return problems;
}

/**
 * A new page, watched (watchPage), in a context of its own: holding an operator's session when
 * `session` gives its cookies (an ApiBrowser's) and the address they are for.
 */
export async function openWatchedPage(
  browser: Browser,
  options: {
    ignoreHTTPSErrors?: boolean;
    viewport?: { width: number; height: number };
    acceptDownloads?: boolean;
    /** An origin whose pages may read and write the clipboard (a copy button's test). */
    clipboardFor?: string;
    session?: { cookies: Iterable<[string, string]>; url: string };
  } = {},
): Promise<{ page: Page; context: BrowserContext; problems: string[] }> {
  const { clipboardFor, session, ...contextOptions } = options;
  const context = await openContext(browser, { ...contextOptions, ...(session ? { session } : {}) });
  if (clipboardFor)
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: clipboardFor });
  const page = await context.newPage();
  return { page, context, problems: watchPage(page) };
}

/** A browser context (1100 x 900 unless told), holding an operator's session when given its cookies. */
export async function openContext(
  browser: Browser,
  options: {
    ignoreHTTPSErrors?: boolean;
    viewport?: { width: number; height: number };
    acceptDownloads?: boolean;
    session?: { cookies: Iterable<[string, string]>; url: string };
  } = {},
): Promise<BrowserContext> {
  const { session, ...contextOptions } = options;
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 }, ...contextOptions });
  if (session) {
    await context.addCookies(
      [...session.cookies].map(([name, value]) => ({ name, value, url: session.url })),
    );
  }
  return context;
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
  options: {
    providerHosts?: readonly string[];
    /**
     * The host BASE_URL names (default 127.0.0.1). Passkeys need a domain: WebAuthn refuses an IP
     * address as a relying party id, and Chromium treats http://localhost as a secure context.
     */
    hostname?: "127.0.0.1" | "localhost";
    /** Extra Chromium flags (host resolver rules for a test's TLS origins). */
    chromiumArgs?: readonly string[];
    /**
     * Runs once BASE_URL is known, before the plane starts: a test's own TLS origin that must
     * name BASE_URL (an identity provider's redirect URI) answers its connect-to entries and flags.
     */
    prepare?: (
      base: string,
    ) => Promise<{ connectTo?: readonly string[]; chromiumArgs?: readonly string[]; ssoDnsUrl?: string }>;
  } = {},
): Promise<BrowserRig> {
  if (!hasChromium) {
    throw new Error(
      `${CHROMIUM} is missing: install Debian's chromium (apt-get install chromium; .ci/run does it)`,
    );
  }
  const port = await freePort();
  const base = `http://${options.hostname ?? "127.0.0.1"}:${port}`;
  const prepared = (await options.prepare?.(base)) ?? {};
  const h = await startHosted({
    baseUrl: base,
    ...(options.providerHosts ? { providerHosts: options.providerHosts } : {}),
    ...(prepared.connectTo ? { connectTo: prepared.connectTo } : {}),
    ...(prepared.ssoDnsUrl ? { ssoDnsUrl: prepared.ssoDnsUrl } : {}),
  });
  await h.app.listen({ host: "127.0.0.1", port });
  // Chromium's requests really come from 127.0.0.1: earlier rigs' email codes must not count.
  await forgetEmailCodeSends("127.0.0.1");
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", ...(options.chromiumArgs ?? []), ...(prepared.chromiumArgs ?? [])],
  });
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

/** The pages a sign-up through the browser passes, for a test that looks at each on the way. */
export type SignUpStep = "sign-up" | "email-code" | "enroll-totp" | "backup-codes";

/**
 * Signs up through the pages (email, the mailed code, an authenticator enrolled from the setup
 * key, the backup codes) and reaches the console; `at` is awaited at each step before moving on.
 * Answers the operator's email and authenticator.
 */
export async function signUpInChromium(
  page: Page,
  h: Pick<HostedHarness, "inbox" | "clock">,
  base: string,
  options: { label?: string; at?: (step: SignUpStep) => Promise<void> } = {},
): Promise<{ email: string; totp: OTPAuth.TOTP }> {
  const at = options.at ?? (async () => {});
  const email = uniqueEmail(options.label ?? "chromium");
  await page.goto(`${base}/sign-up`);
  await at("sign-up");
  await page.getByLabel("Email address").fill(email);
  await page.getByRole("button", { name: "Email me a code" }).click();
  const codeField = page.getByLabel("8-digit code from the email");
  await codeField.waitFor({ state: "visible" });
  await expect.poll(() => h.inbox.mails.filter((m) => m.to === email).length).toBe(1);
  await at("email-code");
  await codeField.fill(lastCodeFor(h.inbox, email));
  await page.getByRole("button", { name: "Create account" }).click();
  await page.waitForURL(`${base}/enroll-totp`);
  await expect.poll(() => page.locator("#secret").textContent()).toMatch(/^[A-Z2-7]{4} /);
  await expect
    .poll(() =>
      page
        .locator("#qr")
        .evaluate((img: { complete: boolean; naturalWidth: number }) => img.complete && img.naturalWidth),
    )
    .toBeGreaterThan(0);
  await at("enroll-totp");
  const secret = (await page.locator("#secret").textContent())!.replace(/\s+/g, "");
  const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret) });
  await page
    .getByLabel("6-digit code from the app")
    .fill(totp.generate({ timestamp: h.clock.now.getTime() }));
  await page.getByRole("button", { name: "Confirm" }).click();
  await expect.poll(() => page.locator("#backup-codes li").count()).toBe(10);
  // Set up: the authenticator's secret and QR are gone from the page.
  expect(await page.locator("#secret").textContent()).toBe("");
  expect(await page.locator("#qr").getAttribute("src")).toBeNull();
  await at("backup-codes");
  await page.getByRole("link", { name: "Continue to console" }).click();
  await page.waitForURL(`${base}/console`);
  return { email, totp };
}
