// Issue 22 in a real headless Chromium against the real hosted plane, a real egress proxy and a TLS
// origin, with the official MCP SDK client as the agent: "Always allow" asks what always covers (a
// DELETE elsewhere still asks); the Approvals section lists and revokes; a JSON body reads formatted
// in the Inbox and the mail; the approval link's page shows the request and its Revoke works; on a
// 390 px phone the Inbox is cards with Approve and Deny in reach; a call repeated after a Deny
// mails nobody and tells the agent why; the collect page takes one answer however often it is
// clicked. Screenshots of each page at 1440 and 390 px go to test-artifacts/browser/approvals-*.png.
// Needs Debian's chromium: skipped without it, except on CI.
import { createHash } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Browser, BrowserContext, Page } from "playwright-core";
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
const WIDE = { width: 1440, height: 900 };
const PHONE = { width: 390, height: 844 };

describe.skipIf(skipBrowserTests)("approvals an operator can read, scope and undo, in Chromium", () => {
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

  /** An operator with API_KEY stored and a model client, and that client connected as an agent. */
  async function setUp(clientName = "console agent") {
    const set = await operatorWithClient(h, {
      secret: "sk_live_approvals_canary_6a0c",
      items: [{ name: "API_KEY" }, { name: "OTHER_KEY" }],
      clientName,
      origin: base,
    });
    const agent = await connectAgent(base, set.token, clientName.replace(/ /g, "-"));
    return { ...set, agent };
  }

  /** A page in a browser holding the operator's session, recording script errors and CSP refusals. */
  async function openAs(
    op: ApiBrowser,
    viewport = WIDE,
  ): Promise<{ page: Page; context: BrowserContext; problems: string[] }> {
    return openWatchedPage(browser, { viewport, session: { cookies: op.cookies, url: base } });
  }

  /** A full-page screenshot at 1440 px and again at 390 px (the page is left at 1440). */
  async function shots(page: Page, name: string) {
    const size = page.viewportSize()!;
    await page.setViewportSize(WIDE);
    await saveScreenshot(page, `approvals-${name}-1440.png`);
    await page.setViewportSize(PHONE);
    await page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))");
    await saveScreenshot(page, `approvals-${name}-390.png`);
    await page.setViewportSize(size);
  }

  const statusOf = (page: Page) => page.locator("#status").textContent();
  const http = (agent: Client, args: Record<string, unknown>) =>
    agent
      .callTool({ name: "http_request", arguments: { item_name: "API_KEY", ...args } })
      .then(toolAnswer) as Promise<ToolAnswer>;
  const forModel = (answer: ToolAnswer) => (answer.next as { for_model: string }).for_model;
  /** The approval mails sent to `email` (its sign-up code mail left out). */
  const mailsTo = (email: string) =>
    h.inbox.mails.filter((m) => m.to === email && /approve\?token=/.test(mailText(m.raw)));
  /** A mail's text as a reader sees it: quoted-printable undone. */
  const mailText = (raw: string) =>
    Buffer.from(
      raw
        .replace(/=\r?\n/g, "")
        .replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16))),
      "latin1",
    )
      .toString("utf8")
      .replace(/\r\n/g, "\n");

  it("Always allow defaults to the request's method and path prefix: a DELETE elsewhere still asks; the whole credential warns", async () => {
    const { op, agent, email } = await setUp();
    const body = { title: "Ship it", labels: ["release"], assignee: "<img src=x onerror=alert(1)>" };
    const asked = await http(agent, {
      method: "POST",
      path: "/repos/acme/app/issues",
      body,
      task_description: "File the release issue",
    });
    expect(asked.status).toBe("pending");

    const { page, problems } = await openAs(op);
    await page.goto(`${base}/console#inbox`);
    // Found by its request: a newer request is listed first.
    const row = page.locator("#pending-approvals > tbody > tr").filter({ hasText: "/repos/acme/app/issues" });
    await row.waitFor({ state: "visible", timeout: SOON.timeout });
    // The body, laid out as JSON, with its SHA-256 beneath; the markup in it is text.
    const digest = createHash("sha256").update(JSON.stringify(body)).digest("hex");
    expect(await row.locator(".body-kind").textContent()).toMatch(/^Body \(JSON, \d+ bytes\)$/);
    expect(await row.locator("pre.body-text").textContent()).toBe(JSON.stringify(body, null, 2));
    expect(await row.locator(".digest").textContent()).toBe(`Body SHA-256 ${digest}`);
    expect(await page.locator("img[src=x]").count()).toBe(0);
    await shots(page, "inbox");

    // The JSON body in the mail: indented, behind "| ", the digest beneath.
    await expect.poll(() => mailsTo(email).length, SOON).toBeGreaterThan(0);
    const mail = mailText(mailsTo(email).at(-1)!.raw);
    expect(mail).toContain(
      '    | {\n    |   "title": "Ship it",\n    |   "labels": [\n    |     "release"\n    |   ],',
    );
    expect(mail).toContain(`    Body SHA-256 ${digest}`);

    // Always allow asks first: the request's method and host under its path, or the whole credential.
    await page.getByRole("button", { name: "Always allow: API_KEY for console agent" }).click();
    const choice = row.locator("fieldset.always-choice");
    await choice.waitFor({ state: "visible" });
    const scoped = choice.getByLabel("POST on api.latch.test under /repos/acme/app/");
    const whole = choice.getByLabel("The whole credential: any method, any path on api.latch.test");
    expect(await scoped.isChecked()).toBe(true);
    expect(await whole.isChecked()).toBe(false);
    expect(await page.evaluate("document.activeElement?.getAttribute('data-key')")).toMatch(/:scope$/);
    await whole.check();
    expect(await choice.locator(".choice.warning .hint").textContent()).toBe(
      "The agent could then also delete or change anything API_KEY reaches, without asking.",
    );
    await shots(page, "inbox-always-choice");
    // A redraw in the background (another request arriving) keeps the choice as it was.
    expect((await http(agent, { method: "GET", path: "/v1/elsewhere" })).status).toBe("pending");
    await expect.poll(() => page.locator("#pending-approvals > tbody > tr").count(), SOON).toBe(2);
    expect(await whole.isChecked()).toBe(true);
    await scoped.check();
    await choice.getByRole("button", { name: "Always allow, as chosen: API_KEY for console agent" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("Approved API_KEY for console agent until revoked.");

    // Covered: the same method under the prefix. Not covered: a DELETE, another path.
    expect(
      (await http(agent, { method: "POST", path: "/repos/acme/app/issues", body: { title: "b" } }))
        .origin_status,
    ).toBe(200);
    const before = received.length;
    expect((await http(agent, { method: "DELETE", path: "/repos/acme/app" })).status).toBe("pending");
    expect((await http(agent, { method: "POST", path: "/repos/acme/other/issues", body: {} })).status).toBe(
      "pending",
    );
    expect(received.length).toBe(before);
    expect(problems).toEqual([]);
    await agent.close();
    await page.context().close();
  }, 120_000);

  it("the Approvals section lists what is in force, filters it, revokes it, and the agent's next call is pending again", async () => {
    const { op, agent, email } = await setUp("listed agent");
    const always = await http(agent, {
      method: "POST",
      path: "/repos/acme/app/issues",
      body: { title: "a" },
    });
    await op.request("POST", `/api/grants/${always.grant_id}/approve`, {
      policy: "item_standing",
      scope: "path_prefix",
    });
    const hours = await http(agent, { method: "GET", path: "/v1/reports/today" });
    await op.request("POST", `/api/grants/${hours.grant_id}/approve`, { policy: "session" });
    const whole = await http(agent, { method: "GET", path: "/v2/me", item_name: "OTHER_KEY" });
    await op.request("POST", `/api/grants/${whole.grant_id}/approve`, {
      policy: "item_standing",
      scope: "credential",
    });
    expect(
      (await http(agent, { method: "POST", path: "/repos/acme/app/issues/1", body: {} })).origin_status,
    ).toBe(200);

    const { page, problems } = await openAs(op);
    await page.goto(`${base}/console`);
    await page
      .getByRole("navigation", { name: "Console sections" })
      .getByRole("link", { name: "Approvals" })
      .click();
    await page.waitForURL(/#approvals$/);
    const rows = page.locator("#active-approvals > tbody > tr");
    await expect.poll(() => rows.count(), SOON).toBe(3);
    const scopedRow = rows.filter({ hasText: "under /repos/acme/app/" });
    expect(await rows.locator("th").allTextContents()).toEqual(
      expect.arrayContaining(["API_KEY", "OTHER_KEY"]),
    );
    expect(await scopedRow.locator("td").allTextContents()).toEqual([
      "listed agent",
      "POST on api.latch.test under /repos/acme/app/",
      "Always",
      email,
      expect.any(String),
      expect.stringMatching(/\d/),
      "When revoked",
      "Revoke",
    ]);
    expect(
      await rows.filter({ hasText: "The whole credential" }).locator("td.covers.whole").textContent(),
    ).toBe("The whole credential: any method, any path on api.latch.test");
    expect(
      await rows
        .filter({ hasText: "GET on api.latch.test under /v1/reports/" })
        .locator("td")
        .nth(2)
        .textContent(),
    ).toBe("8 hours");
    await shots(page, "approvals");

    // Filters: by how long it lasts, then by credential.
    await page.locator("#approvals-policy").selectOption("session");
    await expect.poll(() => rows.count()).toBe(1);
    await page.locator("#approvals-policy").selectOption("");
    await page.locator("#approvals-item").selectOption("OTHER_KEY");
    await expect.poll(() => rows.count()).toBe(1);
    await page.locator("#approvals-item").selectOption("");
    await expect.poll(() => rows.count()).toBe(3);

    // Revoke: at once, audited; the agent's next call of that kind waits in the inbox again.
    await scopedRow.getByRole("button", { name: /^Revoke: API_KEY for listed agent/ }).click();
    await expect
      .poll(() => statusOf(page), SOON)
      .toBe("Revoked API_KEY for listed agent. Its next call waits in the Inbox.");
    await expect.poll(() => rows.count()).toBe(2);
    expect((await http(agent, { method: "POST", path: "/repos/acme/app/issues/2", body: {} })).status).toBe(
      "pending",
    );
    const audit = (await op.request("GET", "/api/audit?action=grant_revoked")).json().events;
    expect(audit.length).toBe(1);

    // On a phone the list is cards, each with its Revoke in reach.
    await page.setViewportSize(PHONE);
    const revoke = rows.first().getByRole("button", { name: /^Revoke/ });
    await revoke.scrollIntoViewIfNeeded();
    const box = (await revoke.boundingBox())!;
    expect(box.x).toBeGreaterThanOrEqual(0);
    expect(box.x + box.width).toBeLessThanOrEqual(PHONE.width);
    expect(problems).toEqual([]);
    await agent.close();
    await page.context().close();
  }, 120_000);

  it("the approval link's page shows the request with its body and what was approved, and its Revoke works", async () => {
    const { op, agent, email } = await setUp("link agent");
    const body = { amount: 5000, currency: "eur", note: "</code><script>alert(1)</script>" };
    const asked = await http(agent, { method: "POST", path: "/v1/payouts?dry=0", body });
    expect(asked.status).toBe("pending");
    await expect.poll(() => mailsTo(email).length, SOON).toBeGreaterThan(0);
    const link = /https?:\/\/\S+\/approve\?token=[A-Za-z0-9_-]+/.exec(
      mailText(mailsTo(email).at(-1)!.raw),
    )![0];

    const { page, problems } = await openAs(op);
    let alerted = false;
    page.on("dialog", async (dialog) => {
      alerted = true;
      await dialog.dismiss();
    });
    await page.goto(link);
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("Approved");
    const request = page.locator("section[aria-labelledby=request-heading]");
    expect(await request.locator("dd").allTextContents()).toEqual([
      '"link agent"',
      "API_KEY (staging)",
      "POST https://api.latch.test/v1/payouts?dry=0",
    ]);
    expect(await request.locator("pre.body-text").textContent()).toBe(JSON.stringify(body, null, 2));
    expect(await page.locator("#approved").textContent()).toBe(
      "Approved once: exactly this request, the next time the agent sends it.",
    );
    await shots(page, "approve-link");

    await page.getByRole("button", { name: "Revoke this approval" }).click();
    await expect
      .poll(() => page.locator("#approved").textContent(), SOON)
      .toBe("Revoked: the agent's next call asks again.");
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("Revoked");
    expect(await page.getByRole("button", { name: "Revoke this approval" }).count()).toBe(0);
    await shots(page, "approve-link-revoked");
    const again = await http(agent, { method: "POST", path: "/v1/payouts?dry=0", body });
    expect(again.status).toBe("pending");
    expect(again.grant_id).not.toBe(asked.grant_id);
    expect(alerted).toBe(false);
    expect(problems).toEqual([]);
    await agent.close();
    await page.context().close();
  }, 120_000);

  it("on a 390 px phone the Inbox is cards with Approve and Deny in view; a call repeated after the Deny mails nobody and tells the agent why", async () => {
    const { op, agent, email } = await setUp("phone agent");
    const ask = { method: "DELETE", path: "/v1/repos/acme", task_description: "Clean up the old repository" };
    expect((await http(agent, ask)).status).toBe("pending");
    await expect.poll(() => mailsTo(email).length, SOON).toBe(1);

    const { page, problems } = await openAs(op, PHONE);
    await page.goto(`${base}/console#inbox`);
    const row = page.locator("#pending-approvals > tbody > tr").first();
    await row.waitFor({ state: "visible", timeout: SOON.timeout });
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(PHONE.width);
    for (const name of ["Approve once: API_KEY for phone agent", "Deny: API_KEY for phone agent"]) {
      const control = page.getByRole("button", { name });
      await control.scrollIntoViewIfNeeded();
      const box = (await control.boundingBox())!;
      expect(box.x, name).toBeGreaterThanOrEqual(0);
      expect(box.x + box.width, name).toBeLessThanOrEqual(PHONE.width);
      expect(await control.isVisible()).toBe(true);
    }
    expect(await row.locator("td.request-cell").getAttribute("data-label")).toBe("Request");
    await shots(page, "inbox-phone");
    await page.getByRole("button", { name: "Deny: API_KEY for phone agent" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("Denied the request for API_KEY for phone agent.");

    // The same call again: pending (spec 3.1), but no mail, and the agent is told it was refused.
    const again = await http(agent, ask);
    expect(again.status).toBe("pending");
    expect(forModel(again)).toMatch(/^The operator refused this exact request a moment ago/);
    expect(forModel(again)).toMatch(/Do not retry it on your own/);
    await expect.poll(() => row.locator(".after-deny").count(), SOON).toBe(1);
    expect(await row.locator(".after-deny").textContent()).toMatch(/^Asked again after a Deny \(/);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(mailsTo(email).length).toBe(1);
    await shots(page, "inbox-after-deny");
    expect(problems).toEqual([]);
    await agent.close();
    await page.context().close();
  }, 120_000);

  it("a body over 64 KiB, shown cut, is approved only after the operator says it approves it unread", async () => {
    const { op, agent } = await setUp("big body agent");
    const body = { head: "Ship it", padding: "x".repeat(70 * 1024), tail: "and then delete everything" };
    const asked = await http(agent, { method: "POST", path: "/v1/big", body });
    expect(asked.status).toBe("pending");
    const { page, problems } = await openAs(op);
    await page.goto(`${base}/console#inbox`);
    const once = page.getByRole("button", { name: "Approve once: API_KEY for big body agent" });
    await once.waitFor({ state: "visible", timeout: SOON.timeout });
    await once.click();
    const question =
      "Only the first 64 KiB of this request's body is shown. Approve it without reading the rest?";
    await page.getByRole("group", { name: question }).waitFor({ state: "visible" });
    // Nothing is approved yet: Cancel gives the decisions back.
    const grant = async () =>
      ((await op.request("GET", "/api/grants")).json().grants as { grant_id: string; status: string }[]).find(
        (g) => g.grant_id === asked.grant_id,
      )!;
    expect((await grant()).status).toBe("pending");
    await page.getByRole("button", { name: "Cancel" }).click();
    await once.click();
    await page.getByRole("button", { name: "Approve unread" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("Approved API_KEY for big body agent for one call.");
    expect((await grant()).status).toBe("active");
    expect(problems).toEqual([]);
    await agent.close();
    await page.context().close();
  }, 120_000);

  it("a link from another site shows in the console only what Latch itself would say", async () => {
    const { op } = await setUp("linked agent");
    const { page, problems } = await openAs(op);
    // A connect outcome the callback never sends: nothing is said.
    await page.goto(
      `${base}/console#vault?connect_error=GitHub.%20Your%20session%20is%20locked%3B%20call%20%2B1-555-0100&reason=now`,
    );
    await expect.poll(() => page.locator("#items tbody tr").count(), SOON).toBeGreaterThan(0);
    expect(await statusOf(page)).not.toContain("locked");
    expect(page.url()).toBe(`${base}/console#vault`);
    // One it does send is said.
    await page.goto("about:blank");
    await page.goto(`${base}/console#vault?connect_error=github&reason=exchange_failed`);
    await expect.poll(() => statusOf(page), SOON).toBe("Could not connect github (exchange_failed).");
    // A policy prefilled from a link names the agent as this organisation knows it, never as the
    // link says.
    await page.goto("about:blank");
    await page.goto(
      `${base}/console#policies?agent=cli_made_up&name=Your%20CI%20deploy%20bot&host=api.stripe.com&method=POST&path=/v1/transfers`,
    );
    const from = page.locator("#policy-form-from");
    await from.waitFor({ state: "visible", timeout: SOON.timeout });
    expect(await from.textContent()).toBe(
      "From the request of cli_made_up, which is not a client here: narrow or widen it, then Add rule and Save.",
    );
    expect(problems).toEqual([]);
    await page.context().close();
  }, 120_000);

  it("a live inbox drawn before the account is known still gets its decisions once the role is", async () => {
    const { op, agent } = await setUp("slow account agent");
    expect((await http(agent, { method: "GET", path: "/v1/slow" })).status).toBe("pending");
    const { page, problems } = await openAs(op);
    // The account answers late: the live stream's "ready" (and its redraw) comes first.
    await page.route("**/api/auth/me", async (route) => {
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      await route.continue();
    });
    await page.goto(`${base}/console#inbox`);
    await expect.poll(() => page.locator("#pending-approvals > tbody > tr").count(), SOON).toBeGreaterThan(0);
    // Well inside the minute after which the live inbox polls again on its own.
    const once = page.getByRole("button", { name: "Approve once: API_KEY for slow account agent" });
    await once.waitFor({ state: "visible", timeout: 8_000 });
    expect(await page.getByText("Waiting for a member who may approve").count()).toBe(0);
    expect(problems).toEqual([]);
    await agent.close();
    await page.context().close();
  }, 120_000);

  it("the collect page shows the request and the provider's steps, takes one answer for a double submit, and sends a signed-out reader to sign in", async () => {
    const { op, agent } = await setUp("collect agent");
    const miss = toolAnswer(
      await agent.callTool({
        name: "http_request",
        arguments: {
          method: "POST",
          path: "/repos/acme/app/issues",
          host: "api.github.com",
          body: { title: "From the agent" },
          task_description: "Open an issue",
        },
      }),
    );
    expect(miss.status).toBe("need_item");

    // Signed out: a sentence and a sign-in link that comes back here.
    const stranger = await browser.newContext({ viewport: WIDE });
    const away = await stranger.newPage();
    await away.goto(miss.collect_url!);
    await expect
      .poll(() => away.locator("#status").textContent())
      .toBe("Sign in as an operator of this organisation to see this request.");
    const signIn = away.getByRole("link", { name: "Sign in" });
    expect(await signIn.getAttribute("href")).toBe(
      `/sign-in?return_to=${encodeURIComponent(new URL(miss.collect_url!).pathname)}`,
    );
    await shots(away, "collect-signed-out");
    await signIn.click();
    await away.waitForURL(/\/sign-in\?return_to=/);
    expect(await away.locator("#return-reason").textContent()).toBe(
      "Sign in to store the credential an agent asked for. You will land back on its request.",
    );
    await stranger.close();

    const { page, problems } = await openAs(op);
    await page.goto(miss.collect_url!);
    const form = page.locator("#collect");
    await form.waitFor({ state: "visible" });
    expect(await page.locator("#recipe-steps li").count()).toBeGreaterThan(0);
    expect(await form.locator("pre.body-text").textContent()).toBe('{\n  "title": "From the agent"\n}');
    expect(await page.getByRole("button", { name: "Deny the request" }).getAttribute("class")).toBe(
      "secondary",
    );
    expect(await page.getByLabel("Always: POST on api.github.com under /repos/acme/app/").isChecked()).toBe(
      false,
    );
    await page.getByLabel("Inject as").selectOption("header:");
    await page.getByLabel("Header, parameter or cookie name").fill("X-Api-Key");
    await page.getByLabel("Value").fill("ghp_collected_in_chromium_0001");
    await shots(page, "collect");

    // A double click sends one answer; the page says Stored, never "already fulfilled".
    await page.getByRole("button", { name: "Store it" }).dblclick();
    await expect.poll(() => statusOf(page), SOON).toBe("Stored. The agent can retry its request now.");
    const items = (await op.request("GET", "/api/items")).json().items as { name: string; inject: string }[];
    expect(items.filter((i) => i.name === "GITHUB_TOKEN")).toEqual([
      expect.objectContaining({ inject: "header:X-Api-Key" }),
    ]);
    await shots(page, "collect-stored");

    // The same request answered again from another tab: a sentence, not an error code.
    const other = await page.context().newPage();
    await other.goto(miss.collect_url!);
    await expect
      .poll(() => other.locator("#status").textContent(), SOON)
      .toBe("This request is fulfilled: there is nothing left to do.");
    expect(problems).toEqual([]);
    await agent.close();
    await page.context().close();
  }, 120_000);

  it("the other pages this issue changed: the Vault fits 1440 px, Clients and credentials say when last used, an owner deletes an organisation by typing its name", async () => {
    const { op, agent } = await setUp("pages agent");
    // A call, so the credential and the client have a last use; a credential with long names.
    const asked = await http(agent, { method: "GET", path: "/v1/data" });
    await op.request("POST", `/api/grants/${asked.grant_id}/approve`, { policy: "session" });
    expect((await http(agent, { method: "GET", path: "/v1/data" })).origin_status).toBe(200);
    const stored = await op.request("POST", "/api/items", {
      name: "WEBHOOK_SIGNING_SECRET_FOR_THE_BILLING_SERVICE",
      value: "whsec_pages_canary_0042",
      environment: "staging",
      kind: "login",
      username: "billing-service-user@example.test",
      allowed_hosts: ["hooks.billing.example.test", "api.billing.example.test", "files.billing.example.test"],
      inject: "basic",
      folder_name: "billing",
    });
    expect(stored.statusCode, stored.body).toBe(201);

    const { page, problems } = await openAs(op);
    await page.goto(`${base}/console#vault`);
    const rows = page.locator("#items > tbody > tr");
    await expect.poll(() => rows.count(), SOON).toBe(3);
    expect(await rows.filter({ hasText: "API_KEY" }).locator("td").nth(5).locator("time").count()).toBe(1);
    expect(await rows.filter({ hasText: "OTHER_KEY" }).locator("td").nth(5).textContent()).toBe("Never");
    // At 1440 px the whole table is in view: nothing scrolls sideways, every action shows.
    const overflow = await page
      .locator("#items")
      .evaluate((table: { parentElement: { scrollWidth: number; clientWidth: number } }) => {
        return table.parentElement.scrollWidth - table.parentElement.clientWidth;
      });
    expect(overflow).toBe(0);
    for (const button of await page.locator("#items button").all()) {
      const box = (await button.boundingBox())!;
      expect(box.x + box.width).toBeLessThanOrEqual(WIDE.width);
    }
    await page.getByRole("button", { name: /^Edit WEBHOOK_SIGNING/ }).click();
    expect(await page.locator("#edit-inject").inputValue()).toBe("basic");
    await shots(page, "vault");
    // On a phone only the table scrolls sideways (WCAG 1.4.10 exempts it), never the page's text.
    await page.setViewportSize(PHONE);
    const wider = await page.evaluate(`[...document.querySelectorAll("main *")]
      .filter((e) => !e.closest(".table-wrap, .visually-hidden") && e.getBoundingClientRect().right > innerWidth + 1)
      .map((e) => e.tagName + "#" + e.id)`);
    expect(wider).toEqual([]);
    await page.setViewportSize(WIDE);

    await page.goto(`${base}/console#clients`);
    const clients = page.locator("#issued > tbody > tr");
    await expect.poll(() => clients.count(), SOON).toBe(1);
    await expect.poll(() => clients.first().locator("td").nth(4).locator("time").count(), SOON).toBe(1);
    await shots(page, "clients");

    // A new, empty organisation: the first-run hints in each section.
    await page.goto(`${base}/console#access`);
    await page.locator("#org-form").getByLabel("Name").fill("Scratch org");
    await page.getByRole("button", { name: "Create and switch to it" }).click();
    await expect.poll(() => page.locator("#organisation").textContent(), SOON).toBe("Scratch org");
    await page.goto(`${base}/console#vault`);
    await expect.poll(() => page.locator("#items-first-run").isVisible(), SOON).toBe(true);
    await shots(page, "vault-first-run");
    await page.goto(`${base}/console#inbox`);
    await expect.poll(() => page.locator("#pending-approvals-empty").isVisible(), SOON).toBe(true);
    await shots(page, "inbox-empty");
    await page.goto(`${base}/console#approvals`);
    await expect.poll(() => page.locator("#active-approvals-empty").isVisible(), SOON).toBe(true);
    await shots(page, "approvals-empty");

    // Deleting it: the owner types its name; a wrong name is refused in place.
    await page.goto(`${base}/console#access`);
    const danger = page.locator("#delete-org-form");
    await danger.waitFor({ state: "visible" });
    const confirmName = danger.getByLabel("Type the organisation's name to confirm");
    await confirmName.fill("Scratch");
    await danger.getByRole("button", { name: "Delete organisation" }).click();
    await expect.poll(() => statusOf(page)).toBe("Type the organisation's name exactly: Scratch org");
    await shots(page, "access-delete-organisation");
    await confirmName.fill("Scratch org");
    await danger.getByRole("button", { name: "Delete organisation" }).click();
    await page.waitForURL(`${base}/console`);
    await expect
      .poll(() => page.locator("#org-switch option").allTextContents(), SOON)
      .not.toContain("Scratch org");

    // The landing page (the console's picture, copy buttons) and the HTML 404.
    await page.goto(`${base}/`);
    await page.getByRole("button", { name: "Copy the MCP address" }).waitFor({ state: "visible" });
    await shots(page, "landing");
    await page.goto(`${base}/no-such-page`);
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("Page not found");
    await shots(page, "not-found");
    expect(problems).toEqual([]);
    await agent.close();
    await page.context().close();
  }, 120_000);
});
