// Approval by code in the console, in a real headless Chromium against the real hosted plane (issue
// H8): an agent asks for a DELETE (code A) and a harmless GET (code B) and tells the operator "type
// A to approve my GET". Typing A shows the DELETE, with the Inbox row's choices, and approves
// nothing until one is clicked; then only the request shown is approved. The agent's name and task
// read with their invisible characters as U+FFFD. Screenshots go to
// test-artifacts/browser/approve-by-code-*.png. Needs Debian's chromium: skipped without it, except on CI.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
  type ToolAnswer,
  toolAnswer,
} from "../../test/hosted.ts";

/** Long enough for the inbox's 5-second refresh and a round trip. */
const SOON = { timeout: 12_000, interval: 100 };

describe.skipIf(skipBrowserTests)("approval by code in the console, in Chromium", () => {
  let rig: BrowserRig | undefined;
  let h: HostedHarness;
  let browser: Browser;
  let base: string;
  /** What reached the origin: "METHOD /path". */
  const received: string[] = [];

  beforeAll(async () => {
    rig = await startBrowserRig();
    ({ h, base, browser } = rig);
    h.egress.setHandler((req, res) => {
      received.push(`${req.method} ${req.url}`);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: true }));
    });
  }, 120_000);

  afterAll(async () => {
    await rig?.close();
  });

  const statusOf = (page: Page) => page.locator("#status").textContent();
  const http = (agent: Client, args: Record<string, unknown>) =>
    agent
      .callTool({ name: "http_request", arguments: { item_name: "API_KEY", ...args } })
      .then(toolAnswer) as Promise<ToolAnswer>;
  const statusOfGrant = async (op: ApiBrowser, grantId: string) =>
    (await op.request("GET", "/api/grants"))
      .json()
      .grants.find((g: { grant_id: string }) => g.grant_id === grantId)?.status;

  it("shows the request a code belongs to and approves it only once a choice is clicked", async () => {
    const set = await operatorWithClient(h, {
      secret: "sk_live_bycode_canary_31c7",
      items: [{ name: "API_KEY" }],
      clientName: "repo\u202Eagent",
      origin: base,
    });
    const { op } = set;
    const agent = await connectAgent(base, set.token, "repo-agent");
    const destructive = await http(agent, {
      method: "DELETE",
      path: "/repos/acme/app",
      task_description: "Approve my GET\u200B with code A",
    });
    const harmless = await http(agent, { method: "GET", path: "/repos/acme/app" });
    expect(destructive.status).toBe("pending");
    expect(harmless.status).toBe("pending");

    const { page, problems } = await openWatchedPage(browser, {
      viewport: { width: 1280, height: 900 },
      session: { cookies: op.cookies, url: base },
    });
    await page.goto(`${base}/console#inbox`);
    await expect.poll(() => page.locator("#pending-approvals > tbody > tr").count(), SOON).toBe(2);
    // The agent's name and task, their invisible characters shown (the Inbox row).
    const deleteRow = page.locator("#pending-approvals > tbody > tr").filter({ hasText: "DELETE" });
    expect(await deleteRow.locator("td").nth(1).textContent()).toBe("repo\uFFFDagent");
    expect(await deleteRow.textContent()).toContain("Approve my GET\uFFFD with code A");

    // A wrong code is refused in the status region, as before.
    const codeField = page.getByLabel("8-digit approval code");
    await codeField.fill(destructive.approval_code === "00000000" ? "11111111" : "00000000");
    await page.locator("#code-form").getByRole("button", { name: "Show the request" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("That approval code matches no pending approval.");
    expect(await codeField.getAttribute("aria-invalid")).toBe("true");

    // Code A, typed as the agent said: the DELETE is shown, and nothing is approved yet.
    await codeField.fill(destructive.approval_code!);
    await codeField.press("Enter");
    const shown = page.locator("#code-request");
    await shown.waitFor({ state: "visible", timeout: SOON.timeout });
    await expect
      .poll(() => statusOf(page), SOON)
      .toBe(
        "The code is for DELETE api.latch.test/repos/acme/app with API_KEY by repo\uFFFDagent: check it below, then decide.",
      );
    const found = shown.locator("#code-approval > tbody > tr");
    expect(await found.count()).toBe(1);
    expect(await found.locator(".request-line").textContent()).toBe("DELETE api.latch.test/repos/acme/app");
    expect(await found.locator("td.actions-cell button").allTextContents()).toEqual([
      "Approve once",
      "8 hours",
      "Always allow",
      "Deny",
    ]);
    expect(await page.evaluate("document.activeElement?.id")).toBe("code-request-heading");
    // While shown here, it is not a second time in the table.
    expect(await page.locator("#pending-approvals > tbody > tr").count()).toBe(1);
    expect(await statusOfGrant(op, destructive.grant_id!)).toBe("pending");
    expect(await statusOfGrant(op, harmless.grant_id!)).toBe("pending");
    await saveScreenshot(page, "approve-by-code-shown.png");

    // "Always allow" asks what it covers in the panel too, and approves nothing by itself.
    await shown.getByRole("button", { name: "Always allow: API_KEY for repo\uFFFDagent" }).click();
    const choice = shown.locator("fieldset.always-choice");
    await choice.waitFor({ state: "visible", timeout: SOON.timeout });
    expect(await choice.getByLabel("DELETE on api.latch.test under /repos/acme/").isChecked()).toBe(true);
    await choice.getByRole("button", { name: "Cancel always allow: API_KEY for repo\uFFFDagent" }).click();
    await shown.getByRole("button", { name: "Approve once: API_KEY for repo\uFFFDagent" }).waitFor();
    expect(await statusOfGrant(op, destructive.grant_id!)).toBe("pending");

    // The operator approves what was shown: the DELETE, once, by its id; the GET still waits.
    await shown.getByRole("button", { name: "Approve once: API_KEY for repo\uFFFDagent" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("Approved API_KEY for repo\uFFFDagent for one call.");
    await expect.poll(() => shown.isHidden(), SOON).toBe(true);
    expect(await statusOfGrant(op, destructive.grant_id!)).toBe("active");
    expect(await statusOfGrant(op, harmless.grant_id!)).toBe("pending");
    await expect.poll(() => page.locator("#pending-approvals > tbody > tr").count(), SOON).toBe(1);

    // Code B, then Close: nothing approved, the request back in the table.
    await codeField.fill(harmless.approval_code!);
    await codeField.press("Enter");
    await expect
      .poll(() => found.locator(".request-line").textContent(), SOON)
      .toBe("GET api.latch.test/repos/acme/app");
    await shown.getByRole("button", { name: "Close" }).click();
    await expect.poll(() => shown.isHidden(), SOON).toBe(true);
    await expect.poll(() => page.locator("#pending-approvals > tbody > tr").count(), SOON).toBe(1);
    expect(await statusOfGrant(op, harmless.grant_id!)).toBe("pending");

    expect(received).toEqual([]);
    expect(problems).toEqual([]);
    await agent.close();
  });
});
