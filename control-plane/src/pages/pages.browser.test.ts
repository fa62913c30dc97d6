// The sign-up, enrolment, console and sign-in pages in a real headless Chromium against the real
// hosted plane on a real port: the page scripts, the CSP, cookies and CSRF header, the QR and the
// setup key, backup codes, and the error messages in the status region. Screenshots of each step
// go to test-artifacts/browser/. Needs Debian's chromium: skipped without it, except on CI.
import { readFileSync } from "node:fs";
import * as OTPAuth from "otpauth";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type BrowserRig,
  openWatchedPage,
  saveScreenshot,
  skipBrowserTests,
  startBrowserRig,
} from "../../test/chromium.ts";
import { type HostedHarness, lastCodeFor, operatorWithClient, uniqueEmail } from "../../test/hosted.ts";

describe.skipIf(skipBrowserTests)("the sign-in pages in Chromium", () => {
  let rig: BrowserRig | undefined;
  let h: HostedHarness;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    rig = await startBrowserRig();
    ({ h, base, browser } = rig);
  }, 120_000);

  afterAll(async () => {
    await rig?.close();
  });

  /** A new page that records script errors and anything the CSP refused; it may use the clipboard. */
  const openPage = () =>
    openWatchedPage(browser, {
      viewport: { width: 900, height: 900 },
      acceptDownloads: true,
      clipboardFor: base,
    });

  const shot = (page: Page, name: string) => saveScreenshot(page, `${name}.png`);

  /** The code of the next sign-in mail to `email` (after `before` mails to it). */
  async function nextCode(email: string, before: number): Promise<string> {
    await expect.poll(() => h.inbox.mails.filter((m) => m.to === email).length).toBeGreaterThan(before);
    return lastCodeFor(h.inbox, email);
  }
  const mailsTo = (email: string) => h.inbox.mails.filter((m) => m.to === email).length;

  it("signs up, enrols an authenticator, reaches the console, signs out and back in with a backup code", async () => {
    const { page, problems } = await openPage();
    const email = uniqueEmail("chromium");

    // Sign up: email, then the 8-digit code from the mail.
    await page.goto(`${base}/sign-up`);
    await expect.poll(() => page.title()).toBe("Create an account · Latch");
    await shot(page, "01-sign-up");
    await page.getByLabel("Email address").fill(email);
    await page.getByRole("button", { name: "Email me a code" }).click();
    const codeField = page.getByLabel("8-digit code from the email");
    await codeField.waitFor({ state: "visible" });
    await expect.poll(() => page.locator("#status").textContent()).toBe("Code sent. Check your email.");
    await shot(page, "02-email-code");
    await codeField.fill(await nextCode(email, 0));
    await page.getByRole("button", { name: "Create account" }).click();

    // Enrol: the QR renders from a data: URL, the setup key is shown as text.
    await page.waitForURL(`${base}/enroll-totp`);
    const secretText = page.locator("#secret");
    await expect.poll(() => secretText.textContent()).toMatch(/^[A-Z2-7]{4}( [A-Z2-7]{1,4})+$/);
    const qrSource = await page.locator("#qr").getAttribute("src");
    expect(qrSource).toMatch(/^data:image\/svg\+xml;base64,/);
    await expect
      .poll(() =>
        page
          .locator("#qr")
          .evaluate((img: { complete: boolean; naturalWidth: number }) => img.complete && img.naturalWidth),
      )
      .toBeGreaterThan(0);
    expect(await page.locator("#account").textContent()).toBe(`Latch:${email}`);
    await shot(page, "03-enroll-totp");
    const secret = (await secretText.textContent())!.replace(/\s+/g, "");
    const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret) });

    // A wrong code is refused in the status region; the right one gives the backup codes once.
    const appCode = page.getByLabel("6-digit code from the app");
    await appCode.fill("000000");
    await appCode.press("Enter");
    await expect.poll(() => page.locator("#status").textContent()).toMatch(/does not match/i);
    expect(await appCode.getAttribute("aria-invalid")).toBe("true");
    await appCode.fill(totp.generate({ timestamp: h.clock.now.getTime() }));
    await page.getByRole("button", { name: "Confirm" }).click();
    const backupCodes = page.locator("#backup-codes li");
    await expect.poll(() => backupCodes.count()).toBe(10);
    const codes = await backupCodes.allTextContents();
    for (const code of codes) expect(code).toMatch(/^[2-9A-HJKMNP-Z]{5}-[2-9A-HJKMNP-Z]{5}$/);
    expect(await page.locator("#setup").isHidden()).toBe(true);
    expect(await page.locator(":focus").getAttribute("id")).toBe("backup-heading");
    await shot(page, "04-backup-codes");
    // The codes go where the operator keeps them: the clipboard, a text file, or paper.
    await page.getByRole("button", { name: "Copy codes" }).click();
    await expect.poll(() => page.locator("#status").textContent()).toBe("Copied backup codes.");
    const copied = (await page.evaluate("navigator.clipboard.readText()")) as string;
    for (const code of codes) expect(copied).toContain(code);
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Download as a text file" }).click(),
    ]);
    expect(download.suggestedFilename()).toBe("latch-backup-codes.txt");
    const saved = readFileSync((await download.path())!, "utf8");
    expect(saved.split("\n").filter((line) => codes.includes(line))).toEqual(codes);
    expect(saved).toContain(email);
    // Printed, the page shows the codes and not the buttons around them.
    await page.emulateMedia({ media: "print" });
    expect(await page.locator("#backup-codes").isVisible()).toBe(true);
    expect(await page.getByRole("button", { name: "Print" }).isVisible()).toBe(false);
    expect(await page.locator("header.site").isVisible()).toBe(false);
    await page.emulateMedia({ media: "screen" });

    // The console greets the operator and names the organisation.
    await page.getByRole("link", { name: "Continue to console" }).click();
    await page.waitForURL(`${base}/console`);
    const heading = page.getByRole("heading", { level: 1 });
    expect(await heading.textContent()).toBe(`Console of ${email}`);
    expect(await page.locator("#header-email").textContent()).toBe(email);
    await expect
      .poll(() => page.locator("#org-switch option:checked").textContent())
      .toBe(`${email.split("@")[0]}'s organisation`);
    expect(await page.locator("#organisation").textContent()).toBe(`${email.split("@")[0]}'s organisation`);
    await expect.poll(() => page.locator("#backup-left").textContent()).toBe("10");
    await shot(page, "05-console");
    // The session lasts until sign-out or revoke (spec 8): its cookie outlives a browser restart.
    const session = (await page.context().cookies()).find((c) => c.name === "latch_session");
    expect(session?.expires).toBeGreaterThan(Date.now() / 1000 + 300 * 24 * 3600);

    // Reloading the enrol page now asks for a current code before a new authenticator.
    await page.goto(`${base}/enroll-totp`);
    await page.getByLabel("6-digit code from your current app").waitFor({ state: "visible" });
    await shot(page, "06-reenroll");

    // Sign out, then sign in again: the authenticator step takes a backup code, typed by keyboard.
    await page.goto(`${base}/console`);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(`${base}/sign-in`);
    expect((await page.context().cookies()).some((c) => c.name === "latch_session")).toBe(false);
    const before = mailsTo(email);
    await page.getByLabel("Email address").fill(email);
    await page.getByLabel("Email address").press("Enter");
    const signInCode = page.getByLabel("8-digit code from the email");
    await signInCode.waitFor({ state: "visible" });
    const code = await nextCode(email, before);
    await signInCode.fill(code === "00000000" ? "11111111" : "00000000");
    await signInCode.press("Enter");
    await expect.poll(() => page.locator("#status").textContent()).toMatch(/Attempts left: 4\.$/);
    await shot(page, "07-sign-in-wrong-code");
    await signInCode.fill(code);
    await signInCode.press("Enter");
    await page.waitForURL(`${base}/verify-totp`);
    const stepCode = page.getByLabel("Code from your authenticator app, or a backup code");
    expect(await page.locator(":focus").getAttribute("id")).toBe("code");
    await page.keyboard.type("ABCDE-FGHJK");
    await page.keyboard.press("Enter");
    await expect.poll(() => page.locator("#status").textContent()).toMatch(/not valid\. Attempts left: 9\.$/);
    await shot(page, "08-verify-wrong-code");
    await stepCode.fill(codes[0]!.toLowerCase());
    await stepCode.press("Enter");
    await page.waitForURL(`${base}/console`);
    await expect.poll(() => page.locator("#backup-left").textContent()).toBe("9");
    await shot(page, "09-console-again");

    expect(problems).toEqual([]);
    await page.context().close();
  }, 120_000);

  it("opens an approval link signed out: says why, signs in, and lands back on the approval", async () => {
    const {
      op: operator,
      email,
      totp,
      token,
    } = await operatorWithClient(h, {
      secret: "link_secret_value_0123456789",
      items: [{ name: "LINK_KEY" }],
      clientName: "release bot",
      origin: base,
    });
    const asked = await fetch(`${base}/api/grants/request`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({
        item_name: "LINK_KEY",
        method: "POST",
        host: "api.latch.test",
        path: "/v1/deploys",
      }),
    });
    expect(asked.status).toBe(201);
    // The mail is quoted-printable: soft line breaks and =3D undone.
    const mail = h.inbox.mails
      .filter((m) => m.to === email)
      .at(-1)!
      .raw.replace(/=\r?\n/g, "")
      .replace(/=3D/g, "=");
    const link = /https?:\/\/\S+\/approve\?token=[A-Za-z0-9_-]+/.exec(mail)?.[0];
    expect(link, mail).toBeDefined();

    const { page, problems } = await openPage();
    await page.goto(link!.replace(/^https?:\/\/[^/]+/, base));
    await page.waitForURL(/\/sign-in\?return_to=/);
    expect(await page.locator("#return-reason").textContent()).toBe(
      "Sign in to approve the request an agent is waiting on. You will land back on it.",
    );
    await shot(page, "10-approval-link-sign-in");
    const before = mailsTo(email);
    await page.getByLabel("Email address").fill(email);
    await page.getByRole("button", { name: "Email me a code" }).click();
    await page.getByLabel("8-digit code from the email").fill(await nextCode(email, before));
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL(/\/verify-totp/);
    expect(await page.locator("#return-reason").isVisible()).toBe(true);
    h.clock.advance(31_000);
    await page
      .getByLabel("Code from your authenticator app, or a backup code")
      .fill(totp.generate({ timestamp: h.clock.now.getTime() }));
    await page
      .getByRole("button", { name: /verify|continue|sign in/i })
      .first()
      .click();
    await page.waitForURL(/\/approve\?token=/);
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("Approved");
    expect(await page.locator("#sentence").textContent()).toMatch(
      /^The agent "release bot" may use LINK_KEY /,
    );
    expect(await page.locator("header.site a.brand").isVisible()).toBe(true);
    await shot(page, "11-approval-link-approved");
    const grants = (await operator.request("GET", "/api/grants")).json().grants;
    expect(grants.find((g: { item_name: string }) => g.item_name === "LINK_KEY")?.status).toBe("active");
    expect(problems).toEqual([]);
    await page.context().close();
  }, 120_000);
});
