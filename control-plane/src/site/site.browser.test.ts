// The landing page and a docs page in a real headless Chromium against the real hosted plane: the
// CSP refuses nothing, every image and the stylesheet load, and screenshots of both go to
// test-artifacts/browser/. Needs Debian's chromium: skipped without it, except on CI.
import { describe, expect, it } from "vitest";
import { saveScreenshot, skipBrowserTests, startBrowserRig } from "../../test/chromium.ts";

describe.skipIf(skipBrowserTests)("the public site in Chromium", () => {
  it("shows the landing page and the docs with nothing refused and every image loaded", async () => {
    const rig = await startBrowserRig();
    try {
      for (const [path, name] of [
        ["/", "site-landing"],
        ["/docs/connect", "site-docs-connect"],
      ] as const) {
        for (const scheme of ["light", "dark"] as const) {
          const context = await rig.browser.newContext({
            viewport: { width: 1100, height: 900 },
            colorScheme: scheme,
          });
          const page = await context.newPage();
          const problems: string[] = [];
          page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
          page.on("console", (message) => {
            if (/content security policy|refused to|failed to load/i.test(message.text()))
              problems.push(message.text());
          });
          page.on("response", (response) => {
            if (response.status() >= 400) problems.push(`${response.status()} ${response.url()}`);
          });
          await page.goto(`${rig.base}${path}`, { waitUntil: "networkidle" });
          expect(await page.locator("h1").count()).toBe(1);
          const broken = await page.$$eval("img", (images) =>
            images.filter((image) => !image.complete || image.naturalWidth === 0).map((image) => image.src),
          );
          expect(broken).toEqual([]);
          await saveScreenshot(page, `${name}-${scheme}.png`);
          expect(problems).toEqual([]);
          await context.close();
        }
      }
    } finally {
      await rig.close();
    }
  }, 120_000);
});
