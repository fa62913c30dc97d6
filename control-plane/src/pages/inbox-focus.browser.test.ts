// Keyjacking on the inbox's notification link, in a real headless Chromium against the real hosted
// plane: anyone can link to /console#inbox?grant=<id> (an agent knows the id from its pending
// answer), so a page that has the operator keep pressing Enter or Space, then opens that address,
// must not have those keys decide the request. The row's header takes focus, never a decision
// (Approve once, or a second member's Confirm always under the two-person rule); a keyboard user
// tabs to the decision and Enter decides at once. Needs Debian's chromium: skipped without it,
// except on CI.
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BrowserRig, openWatchedPage, skipBrowserTests, startBrowserRig } from "../../test/chromium.ts";
import {
  type Browser as ApiBrowser,
  askGrantAs,
  grantStatusOf,
  type HostedHarness,
  operatorWithClient,
} from "../../test/hosted.ts";
import { startTeam } from "../../test/teams.ts";

const SOON = { timeout: 12_000, interval: 100 };

describe.skipIf(skipBrowserTests)("the inbox's notification link, in Chromium", () => {
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

  const askGrant = (token: string, path: string) => askGrantAs(h, token, path);
  const statusOf = grantStatusOf;

  /** The notification's address opened in the member's browser, once its row is shown. */
  async function openNotified(member: ApiBrowser, id: string, label: string): Promise<Page> {
    const { page, problems } = await openWatchedPage(browser, {
      viewport: { width: 1280, height: 900 },
      session: { cookies: member.cookies, url: base },
    });
    await page.goto(`${base}/console#inbox?grant=${id}`);
    await expect
      .poll(() => page.locator("#status").textContent(), SOON)
      .toBe(`The request from the notification: ${label}.`);
    expect(problems).toEqual([]);
    return page;
  }

  /** Enter and Space, as the attacker's page asked the operator to keep pressing them. */
  async function keepPressing(page: Page, times: number): Promise<void> {
    for (let i = 0; i < times; i++) {
      await page.keyboard.press(i % 2 === 0 ? "Enter" : "Space");
      await page.waitForTimeout(40);
    }
  }

  /** What has the keyboard focus: its tag, its label, and whether it is in an inbox row. */
  const focused = (page: Page): Promise<{ tag: string; label: string; isInRow: boolean }> =>
    page.evaluate(`(() => {
      const active = document.activeElement;
      return {
        tag: active ? active.tagName : "",
        label: (active && active.getAttribute("aria-label")) || "",
        isInRow: Boolean(active && active.closest("tr[data-grant]")),
      };
    })()`);

  /** Tabs from the focused header to the decision labelled `label` (none comes before it). */
  async function tabTo(page: Page, label: RegExp): Promise<void> {
    for (let i = 0; i < 10; i++) {
      await page.keyboard.press("Tab");
      const now = await focused(page);
      if (label.test(now.label)) return;
      // Tabbing from the row's header meets no decision of another row on the way.
      expect(now.isInRow, `tabbed to ${now.tag} ${now.label}`).toBe(true);
    }
    throw new Error(`no ${label} within 10 tabs`);
  }

  it("decides nothing on keypresses, and tabbing to Approve once then Enter approves at once", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: "sk_live_inbox_keyjack_41d0",
      items: [{ name: "API_KEY" }],
      clientName: "keyjack agent",
      origin: base,
    });
    const id = await askGrant(token, "/v1/transfer");
    const page = await openNotified(op, id, "API_KEY for keyjack agent");

    // The keypresses meant for the attacker's page land on the inbox as soon as the row shows.
    await keepPressing(page, 12);
    await page.waitForTimeout(300);
    expect(await statusOf(op, id)).toBe("pending");
    expect(await focused(page)).toMatchObject({ tag: "TH", isInRow: true });
    expect(await page.locator("#status").textContent()).not.toMatch(/^Approved/);

    await tabTo(page, /^Approve once: API_KEY for keyjack agent$/);
    await page.keyboard.press("Enter");
    await expect
      .poll(() => page.locator("#status").textContent(), SOON)
      .toBe("Approved API_KEY for keyjack agent for one call.");
    expect(await statusOf(op, id)).toBe("active");
    await page.context().close();
  }, 120_000);

  it("under the two-person rule, a second member's Confirm always is never focused for them", async () => {
    const team = await startTeam(h, "sk_live_inbox_two_person_9b3e", base);
    const set = await team.owner.browser.request("PATCH", "/api/orgs/settings", {
      standing_approvals_need: 2,
    });
    expect(set.statusCode, set.body).toBe(200);
    const id = await askGrant(team.token, "/v1/deploy");
    const first = await team.owner.browser.request("POST", `/api/grants/${id}/approve`, {
      policy: "item_standing",
      scope: "credential",
    });
    expect(first.json().grant, first.body).toMatchObject({ status: "pending", approvals: "1 of 2" });

    const page = await openNotified(team.approver.browser, id, "API_KEY for team agent");
    await keepPressing(page, 12);
    await page.waitForTimeout(300);
    expect(await statusOf(team.owner.browser, id)).toBe("pending");
    expect(await focused(page)).toMatchObject({ tag: "TH", isInRow: true });

    await tabTo(page, /^Confirm always allow, as approved first: API_KEY for team agent$/);
    await page.keyboard.press("Enter");
    await expect
      .poll(() => page.locator("#status").textContent(), SOON)
      .toBe("Confirmed: API_KEY for team agent is allowed always (2 of 2).");
    expect(await statusOf(team.owner.browser, id)).toBe("active");
    await page.context().close();
  }, 180_000);
});
