// Teams in Chromium (issue 23): an owner invites a colleague as approver from the Members section;
// the colleague signs up from the mailed link, lands in the organisation and approves an agent's
// call in the Inbox; with the two-person rule on, the owner's Always allow waits "1 of 2" until the
// colleague confirms it. The controls an approver may not use are not shown. Screenshots of
// Members and of the "1 of 2" approval go to test-artifacts/browser/.
// Needs Debian's chromium: skipped without it, except on CI.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import * as OTPAuth from "otpauth";
import type { Browser, Page } from "playwright-core";
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
  lastCodeFor,
  operatorWithClient,
  toolAnswer,
  uniqueEmail,
} from "../../test/hosted.ts";
import { lastInviteTokenFor } from "../../test/teams.ts";

const SOON = { timeout: 12_000, interval: 100 };

describe.skipIf(skipBrowserTests)("teams in Chromium: invite, join, approve, two-person rule", () => {
  let rig: BrowserRig | undefined;
  let h: HostedHarness;
  let browser: Browser;
  let base: string;
  let agent: Client | undefined;

  beforeAll(async () => {
    rig = await startBrowserRig();
    ({ h, base, browser } = rig);
    h.egress.setHandler((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: true }));
    });
  }, 120_000);

  afterAll(async () => {
    await agent?.close();
    await rig?.close();
  });

  /** A watched page at 1440 px, as `op` when given. */
  const openPage = (op?: ApiBrowser) =>
    openWatchedPage(browser, {
      viewport: { width: 1440, height: 900 },
      ...(op ? { session: { cookies: op.cookies, url: base } } : {}),
    });

  const statusOf = (page: Page) => page.locator("#status").textContent();

  it("an owner invites a colleague as approver, who signs up from the mail and approves an agent's call; then 1 of 2", async () => {
    const owner = await operatorWithClient(h, {
      secret: "sk_live_teams_canary_5e1a",
      items: [{ name: "API_KEY" }],
      clientName: "team agent",
      origin: base,
    });
    agent = await connectAgent(base, owner.token, "team-agent");
    const call = (path: string) =>
      agent!
        .callTool({ name: "http_request", arguments: { method: "GET", path, item_name: "API_KEY" } })
        .then(toolAnswer);

    // The owner invites from the Members section.
    const { page: ownerPage, problems: ownerProblems } = await openPage(owner.op);
    await ownerPage.goto(`${base}/console#members`);
    await expect.poll(() => ownerPage.locator("#header-role").textContent(), SOON).toBe("owner");
    await expect.poll(() => ownerPage.locator("#members-table tbody tr").count(), SOON).toBe(1);
    const colleague = uniqueEmail("colleague");
    await ownerPage.getByLabel("Email address").fill(colleague);
    await ownerPage.getByLabel("Role", { exact: true }).selectOption("approver");
    await ownerPage.getByRole("button", { name: "Send invitation" }).click();
    await expect
      .poll(() => statusOf(ownerPage), SOON)
      .toBe(`Invited ${colleague} as approver. The link in their mail works for 7 days.`);
    await expect.poll(() => ownerPage.locator("#invites tbody tr").count(), SOON).toBe(1);

    // The colleague opens the mail's link, signed out: sign up, enrol, come back, join.
    const token = lastInviteTokenFor(h.inbox, colleague);
    const { context, page, problems } = await openPage();
    await page.goto(`${base}/invite?token=${token}`);
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toMatch(/^Join /);
    await saveScreenshot(page, `teams-invitation.png`);
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole("link", { name: "Sign up" }).click();
    await page.waitForURL(/\/sign-up\?return_to=/);
    await expect.poll(() => page.locator("#return-reason").textContent()).toMatch(/invited/);
    await page.getByLabel("Email address").fill(colleague);
    await page.getByRole("button", { name: "Email me a code" }).click();
    const code = page.getByLabel("8-digit code from the email");
    await code.waitFor({ state: "visible" });
    await expect.poll(() => h.inbox.mails.filter((m) => m.to === colleague).length, SOON).toBe(2);
    await code.fill(lastCodeFor(h.inbox, colleague));
    await page.getByRole("button", { name: "Create account" }).click();
    await page.waitForURL(`${base}/enroll-totp`);
    await expect.poll(() => page.locator("#secret").textContent()).toMatch(/^[A-Z2-7]{4} /);
    const secret = (await page.locator("#secret").textContent())!.replace(/\s+/g, "");
    const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret) });
    await page
      .getByLabel("6-digit code from the app")
      .fill(totp.generate({ timestamp: h.clock.now.getTime() }));
    await page.getByRole("button", { name: "Confirm" }).click();
    await expect.poll(() => page.locator("#backup-codes li").count()).toBe(10);
    await page.getByRole("link", { name: "Continue" }).click();
    await page.waitForURL(`${base}/invite?token=${token}`);
    await page.getByRole("button", { name: /^Join / }).click();
    await page.waitForURL(`${base}/console`);
    await expect.poll(() => page.locator("#header-role").textContent(), SOON).toBe("approver");

    // An approver sees the vault and the inbox, not the controls of other roles.
    await expect.poll(() => page.locator("#items tbody tr").count(), SOON).toBe(1);
    for (const id of [
      "#add-form",
      "#client-form",
      "#invite-form",
      "#settings-form",
      "#transfer-form",
      ".actions.export",
    ]) {
      expect(await page.locator(id).isVisible(), id).toBe(false);
    }
    expect(await page.locator("#items tbody tr").first().getByRole("button").count()).toBe(0);

    // The agent asks; the colleague approves it once in the Inbox; the agent's retry goes.
    expect((await call("/v1/report")).status).toBe("pending");
    await page.goto(`${base}/console#inbox`);
    await expect.poll(() => page.locator("#pending-approvals > tbody > tr").count(), SOON).toBe(1);
    await page.getByRole("button", { name: /^Approve once: API_KEY/ }).click();
    await expect.poll(() => statusOf(page), SOON).toMatch(/^Approved API_KEY for .* for one call\.$/);
    expect((await call("/v1/report")).origin_status).toBe(200);

    // The owner sees both members, then turns the two-person rule on in the settings.
    await ownerPage.reload();
    await expect.poll(() => ownerPage.locator("#members-table tbody tr").count(), SOON).toBe(2);
    await ownerPage.getByLabel("Email address").fill(uniqueEmail("auditor-to-be"));
    await ownerPage.getByLabel("Role", { exact: true }).selectOption("auditor");
    await ownerPage.getByRole("button", { name: "Send invitation" }).click();
    await expect.poll(() => ownerPage.locator("#invites tbody tr").count(), SOON).toBe(1);
    await ownerPage.getByLabel("Two members (the two-person rule)").check();
    await ownerPage.getByRole("button", { name: "Save settings" }).click();
    await expect
      .poll(() => statusOf(ownerPage), SOON)
      .toMatch(/^Saved\. Every Always allow now needs a second member/);
    await saveScreenshot(ownerPage, `teams-members.png`);
    expect(await seriousViolations(ownerPage)).toEqual([]);

    // The owner's Always allow waits, 1 of 2; the colleague sees who approved first and confirms.
    expect((await call("/v2/items")).status).toBe("pending");
    await ownerPage.goto(`${base}/console#inbox`);
    await expect.poll(() => ownerPage.locator("#pending-approvals > tbody > tr").count(), SOON).toBe(1);
    await ownerPage.getByRole("button", { name: /^Always allow: API_KEY/ }).click();
    await ownerPage.getByRole("button", { name: /^Always allow, as chosen/ }).click();
    await expect.poll(() => statusOf(ownerPage), SOON).toMatch(/1 of 2\. Another member must confirm it\.$/);
    await expect
      .poll(() => ownerPage.locator("p.two-person").textContent(), SOON)
      .toMatch(/^1 of 2 approvals: you approved always/);
    expect((await call("/v2/items")).status).toBe("pending");

    await page.goto(`${base}/console#inbox`);
    await expect
      .poll(() => page.locator("p.two-person").textContent(), SOON)
      .toContain(`1 of 2 approvals: ${owner.email} approved always`);
    await saveScreenshot(page, `teams-inbox-1-of-2.png`);
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole("button", { name: /^Confirm always allow, as approved first: API_KEY/ }).click();
    await expect
      .poll(() => statusOf(page), SOON)
      .toMatch(/^Confirmed: API_KEY for .* is allowed always \(2 of 2\)\.$/);
    expect((await call("/v2/items")).origin_status).toBe(200);
    await page.goto(`${base}/console#approvals`);
    await expect
      .poll(() => page.locator("#active-approvals > tbody > tr").first().textContent(), SOON)
      .toContain(`${owner.email}, confirmed by ${colleague}`);

    expect(problems).toEqual([]);
    expect(ownerProblems).toEqual([]);
    await context.close();
    await ownerPage.context().close();
  }, 180_000);
});
