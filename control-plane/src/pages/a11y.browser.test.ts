// Issue 13, accessibility: every page and state in headless Chromium passes axe-core (WCAG 2.0 and
// 2.1 A and AA plus axe's best practices) with no serious or critical violation, in the light and
// the dark colour scheme, so the contrast holds in both. The public site, sign-up, enrolment (QR
// and backup codes), the authenticator step, every console section with something in it, the
// approval link's answer, the collect page, OAuth consent, the device code pages and the local
// vault's console. A full-page screenshot of each goes to test-artifacts/browser/a11y-<page>-<scheme>.png.
// Each is also checked at a phone's 320 px (a11y-<page>-narrow.png): nothing but a data table
// reaches past the window, and axe again.
// Then keyboard only: the skip link is the first Tab stop, the focused element always shows it is,
// and an operator moves between sections, adds a credential and approves a request without a mouse.
// Needs Debian's chromium: skipped without it, except on CI.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seriousViolations } from "../../test/axe.ts";
import {
  type BrowserRig,
  openWatchedPage,
  saveScreenshot,
  signUpInChromium,
  skipBrowserTests,
  startBrowserRig,
} from "../../test/chromium.ts";
import { startEgressHarness } from "../../test/egress-harness.ts";
import {
  type Browser as ApiBrowser,
  connectAgent,
  type HostedHarness,
  lastCodeFor,
  operatorWithClient,
  signUpOperator,
  toolAnswer,
  uniqueEmail,
} from "../../test/hosted.ts";
import { connectLocalAgent, LOCAL_TOKENS, localOperator, startLocalVault } from "../../test/local.ts";
import { register } from "../../test/oauth/oauth-flow.ts";
import { joinAs, lastInviteTokenFor } from "../../test/teams.ts";

const SCHEMES = ["light", "dark"] as const;
/** Long enough for the inbox's 5-second refresh and a round trip. */
const SOON = { timeout: 12_000, interval: 100 };

/** What has focus: its tag, id, name (aria-label or text), and whether it shows it (outline or shadow). */
interface Focused {
  tag: string;
  id: string;
  name: string;
  visible: boolean;
  /** What is drawn over the middle of the focused element instead of it ("" when nothing is). */
  coveredBy: string;
}
const FOCUSED = `(() => {
  const element = document.activeElement;
  if (!element || element === document.body) {
    return { tag: "body", id: "", name: "", visible: false, coveredBy: "" };
  }
  const style = getComputedStyle(element);
  const outlined = style.outlineStyle !== "none" && parseFloat(style.outlineWidth) > 0;
  const box = element.getBoundingClientRect();
  const top = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  const coveredBy = !top || element.contains(top) ? "" : top.tagName.toLowerCase() + (top.id ? "#" + top.id : "");
  return {
    coveredBy,
    tag: element.tagName.toLowerCase(),
    id: element.id,
    name: (element.getAttribute("aria-label") || element.textContent || "").trim().replace(/\\s+/g, " "),
    visible: outlined || style.boxShadow !== "none",
  };
})()`;
const focusedOn = (page: Page) => page.evaluate(FOCUSED) as Promise<Focused>;

/** The elements, outside data tables (WCAG 1.4.10 exempts them), that reach past the window's right edge. */
const WIDER_THAN_WINDOW = `[...document.querySelectorAll("body *")]
  .filter((e) => !e.closest("table, .table-wrap, .visually-hidden") && e.getBoundingClientRect().right > innerWidth + 1)
  .map((e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + " " + (e.textContent || "").trim().slice(0, 40))`;

/** Marks the rows of `table`, runs `action`, and waits until the page has drawn them anew. */
async function redrawn(page: Page, table: string, action: () => Promise<void>) {
  await page.locator(`${table} tbody tr`).evaluateAll((rows: { dataset: Record<string, string> }[]) => {
    for (const row of rows) row.dataset.stale = "yes";
  });
  await action();
  await expect.poll(() => page.locator(`${table} tbody tr[data-stale]`).count(), SOON).toBe(0);
}

/**
 * Presses Tab (Shift+Tab with `back`) until the focused element matches, checking at every stop
 * that the focus is visible and nothing (the sticky status bar) is drawn over it; fails after
 * `limit` presses.
 */
