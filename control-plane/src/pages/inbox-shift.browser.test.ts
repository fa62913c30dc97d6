// Clickjacking by a redraw, in a real headless Chromium against the real hosted plane: the inbox
// lists the newest request first and redraws as requests arrive (live stream or polling), so an
// agent that asks again while the operator reaches for a decision slides its own request's row,
// with its own decisions, under the pointer. A click within a second of a background redraw that
// moved the control under it decides nothing and says so; the same click a moment later decides
// what it shows. So does a click as the notification link (/console#inbox?grant=, which anyone can
// send) scrolls its request into view. Needs Debian's chromium: skipped without it, except on CI.
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BrowserRig, openWatchedPage, skipBrowserTests, startBrowserRig } from "../../test/chromium.ts";
import { askGrantAs, grantStatusOf, type HostedHarness, operatorWithClient } from "../../test/hosted.ts";

const SOON = { timeout: 12_000, interval: 50 };

describe.skipIf(skipBrowserTests)("the inbox redrawn under the pointer, in Chromium", () => {
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

  const approveOnce = (page: Page, id: string) => page.locator(`[data-key="${id}:prompt"]`);

  /** Where Approve once of `id` is, once the page has stopped moving it (two reads apart agree). */
  async function settledBox(page: Page, id: string) {
    let last = "";
    for (let i = 0; i < 50; i++) {
      const box = (await approveOnce(page, id).boundingBox())!;
      if (JSON.stringify(box) === last) return box;
      last = JSON.stringify(box);
      await page.waitForTimeout(200);
    }
    throw new Error(`Approve once of ${id} never stopped moving`);
  }

  it("a click on a decision an arriving request just slid under the pointer decides nothing", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: "sk_live_inbox_shift_7c21",
      items: [{ name: "API_KEY" }],
      clientName: "shift agent",
      origin: base,
    });
    const first = await askGrant(token, "/v1/transfer");
    const { page, problems } = await openWatchedPage(browser, {
      viewport: { width: 1440, height: 900 },
      session: { cookies: op.cookies, url: base },
    });
    await page.goto(`${base}/console#inbox`);
    await approveOnce(page, first).waitFor({ state: "visible", timeout: SOON.timeout });
    // The live stream redraws the inbox as requests arrive (polling alone would too, later).
    await expect.poll(() => page.evaluate("document.body.dataset.live"), SOON).toBe("open");

    // The operator points at Approve once of the transfer; the agent asks for another call.
    const box = await settledBox(page, first);
    const x = box.x + box.width / 2;
    const y = box.y + box.height / 2;
    await page.mouse.move(x, y);
    // The test's clock stands still: a second later, so the new request is listed first.
    h.clock.advance(1_000);
    const second = await askGrant(token, "/v1/wipe-all");
    await approveOnce(page, second).waitFor({ state: "visible", timeout: SOON.timeout });
    // The newest first: the new request's Approve once is now where the transfer's was.
    const slid = (await approveOnce(page, second).boundingBox())!;
    expect(
      x > slid.x && x < slid.x + slid.width && y > slid.y && y < slid.y + slid.height,
      JSON.stringify({ box, slid }),
    ).toBe(true);

    await page.mouse.click(x, y);
    await expect
      .poll(() => page.locator("#status").textContent(), SOON)
      .toBe(
        "The inbox changed just before that click: nothing was decided. Check the request, then choose again.",
      );
    await page.waitForTimeout(300);
    expect(await statusOf(op, second)).toBe("pending");
    expect(await statusOf(op, first)).toBe("pending");

    // A moment later the same click is the operator's, on what the row now shows.
    await page.waitForTimeout(1_000);
    await page.mouse.click(x, y);
    await expect
      .poll(() => page.locator("#status").textContent(), SOON)
      .toBe("Approved API_KEY for shift agent for one call.");
    expect(await statusOf(op, second)).toBe("active");
    expect(await statusOf(op, first)).toBe("pending");
    expect(problems).toEqual([]);
    await page.context().close();
  }, 120_000);

  it("a click as the notification link scrolls its request into view decides nothing", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: "sk_live_inbox_shift_notified_5e90",
      items: [{ name: "API_KEY" }],
      clientName: "linking agent",
      origin: base,
    });
    const id = await askGrant(token, "/v1/transfer");
    const { page, problems } = await openWatchedPage(browser, {
      viewport: { width: 1440, height: 900 },
      session: { cookies: op.cookies, url: base },
    });
    // Anyone can link here (the agent knows the id): the row is centred where its author expects,
    // under a pointer that double-clicked on their page.
    await page.goto(`${base}/console#inbox?grant=${id}`);
    await expect
      .poll(() => page.locator("#status").textContent(), SOON)
      .toBe("The request from the notification: API_KEY for linking agent.");
    await approveOnce(page, id).click();
    await page.waitForTimeout(300);
    expect(await statusOf(op, id)).toBe("pending");
    expect(await page.locator("#status").textContent()).toBe(
      "The inbox changed just before that click: nothing was decided. Check the request, then choose again.",
    );

    await page.waitForTimeout(1_000);
    await approveOnce(page, id).click();
    await expect
      .poll(() => page.locator("#status").textContent(), SOON)
      .toBe("Approved API_KEY for linking agent for one call.");
    expect(await statusOf(op, id)).toBe("active");
    expect(problems).toEqual([]);
    await page.context().close();
  }, 120_000);
});
