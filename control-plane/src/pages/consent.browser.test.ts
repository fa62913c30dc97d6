// Keyjacking on the OAuth consent page, in a real headless Chromium against the real hosted plane: a
// page that has the operator keep pressing Enter or Space, then opens an authorization for its own
// client, must not have those keys approve it. Approve is never focused for the operator (the
// heading is); nor does a click that lands on Approve as the form appears approve it (a double-click
// the attacker's page asked for); a deliberate click approves. Needs Debian's chromium: skipped
// without it, except on CI.
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BrowserRig, openWatchedPage, skipBrowserTests, startBrowserRig } from "../../test/chromium.ts";
import { type Browser as ApiBrowser, type HostedHarness, signUpOperator } from "../../test/hosted.ts";
import { register } from "../../test/oauth/oauth-flow.ts";

const REDIRECT = "http://127.0.0.1:9/callback";

describe.skipIf(skipBrowserTests)("the OAuth consent page, in Chromium", () => {
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

  /** An authorization for a newly registered client, opened in the operator's browser at consent. */
  async function openConsent(op: ApiBrowser, clientName: string): Promise<Page> {
    const client = await register(h.app, {
      client_name: clientName,
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    });
    expect(client.statusCode, client.body).toBe(201);
    const query = new URLSearchParams({
      client_id: client.json().client_id,
      redirect_uri: REDIRECT,
      response_type: "code",
      code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
      code_challenge_method: "S256",
      state: "keyjack",
      resource: `${base}/mcp`,
      scope: "mcp",
    });
    const { page, problems } = await openWatchedPage(browser, {
      session: { cookies: op.cookies, url: base },
    });
    await page.goto(`${base}/oauth/authorize?${query}`);
    await page.waitForURL(/\/consent\?uid=/);
    await page.locator("#consent").waitFor({ state: "visible" });
    expect(problems).toEqual([]);
    return page;
  }

  const consentedNames = async (op: ApiBrowser) =>
    ((await op.request("GET", "/api/access")).json().clients as { name: string }[]).map((c) => c.name);

  /** Enter and Space, as the attacker's page asked the operator to keep pressing them. */
  async function keepPressing(page: Page, times: number): Promise<void> {
    for (let i = 0; i < times; i++) {
      await page.keyboard.press(i % 2 === 0 ? "Enter" : "Space");
      await page.waitForTimeout(40);
    }
  }

  it("approves nothing on keypresses once the form appears, and a deliberate click approves", async () => {
    const { browser: op } = await signUpOperator(h, { label: "keyjack", origin: base });
    const page = await openConsent(op, "Keyjacking agent");
    expect(await page.evaluate("document.activeElement ? document.activeElement.id : ''")).toBe("heading");

    // The keypresses meant for the attacker's page land on the consent form as soon as it shows.
    await keepPressing(page, 12);
    await page.waitForTimeout(300);
    expect(page.url()).toMatch(/\/consent\?uid=/);
    expect(await page.locator("#status").textContent()).not.toMatch(/Approved/);
    expect(await consentedNames(op)).not.toContain("Keyjacking agent");

    // A deliberate click, once the form has shown for a second, approves, and the browser goes
    // back to the agent.
    await page.waitForTimeout(1_000);
    const returned = page.waitForRequest((request) => request.url().startsWith(REDIRECT));
    await page.getByRole("button", { name: "Approve" }).click();
    await returned.catch(async (error) => {
      throw new Error(`${page.url()} ${await page.locator("#status").textContent()} ${error}`);
    });
    expect(await consentedNames(op)).toContain("Keyjacking agent");
    await page.context().close();
  }, 60_000);

  it("approves nothing on a click that lands on Approve as the form appears, and the next one approves", async () => {
    const { browser: op } = await signUpOperator(h, { label: "doubleclick", origin: base });
    // The attacker's page had the operator double-click, and opened the authorization on the first
    // click: the second lands where Approve shows.
    const page = await openConsent(op, "Double-click agent");
    await page.getByRole("button", { name: "Approve" }).click();
    await page.waitForTimeout(300);
    expect(await consentedNames(op)).not.toContain("Double-click agent");
    expect(page.url()).toMatch(/\/consent\?uid=/);
    expect(await page.locator("#status").textContent()).toBe(
      "The page had only just opened: nothing was approved. Read what it asks, then choose Approve.",
    );

    await page.waitForTimeout(1_000);
    const returned = page.waitForRequest((request) => request.url().startsWith(REDIRECT));
    await page.getByRole("button", { name: "Approve" }).click();
    await returned;
    expect(await consentedNames(op)).toContain("Double-click agent");
    await page.context().close();
  }, 60_000);

  it("lets a keyboard user tab to Approve and press Enter", async () => {
    const { browser: op } = await signUpOperator(h, { label: "keyboard", origin: base });
    const page = await openConsent(op, "Keyboard agent");
    // From the heading: the organisation, the environment, then Approve.
    for (let i = 0; i < 3; i++) await page.keyboard.press("Tab");
    expect(await page.evaluate("document.activeElement ? document.activeElement.id : ''")).toBe("approve");
    const returned = page.waitForRequest((request) => request.url().startsWith(REDIRECT));
    await page.keyboard.press("Enter");
    await returned;
    expect(await consentedNames(op)).toContain("Keyboard agent");
    await page.context().close();
  }, 60_000);
});