async function tabTo(
  page: Page,
  matches: (f: Focused) => boolean,
  options: { back?: boolean; limit?: number } = {},
) {
  const visited: string[] = [];
  for (let i = 0; i < (options.limit ?? 80); i++) {
    await page.keyboard.press(options.back ? "Shift+Tab" : "Tab");
    const focused = await focusedOn(page);
    visited.push(`${focused.tag}#${focused.id} "${focused.name.slice(0, 40)}"`);
    expect(focused.visible, `focus is visible on ${visited.at(-1)}`).toBe(true);
    expect(focused.coveredBy, `nothing covers ${visited.at(-1)}`).toBe("");
    if (matches(focused)) return focused;
  }
  throw new Error(`no match within ${options.limit ?? 80} presses; visited:\n${visited.join("\n")}`);
}

describe.skipIf(skipBrowserTests)("accessibility in Chromium: axe, two schemes, keyboard", () => {
  let rig: BrowserRig | undefined;
  let h: HostedHarness;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    rig = await startBrowserRig();
    ({ h, base, browser } = rig);
    h.egress.setHandler((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: true }));
    });
  }, 120_000);

  afterAll(async () => {
    await rig?.close();
  });

  /** A new watched page (script errors, CSP refusals, failed requests), as `op` when given. */
  const openPage = (op?: ApiBrowser) =>
    openWatchedPage(browser, {
      viewport: { width: 1280, height: 900 },
      ...(op ? { session: { cookies: op.cookies, url: base } } : {}),
    });

  /**
   * The page as it is now, in each colour scheme (emulateMedia sets prefers-color-scheme as the
   * context's colorScheme option would, without building the state twice): a full-page
   * screenshot, then axe. Soft, so one run lists every page's violations.
   */
  async function audit(page: Page, name: string): Promise<void> {
    for (const scheme of SCHEMES) {
      await page.emulateMedia({ colorScheme: scheme });
      await saveScreenshot(page, `a11y-${name}-${scheme}.png`);
      expect.soft(await seriousViolations(page), `${name} (${scheme})`).toEqual([]);
    }
    // A phone's width (320 CSS px, WCAG 1.4.10 "Reflow"): nothing but a data table is wider than
    // the window, and axe again (a table that scrolls sideways must take keyboard focus).
    const size = page.viewportSize()!;
    await page.emulateMedia({ colorScheme: "light" });
    await page.setViewportSize({ width: 320, height: 800 });
    await page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))");
    await saveScreenshot(page, `a11y-${name}-narrow.png`);
    expect
      .soft(await page.evaluate(WIDER_THAN_WINDOW), `${name} at 320 px: wider than the window`)
      .toEqual([]);
    expect.soft(await seriousViolations(page), `${name} (320 px)`).toEqual([]);
    // And as the reviews look at it: a phone (390 px) and a laptop (1440 px).
    for (const width of [390, 1440]) {
      await page.setViewportSize({ width, height: 900 });
      await page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))");
      await saveScreenshot(page, `a11y-${name}-${width}.png`);
    }
    await page.setViewportSize(size);
  }

  it("the landing page, the docs, sign-in and its error", async () => {
    const { page, problems } = await openPage();
    for (const [path, name] of [
      ["/", "landing"],
      ["/docs", "docs"],
      ["/docs/connect", "docs-connect"],
      ["/docs/approvals", "docs-approvals"],
      ["/docs/members", "docs-members"],
      ["/docs/inject", "docs-inject"],
      ["/docs/cli", "docs-cli"],
      ["/docs/run", "docs-run"],
      ["/no-such-page", "not-found"],
    ] as const) {
      await page.goto(`${base}${path}`, { waitUntil: "networkidle" });
      await audit(page, name);
    }
    await page.goto(`${base}/sign-in`);
    await audit(page, "sign-in");
    const op = await signUpOperator(h, { label: "a11y-sign-in", origin: base });
    await page.getByLabel("Email address").fill(op.email);
    await page.getByRole("button", { name: "Email me a code" }).click();
    const code = page.getByLabel("8-digit code from the email");
    await code.waitFor({ state: "visible" });
    const wrong = lastCodeFor(h.inbox, op.email) === "00000000" ? "11111111" : "00000000";
    await code.fill(wrong);
    await code.press("Enter");
    await expect.poll(() => page.locator("#status").textContent()).toMatch(/Attempts left/);
    await audit(page, "sign-in-wrong-code");
    await expect.poll(() => h.inbox.mails.filter((m) => m.to === op.email).length).toBeGreaterThan(0);
    await code.fill(lastCodeFor(h.inbox, op.email));
    await code.press("Enter");
    await page.waitForURL(`${base}/verify-totp`);
    await audit(page, "verify-totp");
    await page.getByLabel("Code from your authenticator app, or a backup code").fill("ABCDE-FGHJK");
    await page.keyboard.press("Enter");
    await expect.poll(() => page.locator("#status").textContent()).toMatch(/not valid/);
    await audit(page, "verify-totp-wrong-code");
    expect(problems).toEqual([]);
    await page.context().close();
  }, 120_000);

  it("sign-up, the email code, enrolment with the QR and the backup codes", async () => {
    const { page, problems } = await openPage();
    await signUpInChromium(page, h, base, { label: "a11y", at: (step) => audit(page, step) });
    expect(problems).toEqual([]);
    await page.context().close();
  }, 120_000);

  it("each console section with content, the approval link's answer and the collect page", async () => {
    const { op, email, token } = await operatorWithClient(h, {
      secret: "sk_live_a11y_canary_7c2d",
      items: [{ name: "API_KEY" }],
      clientName: "a11y agent",
      origin: base,
    });
    const agent = await connectAgent(base, token, "a11y-agent");
    const call = (args: Record<string, unknown>) =>
      agent.callTool({ name: "http_request", arguments: { method: "GET", ...args } }).then(toolAnswer);
    // A pending approval (which mails the approval link), one with a JSON body, one with a form
    // body asked again after a Deny, and a request for a missing credential (with a body too).
    expect((await call({ path: "/v1/data", item_name: "API_KEY" })).status).toBe("pending");
    const withBody = await call({
      method: "POST",
      path: "/v1/issues",
      item_name: "API_KEY",
      body: { title: "Ship it", labels: ["release"] },
    });
    const form = {
      method: "POST",
      path: "/v1/messages",
      item_name: "API_KEY",
      content_type: "application/x-www-form-urlencoded",
      body: { to: "+15551234", text: "Hello" },
    };
    const denied = await call(form);
    await op.request("POST", `/api/grants/${denied.grant_id}/revoke`);
    expect((await call(form)).status).toBe("pending");
    const missing = await call({
      method: "POST",
      path: "/v2/x",
      host: "api.latch.test",
      item_name: "NEW_KEY",
      body: { a: 1 },
    });
    expect(missing.status).toBe("need_item");
    // Approvals in force: one for the whole credential, one under a path.
    const always = await call({ path: "/v3/reports/today", item_name: "API_KEY" });
    await op.request("POST", `/api/grants/${always.grant_id}/approve`, {
      policy: "item_standing",
      scope: "path_prefix",
    });
    const session = await call({ path: "/v4/me", item_name: "API_KEY" });
    await op.request("POST", `/api/grants/${session.grant_id}/approve`, { policy: "session" });

    const { page, problems } = await openPage(op);
    await page.goto(`${base}/console#vault`);
    await expect.poll(() => page.locator("#items tbody tr").count(), SOON).toBe(1);
    await audit(page, "console-vault");
    // A refused form: the status region and the invalid field.
    await page.locator("#item-name").fill("lowercase");
    await page.getByRole("button", { name: "Add credential" }).click();
    await expect.poll(() => page.locator("#item-name").getAttribute("aria-invalid")).toBe("true");
    await audit(page, "console-vault-invalid");
    await page.getByRole("button", { name: "Rotate API_KEY (staging)" }).click();
    await audit(page, "console-vault-rotate");

    await page.goto(`${base}/console#clients`);
    await page.locator("#client-name").fill("second agent");
    await page.getByRole("button", { name: "Issue client" }).click();
    await expect.poll(() => page.locator("#token-value").textContent(), SOON).toMatch(/^avm_/);
    await audit(page, "console-clients-token");

    await page.goto(`${base}/console#inbox`);
    await expect.poll(() => page.locator("#pending-approvals > tbody > tr").count(), SOON).toBe(3);
    await expect.poll(() => page.locator("#requests tbody tr").count(), SOON).toBe(1);
    await expect.poll(() => page.locator("#pending-approvals .after-deny").count(), SOON).toBe(1);
    await audit(page, "console-inbox");
    // "Always allow" open, asking what always covers.
    await page
      .getByRole("button", { name: /^Always allow: API_KEY/ })
      .first()
      .click();
    await page.locator("fieldset.always-choice").waitFor({ state: "visible" });
    await audit(page, "console-inbox-always");
    expect(withBody.status).toBe("pending");

    await page.goto(`${base}/console#approvals`);
    await expect.poll(() => page.locator("#active-approvals > tbody > tr").count(), SOON).toBe(2);
    await audit(page, "console-approvals");
    await page.locator("#approvals-policy").selectOption("folder_standing");
    await expect.poll(() => page.locator("#active-approvals-empty").isVisible()).toBe(true);
    await audit(page, "console-approvals-none-match");

    await page.goto(`${base}/console#audit`);
    await expect.poll(() => page.locator("#events tbody tr").count(), SOON).toBeGreaterThan(0);
    await audit(page, "console-audit");

    await page.goto(`${base}/console#access`);
    await expect.poll(() => page.locator("#sessions tbody tr").count(), SOON).toBeGreaterThan(0);
    await audit(page, "console-access");

    // Members: a colleague joined as approver, another invited and not yet joined.
    await joinAs(h, op, "approver", "a11y-approver", base);
    await op.request("POST", "/api/orgs/members/invite", {
      email: uniqueEmail("a11y-invited"),
      role: "auditor",
    });
    await page.goto(`${base}/console#members`);
    await expect.poll(() => page.locator("#members-table tbody tr").count(), SOON).toBe(2);
    await expect.poll(() => page.locator("#invites tbody tr").count(), SOON).toBe(1);
    await audit(page, "console-members");
    await page.getByRole("button", { name: /^Remove a11y-approver/ }).click();
    await audit(page, "console-members-remove");
    await page.getByRole("button", { name: "Cancel" }).click();

    // Policies: a rule added in the page and previewed against the calls above.
    await page.goto(`${base}/console#policies`);
    await expect.poll(() => page.locator("#policy-state").textContent(), SOON).toBe("Version 0.");
    await page.locator("#policy-name").fill("No admin");
    await page.locator("#policy-effect").selectOption("deny");
    await page.locator("#policy-paths").fill("/v1/admin/**");
    await page.getByRole("button", { name: "Add rule" }).click();
    await page.getByRole("button", { name: "Preview" }).click();
    await page.locator("#policy-preview-result").waitFor({ state: "visible" });
    await audit(page, "console-policies");

    // The approval link from the mail: approved once, then the same link again is refused.
    const mail = h.inbox.mails
      .filter(
        (m) => m.to === email && /approve\?token=/.test(m.raw.replace(/=\r?\n/g, "").replace(/=3D/g, "=")),
      )
      .at(0);
    const unfolded = mail?.raw.replace(/=\r?\n/g, "").replace(/=3D/g, "=") ?? "";
    const link = /https?:\/\/\S+\/approve\?token=[A-Za-z0-9_-]+/.exec(unfolded)?.[0];
    expect(link, "the approval mail's link").toBeTruthy();
    await page.goto(link!);
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("Approved");
    await audit(page, "approve-result");
    await page.goto(link!);
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("Not approved");
    await audit(page, "approve-result-refused");
    await page.getByRole("button", { name: "Revoke this approval" }).click();
    await expect.poll(() => page.locator("#approved").textContent(), SOON).toMatch(/^Revoked/);
    await audit(page, "approve-result-revoked");

    // The collect page: the form, then its answer.
    await page.goto(missing.collect_url!);
    await page.locator("#collect").waitFor({ state: "visible" });
    await audit(page, "collect");
    await page.getByLabel("Inject as").selectOption("header:");
    await audit(page, "collect-header-name");
    await page.getByLabel("Inject as").selectOption("bearer");
    await page.getByLabel("Value").fill("sk_live_a11y_collected_91ab");
    await page.getByRole("button", { name: "Store it" }).click();
    await expect.poll(() => page.locator("#status").textContent(), SOON).toMatch(/^Stored/);
    await audit(page, "collect-stored");

    expect(problems).toEqual([]);
    await agent.close();
    await page.context().close();
  }, 180_000);

  it("the invitation page: signed out, and signed in with the invited address", async () => {
    const owner = await signUpOperator(h, { label: "a11y-inviter", origin: base });
    const invited = await signUpOperator(h, { label: "a11y-invitee", origin: base });
    await owner.browser.request("POST", "/api/orgs/members/invite", {
      email: invited.email,
      role: "approver",
    });
    const token = lastInviteTokenFor(h.inbox, invited.email);
    const { page, problems } = await openPage();
    await page.goto(`${base}/invite?token=${token}`);
    await page.locator("#sign-in-row").waitFor({ state: "visible" });
    await audit(page, "invite-signed-out");
    await page.context().close();
    const joining = await openPage(invited.browser);
    await joining.page.goto(`${base}/invite?token=${token}`);
    await joining.page.getByRole("button", { name: /^Join / }).waitFor({ state: "visible" });
    await audit(joining.page, "invite-accept");
    expect([...problems, ...joining.problems]).toEqual([]);
    await joining.page.context().close();
  }, 120_000);

  it("OAuth consent and the device code pages", async () => {
    const { browser: op } = await signUpOperator(h, { label: "a11y-oauth", origin: base });
    const { page, problems } = await openPage(op);

    // An authorization-code client: /oauth/authorize sends the signed-in operator to /consent.
    const codeClient = await register(h.app, {
      client_name: "A11y desktop agent",
      redirect_uris: ["http://127.0.0.1:9/callback"],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    });
    expect(codeClient.statusCode, codeClient.body).toBe(201);
    const query = new URLSearchParams({
      client_id: codeClient.json().client_id,
      redirect_uri: "http://127.0.0.1:9/callback",
      response_type: "code",
      code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
      code_challenge_method: "S256",
      state: "a11y",
      resource: `${base}/mcp`,
      scope: "mcp",
    });
    await page.goto(`${base}/oauth/authorize?${query}`);
    await page.waitForURL(/\/consent\?uid=/);
    await expect.poll(() => page.locator("#client-name").textContent()).toBe("A11y desktop agent");
    await audit(page, "consent");

    // A device client: the code page, a wrong code, the confirmation, consent and the answer.
    const deviceClient = await register(h.app, {
      client_name: "A11y CLI",
      grant_types: ["urn:ietf:params:oauth:grant-type:device_code", "refresh_token"],
    });
    expect(deviceClient.statusCode, deviceClient.body).toBe(201);
    const asked = await fetch(`${base}/oauth/device/auth`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        client_id: deviceClient.json().client_id,
        scope: "mcp",
        resource: `${base}/mcp`,
      }),
    });
    expect(asked.status).toBe(200);
    const { user_code: userCode } = (await asked.json()) as { user_code: string };
    await page.goto(`${base}/device`);
    await audit(page, "device");
    const codeField = page.getByLabel("Code", { exact: true });
    await codeField.fill("BBBB-BBBB");
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByRole("alert").waitFor({ state: "visible" });
    await audit(page, "device-wrong-code");
    await page.getByLabel("Code", { exact: true }).fill(userCode);
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByRole("heading", { name: "Is this your device?" }).waitFor({ state: "visible" });
    await audit(page, "device-confirm");
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL(/\/consent\?uid=/);
    await expect.poll(() => page.locator("#client-name").textContent()).toBe("A11y CLI");
    await audit(page, "consent-device");
    // A click within a second of the form showing approves nothing (consent.js, double-clickjacking).
    await page.waitForTimeout(1_000);
    await page.getByRole("button", { name: "Approve" }).click();
    await page.getByRole("heading", { name: "Done" }).waitFor({ state: "visible" });
    await audit(page, "device-done");

    // A device denied on the consent page: the code page says it was denied, not a wrong code.
    const denied = await fetch(`${base}/oauth/device/auth`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        client_id: deviceClient.json().client_id,
        scope: "mcp",
        resource: `${base}/mcp`,
      }),
    });
    const { user_code: deniedCode } = (await denied.json()) as { user_code: string };
    await page.goto(`${base}/device`);
    await page.getByLabel("Code", { exact: true }).fill(deniedCode);
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByRole("heading", { name: "Is this your device?" }).waitFor({ state: "visible" });
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL(/\/consent\?uid=/);
    await page.getByRole("button", { name: "Deny" }).click();
    await page.getByRole("alert").waitFor({ state: "visible" });
    expect(await page.getByRole("alert").textContent()).toMatch(/^You denied this device/);
    await audit(page, "device-denied");

    expect(problems).toEqual([]);
    await page.context().close();
  }, 120_000);

  it("the local vault's console with a pending approval, a credential and activity", async () => {
    const harness = await startEgressHarness();
    const local = await startLocalVault(harness);
    let agent: Client | undefined;
    try {
      const stored = await localOperator(local, "POST", "/api/secrets", {
        name: "GITHUB_TOKEN",
        value: "ghp_a11y_local_canary_0e4f",
        allowed_hosts: ["api.latch.test"],
      });
      expect(stored.status).toBe(201);
      agent = await connectLocalAgent(local.url, "a11y-agent");
      const pending = await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", path: "/v1/echo", item_name: "GITHUB_TOKEN" },
      });
      expect(JSON.parse((pending.content as { text: string }[])[0]!.text).status).toBe("pending");

      const { page, problems } = await openPage();
      await page.goto(`${local.url}/#token=${encodeURIComponent(LOCAL_TOKENS.operator)}`);
      await expect.poll(() => page.locator("#grants tr").count(), SOON).toBe(1);
      await expect.poll(() => page.locator("#items tr").count(), SOON).toBe(1);
      await audit(page, "local-console");
      // Approved for 8 hours: an approval in force, with Revoke; then the filter matching nothing.
      const grantId = JSON.parse((pending.content as { text: string }[])[0]!.text).grant_id;
      await localOperator(local, "POST", "/api/grants", { grant_id: grantId, scope: "session" });
      await expect.poll(() => page.getByRole("button", { name: /^Revoke: / }).count(), SOON).toBe(1);
      await audit(page, "local-console-approved");
      await page.getByLabel("Filter approvals").fill("nothing-like-it");
      await expect.poll(() => page.locator("#grants-empty").isVisible()).toBe(true);
      await audit(page, "local-console-filtered");
      expect(problems).toEqual([]);
      await page.context().close();
    } finally {
      await agent?.close();
      await local.app.close();
      await local.vault.close();
      await harness.close();
    }
  }, 120_000);
  it("keyboard only: signing in, the skip link first, visible focus, sections, adding a credential, approving a request", async () => {
    const { email, totp, token } = await operatorWithClient(h, {
      secret: "sk_live_a11y_keyboard_3b9e",
      items: [{ name: "API_KEY" }],
      clientName: "kb agent",
      origin: base,
    });
    const agent = await connectAgent(base, token, "kb-agent");
    const ask = { method: "GET", path: "/v1/data", item_name: "API_KEY" };
    const pending = toolAnswer(await agent.callTool({ name: "http_request", arguments: ask }));
    expect(pending.status).toBe("pending");

    // Sign in: the skip link first, then the email, the mailed code and the authenticator's code.
    const { page, problems } = await openPage();
    await page.goto(`${base}/sign-in`);
    await page.keyboard.press("Tab");
    expect(await focusedOn(page)).toMatchObject({ tag: "a", name: "Skip to content", visible: true });
    await tabTo(page, (f) => f.id === "email");
    const mailed = h.inbox.mails.filter((m) => m.to === email).length;
    await page.keyboard.type(email);
    await page.keyboard.press("Enter");
    await expect.poll(() => focusedOn(page)).toMatchObject({ id: "otp", visible: true });
    await expect.poll(() => h.inbox.mails.filter((m) => m.to === email).length).toBeGreaterThan(mailed);
    await page.keyboard.type(lastCodeFor(h.inbox, email));
    await page.keyboard.press("Enter");
    await page.waitForURL(`${base}/verify-totp`);
    await expect.poll(() => focusedOn(page)).toMatchObject({ id: "code", visible: true });
    // The enrolment used this window's code: the next one, 30 seconds on by the plane's clock.
    h.clock.advance(30_000);
    await page.keyboard.type(totp.generate({ timestamp: h.clock.now.getTime() }));
    await page.keyboard.press("Enter");
    await page.waitForURL(`${base}/console`);
    await expect.poll(() => page.locator("#items tbody tr").count(), SOON).toBe(1);

    // On the console too the skip link is the first Tab stop; Enter on it skips the header: the
    // next stop is in main.
    await page.keyboard.press("Tab");
    expect(await focusedOn(page)).toMatchObject({ tag: "a", name: "Skip to content", visible: true });
    await page.keyboard.press("Enter");
    await page.keyboard.press("Tab");
    expect(await focusedOn(page)).toMatchObject({ id: "items-search", visible: true });

    // Sections from the navigation: Enter opens one and puts focus on its heading (once the page's
    // hashchange handler has run, which is after the URL changes).
    // The sections' navigation comes before main: back to it.
    await tabTo(page, (f) => f.tag === "a" && f.name === "Clients", { back: true });
    await page.keyboard.press("Enter");
    await page.waitForURL(/#clients$/);
    await expect.poll(() => focusedOn(page)).toMatchObject({ id: "clients-heading", visible: true });
    await tabTo(page, (f) => f.tag === "a" && f.name === "Vault", { back: true });
    // Opening the vault draws its table again; a Tab into the old rows would be lost with them.
    await redrawn(page, "#items", () => page.keyboard.press("Enter"));
    await page.waitForURL(/#vault$/);
    await expect.poll(() => focusedOn(page)).toMatchObject({ id: "vault-heading", visible: true });

    // Add a credential with the form: type into each field, Tab between them, Enter on the button.
    // A refused name first: the field is marked and focused, and with the status bar showing at
    // the bottom, tabbing on down the form never lands under it.
    await tabTo(page, (f) => f.id === "item-name");
    await page.keyboard.type("keyboard_key");
    await tabTo(page, (f) => f.tag === "button" && f.name === "Add credential");
    await page.keyboard.press("Enter");
    await expect.poll(() => page.locator("#status").textContent()).toMatch(/uppercase letter/);
    await expect.poll(() => focusedOn(page)).toMatchObject({ id: "item-name", visible: true });
    await page.keyboard.press("Control+A");
    await page.keyboard.type("KEYBOARD_KEY");
    await page.keyboard.press("Tab");
    expect((await focusedOn(page)).id).toBe("item-value");
    await page.keyboard.type("sk_live_typed_by_keyboard_51aa");
    await tabTo(page, (f) => f.id === "item-hosts");
    await page.keyboard.type("api.keyboard.test");
    await tabTo(page, (f) => f.tag === "button" && f.name === "Add credential");
    await page.keyboard.press("Enter");
    await expect
      .poll(() => page.locator("#status").textContent(), SOON)
      .toBe("Stored KEYBOARD_KEY (staging). Its value ends in 51aa.");
    await expect.poll(() => page.locator("#items tbody tr").count()).toBe(2);

    // Back up to the navigation, open the Inbox, and approve the request with Space.
    await tabTo(page, (f) => f.tag === "a" && f.name.startsWith("Inbox"), { back: true, limit: 120 });
    await page.keyboard.press("Enter");
    await page.waitForURL(/#inbox$/);
    await expect.poll(() => focusedOn(page)).toMatchObject({ id: "inbox-heading", visible: true });
    await expect.poll(() => page.locator("#pending-approvals > tbody > tr").count(), SOON).toBe(1);
    await tabTo(page, (f) => f.tag === "button" && f.name.startsWith("Approve once: API_KEY"));
    await saveScreenshot(page, `a11y-keyboard-approve-focused.png`);
    await page.keyboard.press("Space");
    await expect
      .poll(() => page.locator("#status").textContent(), SOON)
      .toMatch(/^Approved API_KEY for .* for one call\.$/);
    await expect.poll(() => page.locator("#pending-approvals > tbody > tr").count()).toBe(0);
    // The row is gone; focus is back on the section's heading, not lost to the page.
    await expect.poll(() => focusedOn(page)).toMatchObject({ id: "inbox-heading", visible: true });

    const answer = toolAnswer(await agent.callTool({ name: "http_request", arguments: ask }));
    expect(answer.origin_status).toBe(200);

    // Always allow by keyboard: Enter opens the choice with focus on its first option (the path
    // prefix), Tab reaches the confirm button, Space approves.
    const post = { method: "POST", path: "/v1/issues", item_name: "API_KEY", body: { title: "kb" } };
    expect(toolAnswer(await agent.callTool({ name: "http_request", arguments: post })).status).toBe(
      "pending",
    );
    await expect.poll(() => page.locator("#pending-approvals > tbody > tr").count(), SOON).toBe(1);
    await tabTo(page, (f) => f.tag === "button" && f.name.startsWith("Always allow: API_KEY"));
    await page.keyboard.press("Enter");
    await expect.poll(() => focusedOn(page)).toMatchObject({ tag: "input", visible: true });
    await saveScreenshot(page, `a11y-keyboard-always-choice.png`);
    await tabTo(page, (f) => f.tag === "button" && f.name.startsWith("Always allow, as chosen"));
    await page.keyboard.press("Space");
    await expect
      .poll(() => page.locator("#status").textContent(), SOON)
      .toMatch(/^Approved API_KEY for .* until revoked\.$/);

    // The Approvals section by keyboard: its heading takes focus, Revoke is reached and pressed.
    await tabTo(page, (f) => f.tag === "a" && f.name === "Approvals", { back: true, limit: 120 });
    await page.keyboard.press("Enter");
    await page.waitForURL(/#approvals$/);
    await expect.poll(() => focusedOn(page)).toMatchObject({ id: "approvals-heading", visible: true });
    await expect.poll(() => page.locator("#active-approvals > tbody > tr").count(), SOON).toBe(1);
    await tabTo(page, (f) => f.tag === "button" && f.name.startsWith("Revoke: API_KEY"));
    await page.keyboard.press("Enter");
    await expect.poll(() => page.locator("#status").textContent(), SOON).toMatch(/^Revoked API_KEY for /);
    await expect.poll(() => focusedOn(page)).toMatchObject({ id: "approvals-heading", visible: true });
    expect(toolAnswer(await agent.callTool({ name: "http_request", arguments: post })).status).toBe(
      "pending",
    );

    // Members by keyboard: invite a colleague as auditor, the role picked with the arrow keys.
    await tabTo(page, (f) => f.tag === "a" && f.name === "Members", { back: true, limit: 120 });
    await page.keyboard.press("Enter");
    await page.waitForURL(/#members$/);
    await expect.poll(() => focusedOn(page)).toMatchObject({ id: "members-heading", visible: true });
    await expect.poll(() => page.locator("#members-table tbody tr").count(), SOON).toBe(1);
    await tabTo(page, (f) => f.id === "invite-email");
    const colleague = uniqueEmail("kb-colleague");
    await page.keyboard.type(colleague);
    await page.keyboard.press("Tab");
    expect((await focusedOn(page)).id).toBe("invite-role");
    await page.keyboard.press("End");
    await tabTo(page, (f) => f.tag === "button" && f.name === "Send invitation");
    await page.keyboard.press("Enter");
    await expect
      .poll(() => page.locator("#status").textContent(), SOON)
      .toBe(`Invited ${colleague} as auditor. The link in their mail works for 7 days.`);
    await expect.poll(() => focusedOn(page)).toMatchObject({ id: "members-heading", visible: true });
    await saveScreenshot(page, `a11y-keyboard-members.png`);

    // Policies by keyboard: open the section, add a rule, preview it, save it.
    await tabTo(page, (f) => f.tag === "a" && f.name === "Policies", { back: true, limit: 120 });
    await page.keyboard.press("Enter");
    await page.waitForURL(/#policies$/);
    await expect.poll(() => focusedOn(page)).toMatchObject({ id: "policies-heading", visible: true });
    await tabTo(page, (f) => f.id === "policy-name");
    await page.keyboard.type("Keyboard reads");
    await tabTo(page, (f) => f.id === "policy-paths");
    await page.keyboard.type("/v1/**");
    await tabTo(page, (f) => f.tag === "button" && f.name === "Add rule");
    await page.keyboard.press("Enter");
    await expect.poll(() => page.locator("#policy-rules tbody tr").count()).toBe(1);
    await expect.poll(() => focusedOn(page)).toMatchObject({ id: "policies-heading", visible: true });
    await tabTo(page, (f) => f.tag === "button" && f.name === "Preview");
    await page.keyboard.press("Enter");
    await expect
      .poll(() => focusedOn(page), SOON)
      .toMatchObject({ id: "policy-preview-heading", visible: true });
    await tabTo(page, (f) => f.tag === "button" && f.name === "Save", { back: true });
    await page.keyboard.press("Enter");
    await expect
      .poll(() => page.locator("#status").textContent(), SOON)
      .toBe("Saved version 1: 1 rule in force.");
    expect(problems).toEqual([]);
    await agent.close();
    await page.context().close();
  }, 120_000);
});
