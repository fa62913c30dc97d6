// Policies and the live inbox in the console, in a real headless Chromium against the real hosted
// plane (DECISIONS "Policies", "Approvals that reach the operator"): rules added, reordered,
// disabled and previewed in the page, then saved and in force for the agent's next call; a save
// over a newer version refused; the service worker registered and notifications allowed, and the
// console's count (title and Inbox link) changing as an agent asks, from the live stream (polling
// is off while it is open). Screenshots: test-artifacts/browser/policies-*.png.
// Needs Debian's chromium: skipped without it, except on CI.
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seriousViolations } from "../../test/axe.ts";
import {
  type BrowserRig,
  openWatchedPage,
  saveScreenshot,
  skipBrowserTests,
  startBrowserRig,
} from "../../test/chromium.ts";
import {
  type Browser as ApiBrowser,
  connectAgent,
  type HostedHarness,
  operatorWithClient,
  toolAnswer,
} from "../../test/hosted.ts";

/** Long enough for a round trip, shorter than the inbox's own 5-second polling. */
const SOON = { timeout: 12_000, interval: 100 };
const LIVE = { timeout: 3_000, interval: 50 };

describe.skipIf(skipBrowserTests)("policies and the live inbox in Chromium", () => {
  let rig: BrowserRig | undefined;
  let h: HostedHarness;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    rig = await startBrowserRig();
    ({ h, base, browser } = rig);
    h.egress.setHandler((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
  }, 120_000);
  afterAll(async () => {
    await rig?.close();
  });

  async function signedIn(
    op: ApiBrowser,
  ): Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
    return openWatchedPage(browser, {
      viewport: { width: 1280, height: 900 },
      session: { cookies: op.cookies, url: base },
    });
  }
  const shot = (page: Page, name: string) => saveScreenshot(page, `policies-${name}.png`);
  const statusOf = (page: Page) => page.locator("#status").textContent();

  it("adds, reorders, disables, previews and saves rules; the agent's next call obeys them", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: "sk_live_policies_browser_8d2a",
      items: [{ name: "API_KEY" }],
      clientName: "browser agent",
      origin: base,
    });
    const agent = await connectAgent(base, token, "browser-agent");
    const call = (args: Record<string, unknown>) =>
      agent.callTool({ name: "http_request", arguments: { item_name: "API_KEY", ...args } }).then(toolAnswer);
    // A week of calls to preview against: three reads, one write asked for.
    for (const path of ["/v1/reports/1", "/v1/reports/2", "/v1/admin/users"]) {
      const asked = await call({ method: "GET", path });
      await op.request("POST", `/api/grants/${asked.grant_id}/approve`, { policy: "prompt" });
      expect((await call({ method: "GET", path })).origin_status).toBe(200);
    }
    expect((await call({ method: "POST", path: "/v1/reports", body: { q: 1 } })).status).toBe("pending");

    const { page, problems } = await signedIn(op);
    await page.goto(`${base}/console#policies`);
    await page.getByRole("heading", { level: 2, name: "Policies" }).waitFor({ state: "visible" });
    await expect.poll(() => page.locator("#policy-state").textContent(), SOON).toBe("Version 0.");
    expect(await page.locator("#policy-rules-empty").isVisible()).toBe(true);

    const form = page.locator("#policy-form");
    // Reads of reports, allowed.
    await form.getByLabel("Name").fill("Report reads");
    await form.getByLabel("Effect").selectOption("allow");
    await form.getByLabel("Hosts").fill("*.latch.test");
    await form.getByRole("checkbox", { name: "GET" }).check();
    await form.getByLabel("Paths").fill("/v1/reports/*");
    await form.getByRole("button", { name: "Add rule" }).click();
    // No admin, whatever is approved; added second, then moved first.
    await form.getByLabel("Name").fill("No admin");
    await form.getByLabel("Effect").selectOption("deny");
    await form.getByLabel("Paths").fill("/v1/admin/**");
    await form.getByRole("button", { name: "Add rule" }).click();
    // A catch-all ask, at most 2 an hour, disabled for now.
    await form.getByLabel("Name").fill("Writes");
    await form.getByLabel("Effect").selectOption("ask");
    await form.getByRole("checkbox", { name: "POST" }).check();
    await form.getByLabel("Rate limit (calls; empty for none)").fill("2");
    await form.getByLabel("Per").selectOption("hour");
    await form.getByRole("button", { name: "Add rule" }).click();
    const rows = page.locator("#policy-rules tbody tr");
    await expect.poll(() => rows.count()).toBe(3);
    await page.getByRole("button", { name: "Move No admin up" }).click();
    await page.getByRole("checkbox", { name: "Writes enabled" }).uncheck();
    expect(await rows.locator("th").allTextContents()).toEqual(["No admin", "Report reads", "Writes"]);
    expect(await page.locator("#policy-state").textContent()).toMatch(/unsaved changes/);

    await page.getByRole("button", { name: "Preview" }).click();
    await page.locator("#policy-preview-result").waitFor({ state: "visible" });
    expect(await page.locator("#policy-preview-summary").textContent()).toBe(
      "Over 7 calls of the last 7 days, these rules would have allowed 4, asked for approval on 0, denied 2 and rate-limited 0; 1 matched no rule (approvals decide). 6 calls would have been decided otherwise than by the saved rules.",
    );
    expect(await rows.nth(0).locator("td").nth(4).textContent()).toBe("2 calls");
    await shot(page, "preview");
    expect(await seriousViolations(page)).toEqual([]);
    await page.emulateMedia({ colorScheme: "dark" });
    await shot(page, "preview-dark");
    expect(await seriousViolations(page)).toEqual([]);
    await page.emulateMedia({ colorScheme: "light" });

    await page.getByRole("button", { name: "Save" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("Saved version 1: 3 rules in force.");
    expect(await page.locator("#policy-state").textContent()).toBe("Version 1.");
    const saved = (await op.request("GET", "/api/policies")).json();
    expect(saved.rules.map((r: { name: string; enabled: boolean }) => [r.name, r.enabled])).toEqual([
      ["No admin", true],
      ["Report reads", true],
      ["Writes", false],
    ]);
    expect(saved.rules[2].rate_limit).toEqual({ calls: 2, per: "hour" });
    expect((await call({ method: "GET", path: "/v1/admin/users" })).status).toBe("policy_denied");
    expect((await call({ method: "GET", path: "/v1/reports/9" })).origin_status).toBe(200);

    // Someone else saves meanwhile: this page's save is refused and says so; nothing is lost.
    await op.request("PUT", "/api/policies", { rules: saved.rules.slice(0, 1) }, { "if-match": '"1"' });
    await page.getByRole("button", { name: "Edit Report reads" }).click();
    await form.getByLabel("Name").fill("Report reads (all)");
    await form.getByLabel("Paths").fill("/v1/reports/**");
    await form.getByRole("button", { name: "Update rule" }).click();
    await page.getByRole("button", { name: "Save" }).click();
    await expect
      .poll(() => statusOf(page), SOON)
      .toMatch(/Someone saved version 2 since you loaded version 1/);
    expect(await rows.count()).toBe(3);
    await page.getByRole("button", { name: "Discard changes" }).click();
    await expect.poll(() => rows.count(), SOON).toBe(1);
    expect(await page.locator("#policy-state").textContent()).toBe("Version 2.");

    // An allow rule naming the agent by its name: saved, with a caution of what a name trusts.
    await form.getByLabel("Name").fill("The browser agent reads");
    await form.getByLabel("Effect").selectOption("allow");
    await form.getByLabel("Agents").fill("browser agent");
    await form.getByRole("checkbox", { name: "GET" }).check();
    await form.getByRole("button", { name: "Add rule" }).click();
    expect(await page.locator("#policy-warnings").isHidden()).toBe(true);
    await page.getByRole("button", { name: "Save" }).click();
    await expect
      .poll(() => statusOf(page), SOON)
      .toBe("Saved version 3: 2 rules in force. Read the caution below the rules.");
    const caution = page.locator("#policy-warnings-list li");
    expect(await caution.count()).toBe(1);
    expect(await caution.textContent()).toMatch(
      /^rule \S+ allows by agent name \("browser agent"\): a client chooses its name when it registers/,
    );
    await shot(page, "saved");
    expect(problems).toEqual([]);
    await agent.close();
    await page.context().close();
  }, 120_000);

  it("registers the service worker, allows notifications, and counts a new request live", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: "sk_live_live_browser_1f4b",
      items: [{ name: "API_KEY" }],
      clientName: "live agent",
      origin: base,
    });
    const { context, page, problems } = await signedIn(op);
    await context.grantPermissions(["notifications"], { origin: base });
    await page.goto(`${base}/console#inbox`);
    await page.getByRole("heading", { level: 2, name: "Inbox" }).waitFor({ state: "visible" });
    await expect.poll(() => page.evaluate("document.body.dataset.live"), SOON).toBe("open");
    expect(await page.title()).toBe("Console · Latch");

    await page.getByRole("button", { name: "Notify me on this device" }).click();
    // Chromium here has no push service to reach (no network): the worker is registered and
    // notifications are on; the push subscription itself is tested with generated keys
    // (control-plane/test/web-push.int.test.ts).
    await expect.poll(() => page.locator("#notify-state").textContent(), SOON).toMatch(/notified/);
    const worker = await page.evaluate(
      "navigator.serviceWorker.getRegistration('/').then((r) => r && (r.active || r.waiting || r.installing)?.scriptURL)",
    );
    expect(worker).toBe(`${base}/assets/push-worker.js`);
    expect(await page.evaluate("Notification.permission")).toBe("granted");

    const agent = await connectAgent(base, token, "live-agent");
    const started = Date.now();
    const asked = toolAnswer(
      await agent.callTool({
        name: "http_request",
        arguments: { item_name: "API_KEY", method: "DELETE", path: "/v1/x" },
      }),
    );
    expect(asked.status).toBe("pending");
    // Within the live stream's second, well before the 5-second polling would have seen it.
    await expect.poll(() => page.title(), LIVE).toBe("(1) Console · Latch");
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(await page.locator("#inbox-count").textContent()).toBe("(1)");
    await shot(page, "live-count");

    // "Make a rule from this": the Policies form, prefilled from the request.
    await page.getByRole("link", { name: "Make a rule from this: API_KEY for live agent" }).click();
    await page.waitForURL(/#policies$/);
    const form = page.locator("#policy-form");
    await expect.poll(() => form.getByLabel("Hosts").inputValue(), SOON).toBe("api.latch.test");
    expect(await form.getByLabel("Agents").inputValue()).toMatch(/^cli_/);
    expect(await form.getByLabel("Credentials").inputValue()).toBe("API_KEY");
    expect(await form.getByLabel("Paths").inputValue()).toBe("/v1/x");
    expect(await form.getByRole("checkbox", { name: "DELETE" }).isChecked()).toBe(true);
    // Named as this organisation knows the agent (the clients are asked for), not as the link says.
    await expect.poll(() => page.locator("#policy-form-from").textContent(), SOON).toContain("live agent");
    await shot(page, "from-request");
    await form.getByRole("button", { name: "Add rule" }).click();
    await page.getByRole("button", { name: "Save" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("Saved version 1: 1 rule in force.");
    const retried = toolAnswer(
      await agent.callTool({
        name: "http_request",
        arguments: { item_name: "API_KEY", method: "DELETE", path: "/v1/x" },
      }),
    );
    expect(retried).toMatchObject({ origin_status: 200, policy: { effect: "allow" } });

    await op.request("POST", `/api/grants/${asked.grant_id}/revoke`);
    await expect.poll(() => page.title(), LIVE).toBe("Console · Latch");
    expect(problems).toEqual([]);
    await agent.close();
    await context.close();
  }, 120_000);

  it("a push's link brings its request into view with its header focused, or says it waits no more", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: "sk_live_push_link_7c21",
      items: [{ name: "API_KEY" }],
      clientName: "push agent",
      origin: base,
    });
    const agent = await connectAgent(base, token, "push-agent");
    const ask = async (path: string) =>
      toolAnswer(
        await agent.callTool({
          name: "http_request",
          arguments: { item_name: "API_KEY", method: "POST", path },
        }),
      ).grant_id as string;
    await ask("/v1/first");
    const notified = await ask("/v1/second");
    const { context, page, problems } = await signedIn(op);
    await page.goto(`${base}/console#inbox?grant=${notified}`);
    await expect
      .poll(() => statusOf(page), SOON)
      .toBe("The request from the notification: API_KEY for push agent.");
    const row = page.locator(`tr[data-grant="${notified}"]`);
    expect(await row.getAttribute("class")).toContain("notified");
    expect(
      await page.evaluate(
        `document.querySelector('tr[data-grant="${notified}"]').contains(document.activeElement)`,
      ),
    ).toBe(true);
    // The row's header, never a decision (keyjacking: inbox-focus.browser.test.ts).
    expect(
      await page.evaluate("[document.activeElement.tagName, document.activeElement.textContent]"),
    ).toEqual(["TH", "API_KEY"]);
    // The address is #inbox again: a redraw (a new request arriving) moves nothing.
    expect(new URL(page.url()).hash).toBe("#inbox");
    await shot(page, "push-link");

    await op.request("POST", `/api/grants/${notified}/revoke`);
    await page.goto(`${base}/console#inbox?grant=${notified}`);
    await expect
      .poll(() => statusOf(page), SOON)
      .toBe(
        "The request from the notification is no longer waiting: it was decided, withdrawn or has expired.",
      );
    expect(problems).toEqual([]);
    await agent.close();
    await context.close();
  }, 120_000);

  it("a push's link opens the inbox, through sign-in when the browser is signed out", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${base}/console#inbox?grant=grt_fromapush`);
    await page.waitForURL(/\/sign-in/);
    expect(await page.locator("#return-reason").textContent()).toBe(
      "Sign in to decide the request an agent is waiting on. You will land on the inbox.",
    );
    expect(await page.evaluate("afterSignIn()")).toBe("/console#inbox?grant=grt_fromapush");
    // Anything else in the fragment is not followed.
    await page.goto(`${base}/sign-in#inbox?grant=x"><script>`);
    expect(await page.evaluate("sessionStorage.getItem('latch.return_to')")).toBe(null);
    await context.close();
  });
});
