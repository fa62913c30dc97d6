// The operator console in a real headless Chromium against the real hosted plane on a real port:
// an operator signs up through the pages, stores a credential (its value never reaches the page
// again), issues a model client and reads its token off the page; the official MCP SDK client uses
// that token, the console's inbox shows the pending call, the Approve-by-code form and the row
// buttons approve it, and the audit shows the call. Then clients (trusted, rotate, revoke) and the
// access section (revoke one session, sign out the others). Screenshots go to
// test-artifacts/browser/console-*.png. Needs Debian's chromium: skipped without it, except on CI.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type BrowserRig,
  openWatchedPage,
  SHOTS,
  saveScreenshot,
  signUpInChromium,
  skipBrowserTests,
  startBrowserRig,
} from "../../test/chromium.ts";
import {
  Browser as ApiBrowser,
  connectAgent,
  type HostedHarness,
  lastCodeFor,
  toolAnswer,
} from "../../test/hosted.ts";

const SECRET = "sk_live_console_canary_5b1e";
const ROTATED = "sk_live_console_rotated_c0d7";
const OTHER = "sk_other_console_canary_99f0";
/** Long enough for the inbox's 5-second refresh and a round trip. */
const SOON = { timeout: 12_000, interval: 100 };

describe.skipIf(skipBrowserTests)("the operator console in Chromium", () => {
  let rig: BrowserRig | undefined;
  let h: HostedHarness;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    rig = await startBrowserRig();
    ({ h, base, browser } = rig);
    h.egress.setHandler((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ auth: req.headers.authorization }));
    });
  }, 120_000);

  afterAll(async () => {
    await rig?.close();
  });

  /** A new page that records script errors, CSP refusals and failed requests; it may use the clipboard. */
  const openPage = () =>
    openWatchedPage(browser, { viewport: { width: 1280, height: 900 }, clipboardFor: base });

  const shot = (page: Page, name: string) => saveScreenshot(page, `console-${name}.png`);
  const statusOf = (page: Page) => page.locator("#status").textContent();

  /** Signs up through the pages and reaches the console; returns the operator's authenticator. */
  const signUp = (page: Page) => signUpInChromium(page, h, base, { label: "console" });

  /** Opens a console section from the navigation. */
  async function openSection(page: Page, name: string) {
    await page.getByRole("navigation", { name: "Console sections" }).getByRole("link", { name }).click();
    await page.waitForURL(new RegExp(`#${name.toLowerCase()}$`));
    const heading = page.getByRole("heading", { level: 2, name, exact: true });
    await heading.waitFor({ state: "visible" });
    expect(await page.locator(":focus").getAttribute("id")).toBe(`${name.toLowerCase()}-heading`);
  }

  it("stores a credential, issues a model client, approves its MCP call from the inbox and audits it", async () => {
    const { page, problems } = await openPage();
    await signUp(page);

    // The vault opens first, empty.
    const nav = page.getByRole("navigation", { name: "Console sections" });
    expect(await nav.getByRole("link", { name: "Vault" }).getAttribute("aria-current")).toBe("page");
    await expect.poll(() => page.locator("#items-empty").isVisible()).toBe(true);
    expect(await page.locator("#clients").isHidden()).toBe(true);

    // Add two credentials; the value field is a password field without autocomplete.
    const add = page.locator("#add-form");
    const value = add.getByLabel("Value");
    expect(await value.getAttribute("type")).toBe("password");
    expect(await value.getAttribute("autocomplete")).toBe("off");
    await add.getByLabel("Name", { exact: true }).fill("api_key");
    await value.fill(SECRET);
    await add.getByLabel("Allowed hosts").fill("api.latch.test");
    await add.getByRole("button", { name: "Add credential" }).click();
    expect(await statusOf(page)).toMatch(/uppercase letter/);
    expect(await add.getByLabel("Name", { exact: true }).getAttribute("aria-invalid")).toBe("true");
    await add.getByLabel("Name", { exact: true }).fill("API_KEY");
    await add.getByLabel("Environment").selectOption("staging");
    await add.getByRole("button", { name: "Add credential" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("Stored API_KEY (staging). Its value ends in 5b1e.");
    expect(await value.inputValue()).toBe("");

    await add.getByLabel("Name", { exact: true }).fill("OTHER_KEY");
    await value.fill(OTHER);
    await add.getByLabel("Environment").selectOption("production");
    await add.getByLabel("Allowed hosts").fill("a.example.test, b.example.test");
    // Inject as: a choice; a header needs its name.
    await add.getByLabel("Inject as").selectOption("header:");
    await add.getByLabel("Header, parameter or cookie name").fill("X-Api-Key");
    await add.getByRole("button", { name: "Add credential" }).click();
    await expect
      .poll(() => statusOf(page), SOON)
      .toBe("Stored OTHER_KEY (production). Its value ends in 99f0.");
    // The console shows one environment at a time (staging first): the production credential is
    // counted, and one click away.
    const rows = page.locator("#items tbody tr");
    await expect.poll(() => rows.count()).toBe(1);
    await expect
      .poll(() => page.locator("#items-elsewhere").textContent(), SOON)
      .toBe("1 more credential in production. Show production");
    await page.locator("#items-elsewhere").getByRole("button", { name: "Show production" }).click();
    expect(await page.locator("#env-switch").inputValue()).toBe("production");
    await expect.poll(() => rows.count()).toBe(1);
    const otherRow = rows.filter({ hasText: "OTHER_KEY" });
    // The switch redraws the table: wait for the production row, not the staging one it replaces.
    await expect.poll(() => otherRow.count(), SOON).toBe(1);
    expect(await otherRow.locator("td").allTextContents()).toEqual([
      "secret",
      "—",
      "a.example.test, b.example.test",
      "header:X-Api-Key",
      "…99f0",
      "Never",
      "RotateEditDelete",
    ]);

    // Edit its hosts, then delete it (a confirm step first; Cancel puts the buttons back).
    await page.getByRole("button", { name: "Edit OTHER_KEY (production)" }).click();
    const edit = page.locator("#edit-form");
    expect(await edit.getByLabel("Allowed hosts").inputValue()).toBe("a.example.test, b.example.test");
    // The stored mode reads back as the choice and its name.
    expect(await edit.getByLabel("Inject as").inputValue()).toBe("header:");
    expect(await edit.getByLabel("Header, parameter or cookie name").inputValue()).toBe("X-Api-Key");
    await edit.getByLabel("Allowed hosts").fill("c.example.test d.example.test");
    await edit.getByRole("button", { name: "Save changes" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("Saved OTHER_KEY (production).");
    await expect
      .poll(() => otherRow.locator("td").nth(2).textContent())
      .toBe("c.example.test, d.example.test");
    expect(await edit.isHidden()).toBe(true);
    await page.getByRole("button", { name: "Delete OTHER_KEY (production)" }).click();
    await page.getByRole("button", { name: "Cancel" }).click();
    await page.getByRole("button", { name: "Delete OTHER_KEY (production)" }).click();
    await shot(page, "01-vault-confirm-delete");
    await page.getByRole("button", { name: "Delete for good" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("Deleted OTHER_KEY (production).");
    await expect.poll(() => rows.count()).toBe(0);
    // The switch is remembered for the next visit; back to staging for the rest.
    await page.reload();
    expect(await page.locator("#env-switch").inputValue()).toBe("production");
    await page.locator("#env-switch").selectOption("staging");
    await expect.poll(() => rows.count()).toBe(1);
    expect(await add.getByLabel("Environment").inputValue()).toBe("staging");

    // The search finds credentials by name, host or folder.
    await add.getByLabel("Name", { exact: true }).fill("FOLDERED_KEY");
    await value.fill(OTHER);
    await add.getByLabel("Allowed hosts").fill("files.example.test");
    await add.getByLabel("Folder (optional)").fill("billing");
    await add.getByRole("button", { name: "Add credential" }).click();
    await expect.poll(() => rows.count(), SOON).toBe(2);
    const search = page.getByLabel("Search credentials");
    for (const [query, names] of [
      ["billing", ["FOLDERED_KEY"]],
      ["api.latch", ["API_KEY"]],
      ["key", ["API_KEY", "FOLDERED_KEY"]],
      ["nothing-like-it", []],
    ] as const) {
      await search.fill(query);
      await expect.poll(() => rows.locator("th").allTextContents()).toEqual([...names].sort());
    }
    expect(await page.locator("#items-empty-text").textContent()).toBe("No credential matches the search.");
    expect(await page.locator("#items-first-run").isHidden()).toBe(true);
    await search.fill("");
    await page.getByRole("button", { name: "Delete FOLDERED_KEY (staging)" }).click();
    await page.getByRole("button", { name: "Delete for good" }).click();
    await expect.poll(() => rows.count(), SOON).toBe(1);

    // Rotate API_KEY: the form asks for the new value; only the new last four show.
    await page.getByRole("button", { name: "Rotate API_KEY (staging)" }).click();
    const rotate = page.locator("#rotate-form");
    expect(await page.locator(":focus").getAttribute("id")).toBe("rotate-value");
    expect(await rotate.getByLabel("New value").getAttribute("type")).toBe("password");
    await rotate.getByLabel("New value").fill(ROTATED);
    await rotate.getByRole("button", { name: "Save new value" }).click();
    await expect
      .poll(() => statusOf(page), SOON)
      .toBe("Rotated API_KEY (staging). The new value ends in c0d7.");
    await expect.poll(() => rows.first().locator("td").nth(4).textContent()).toBe("…c0d7");
    const vaultHtml = await page.content();
    for (const secret of [SECRET, ROTATED, OTHER]) expect(vaultHtml).not.toContain(secret);
    await shot(page, "02-vault");

    // Issue a model client: the token once, with its MCP URL and how to send it.
    await openSection(page, "Clients");
    const clientForm = page.locator("#client-form");
    await clientForm.getByLabel("Name").fill("console agent");
    await clientForm.getByLabel("Kind").selectOption("model");
    await clientForm.getByLabel("Environment").selectOption("staging");
    await clientForm.getByRole("button", { name: "Issue client" }).click();
    const tokenText = page.locator("#token-value");
    await expect.poll(() => tokenText.textContent(), SOON).toMatch(/^avm_/);
    const token = (await tokenText.textContent())!;
    const mcpUrl = (await page.locator("#mcp-url").textContent())!;
    expect(mcpUrl).toBe(`${base}/mcp`);
    expect(await page.locator("#mcp-header").textContent()).toBe(`Authorization: Bearer ${token}`);
    expect(await page.locator("#token-mcp").textContent()).toContain("Configure your MCP client");
    expect(await page.locator(":focus").getAttribute("id")).toBe("token-heading");
    expect(await page.locator("#mcp-command").textContent()).toBe(
      `claude mcp add --transport http latch ${base}/mcp --header "Authorization: Bearer ${token}"`,
    );
    await page.getByRole("button", { name: "Copy URL" }).click();
    await expect.poll(() => statusOf(page)).toBe("Copied MCP URL.");
    expect(await page.evaluate("navigator.clipboard.readText()")).toBe(mcpUrl);
    await page.getByRole("button", { name: "Copy command" }).click();
    await expect.poll(() => statusOf(page)).toBe("Copied command.");
    expect(await page.evaluate("navigator.clipboard.readText()")).toContain("claude mcp add");
    await page.getByRole("button", { name: "Copy token" }).click();
    await expect.poll(() => statusOf(page)).toMatch(/^Token copied|^The token is selected/);
    if ((await statusOf(page))!.startsWith("Token copied")) {
      expect(await page.evaluate("navigator.clipboard.readText()")).toBe(token);
    }
    const clientId = (await page.locator("#issued tbody tr td.mono").first().textContent())!;
    expect(clientId).toMatch(/^cli_/);
    await shot(page, "03-client-token");
    await page.getByRole("button", { name: "I have stored it: hide the token" }).click();
    expect(await page.locator("#token-panel").isHidden()).toBe(true);
    expect(await page.content()).not.toContain(token);

    // The agent calls through the official MCP SDK client with that token: pending, with a code.
    const agent = await connectAgent(mcpUrl.replace(/\/mcp$/, ""), token, "console-agent");
    const call = () =>
      agent
        .callTool({
          name: "http_request",
          arguments: { method: "GET", path: "/v1/data", item_name: "API_KEY" },
        })
        .then(toolAnswer);

    await openSection(page, "Inbox");
    await expect.poll(() => page.locator("#pending-approvals-empty").isVisible(), SOON).toBe(true);
    const pending = await call();
    expect(pending).toMatchObject({ status: "pending", item_name: "API_KEY" });
    expect(pending.approval_code).toMatch(/^\d{8}$/);

    // The inbox picks it up on its own (5-second refresh), naming the client issued in this tab.
    const approvals = page.locator("#pending-approvals > tbody > tr");
    await expect.poll(() => approvals.count(), SOON).toBe(1);
    expect(await approvals.first().locator("th").textContent()).toBe("API_KEY");
    // By the name it was issued with, never a bare cli_ id (the id is only the cell's tooltip).
    expect(await approvals.first().locator("td").nth(1).textContent()).toBe("console agent");
    expect(await approvals.first().locator("td").nth(1).getAttribute("title")).toBe(clientId);
    expect(await approvals.first().locator("td.actions-cell button").allTextContents()).toEqual([
      "Approve once",
      "8 hours",
      "Always allow",
      "Deny",
    ]);
    expect(await page.locator("#inbox-count").textContent()).toBe("(1)");
    // The row shows the exact request the approval is for (DECISIONS "Approvals").
    const requestCell = approvals.first().locator("td.request-cell");
    expect(await requestCell.locator(".request-line").textContent()).toBe("GET api.latch.test/v1/data");
    expect(await requestCell.locator(".digest").textContent()).toBe("No body");
    await shot(page, "04-inbox");

    // Approve by code: a wrong code is refused in the status region; the right one shows its
    // request with the row's choices, and approves once one is clicked.
    const codeField = page.getByLabel("8-digit approval code");
    const approvalCode = pending.approval_code!;
    await codeField.fill(approvalCode === "00000000" ? "11111111" : "00000000");
    await page.locator("#code-form").getByRole("button", { name: "Show the request" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("That approval code matches no pending approval.");
    expect(await codeField.getAttribute("aria-invalid")).toBe("true");
    await codeField.fill(approvalCode);
    await codeField.press("Enter");
    const byCode = page.locator("#code-request");
    await byCode.waitFor({ state: "visible", timeout: SOON.timeout });
    expect(await byCode.locator(".request-line").textContent()).toBe("GET api.latch.test/v1/data");
    await byCode.getByRole("button", { name: "Approve once: API_KEY for console agent" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("Approved API_KEY for console agent for one call.");
    await expect.poll(() => approvals.count()).toBe(0);
    await shot(page, "05-approved-by-code");

    const answer = await call();
    expect(answer.origin_status).toBe(200);
    expect(answer.body).toContain("Bearer [redacted]");
    expect(JSON.stringify(answer)).not.toContain(ROTATED);

    // The one-call approval is spent: the next call waits again. Denied, it never runs.
    expect((await call()).status).toBe("pending");
    await expect.poll(() => approvals.count(), SOON).toBe(1);
    await page.getByRole("button", { name: "Deny: API_KEY for console agent" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("Denied the request for API_KEY for console agent.");
    await expect.poll(() => approvals.count()).toBe(0);
    // "8 hours" covers the calls that follow.
    expect((await call()).status).toBe("pending");
    await expect.poll(() => approvals.count(), SOON).toBe(1);
    await page.getByRole("button", { name: "Approve for 8 hours: API_KEY for console agent" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("Approved API_KEY for console agent for 8 hours.");
    expect((await call()).origin_status).toBe(200);
    expect((await call()).origin_status).toBe(200);

    // A call with a body: 8 hours of GET do not cover a POST; the row shows method, host, path
    // with its query and the body's SHA-256, which is what one approval will send.
    const body = { title: "Ship it", labels: ["release"] };
    const posted = toolAnswer(
      await agent.callTool({
        name: "http_request",
        arguments: {
          method: "POST",
          path: "/v1/issues?draft=false",
          item_name: "API_KEY",
          body,
          task_description: "File the release issue for v2.4",
        },
      }),
    );
    expect(posted.status).toBe("pending");
    await expect.poll(() => approvals.count(), SOON).toBe(1);
    const postCell = approvals.first().locator("td.request-cell");
    expect(await postCell.locator(".request-line").textContent()).toBe(
      "POST api.latch.test/v1/issues?draft=false",
    );
    const digest = createHash("sha256").update(JSON.stringify(body)).digest("hex");
    expect(await postCell.locator(".digest").textContent()).toBe(`Body SHA-256 ${digest}`);
    expect(await postCell.textContent()).toContain("Once: exactly this request.");
    await approvals.first().screenshot({ path: `${SHOTS}console-04b-inbox-row-with-body.png` });
    // The README's picture: the inbox as an operator first sees it (the viewport, not the page).
    expect(await approvals.first().locator("td").nth(3).textContent()).toBe(
      "File the release issue for v2.4",
    );
    await page.evaluate("window.scrollTo(0, 0)");
    await page.screenshot({ path: `${SHOTS}readme-console-inbox.png` });
    await page.getByRole("button", { name: "Approve once: API_KEY for console agent" }).click();
    await expect.poll(() => approvals.count(), SOON).toBe(0);
    const sent = toolAnswer(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "POST", path: "/v1/issues?draft=false", item_name: "API_KEY", body },
      }),
    );
    expect(sent.origin_status).toBe(200);
    await agent.close();

    // The audit shows the calls, filtered by credential and by client.
    await openSection(page, "Audit");
    const events = page.locator("#events tbody tr");
    await expect.poll(() => events.count(), SOON).toBeGreaterThan(0);
    // The tamper-evident ledger's state, checked by the server when the section opens.
    await expect
      .poll(() => page.locator("#audit-chain").textContent(), SOON)
      .toMatch(/^Chain verified up to #\d+\./);
    const audit = page.locator("#audit-form");
    await audit.getByLabel("Credential name").fill("API_KEY");
    await audit.getByLabel("Agent or client").selectOption(clientId);
    await audit.getByRole("button", { name: "Show events" }).click();
    await expect.poll(() => statusOf(page), SOON).toMatch(/^\d+ events\.$/);
    const calls = events.filter({ hasText: "http request" });
    expect(await calls.count()).toBeGreaterThanOrEqual(3);
    const cells = await calls.first().locator("td").allTextContents();
    expect(cells.slice(1, 5)).toEqual(["staging", "console agent", "http request", "API_KEY"]);
    for (const actor of await events.locator("td:nth-child(3)").allTextContents()) {
      expect(actor).toBe("console agent");
    }
    // No internal ids or hashes in what a person reads.
    const auditText = (await page.locator("#events").textContent())!;
    expect(auditText).not.toMatch(/grt_|jti|_hash|cli_/);
    await audit.getByLabel("Action").selectOption("grant_requested");
    await audit.getByRole("button", { name: "Show events" }).click();
    await expect
      .poll(async () => [...new Set(await events.locator("td:nth-child(4)").allTextContents())], SOON)
      .toEqual(["grant requested"]);
    await shot(page, "06-audit");

    // The filtered view exports as CSV and as JSON Lines, with the same names and no ids.
    const [csv] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Export CSV" }).click(),
    ]);
    expect(csv.suggestedFilename()).toMatch(/^latch-audit-staging-\d{4}-\d{2}-\d{2}\.csv$/);
    const csvText = readFileSync((await csv.path())!, "utf8");
    const csvLines = csvText.trimEnd().split("\r\n");
    expect(csvLines[0]).toBe("at,environment,who,actor,action,credential,host,reason,detail");
    expect(csvLines.length).toBe((await events.count()) + 1);
    expect(csvLines[1]).toContain(",console agent,");
    const [jsonl] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Export JSON Lines" }).click(),
    ]);
    const exported = readFileSync((await jsonl.path())!, "utf8")
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(exported.length).toBe(await events.count());
    expect(exported[0]).toMatchObject({
      who: "console agent",
      action: "grant_requested",
      credential: "API_KEY",
    });
    expect(JSON.stringify(exported)).not.toMatch(/grant_id|_hash|jti/);
    await audit.getByLabel("Action").selectOption("");
    await audit.getByRole("button", { name: "Clear filters" }).click();
    await expect.poll(() => statusOf(page), SOON).toMatch(/^Filters cleared: \d+ events\.$/);
    expect(await events.filter({ hasText: "item rotated" }).count()).toBe(1);

    const finalHtml = await page.content();
    for (const secret of [SECRET, ROTATED, OTHER, token]) expect(finalHtml).not.toContain(secret);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 180_000);

  it("issues, rotates and revokes a trusted client, and manages sessions", async () => {
    const { page, problems } = await openPage();
    const { email, totp } = await signUp(page);

    // A trusted client: its token is for /runtime/resolve, not MCP.
    await page.goto(`${base}/console#clients`);
    await page.getByRole("heading", { level: 2, name: "Clients" }).waitFor({ state: "visible" });
    expect(await page.locator("#vault").isHidden()).toBe(true);
    const clientForm = page.locator("#client-form");
    await clientForm.getByLabel("Name").fill("runtime");
    await clientForm.getByLabel("Kind").selectOption("trusted");
    await clientForm.getByRole("button", { name: "Issue client" }).click();
    const tokenText = page.locator("#token-value");
    await expect.poll(() => tokenText.textContent(), SOON).toMatch(/^avt_/);
    const first = (await tokenText.textContent())!;
    expect(await page.locator("#token-mcp").isHidden()).toBe(true);
    expect(await page.locator("#token-trusted").isVisible()).toBe(true);

    const resolve = (bearer: string) =>
      fetch(`${base}/runtime/resolve`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${bearer}` },
        body: JSON.stringify({ item_name: "NOPE" }),
      }).then((r) => r.status);
    expect(await resolve(first)).toBe(404);

    // Rotate (a confirm step): a new token once; the old one stops.
    await page.getByRole("button", { name: "Rotate runtime" }).click();
    await page.getByRole("button", { name: "Rotate now" }).click();
    await expect.poll(() => tokenText.textContent(), SOON).not.toBe(first);
    const second = (await tokenText.textContent())!;
    expect(second).toMatch(/^avt_/);
    expect(await resolve(first)).toBe(401);
    expect(await resolve(second)).toBe(404);

    // Revoke: the row says so and the token stops.
    await page.getByRole("button", { name: "Revoke runtime" }).click();
    await shot(page, "07-client-revoke-confirm");
    await page.getByRole("button", { name: "Revoke for good" }).click();
    await expect
      .poll(() => statusOf(page), SOON)
      .toBe("Revoked runtime. Its token and approvals no longer work.");
    expect(await page.locator("#issued tbody tr td").last().textContent()).toBe("Revoked");
    expect(await page.locator("#token-panel").isHidden()).toBe(true);
    expect(await resolve(second)).toBe(401);

    // Two more sessions of the same operator, signed in over the API, one from an iPhone.
    const IPHONE =
      "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
    const others: ApiBrowser[] = [];
    for (let i = 0; i < 2; i++) {
      const other = new ApiBrowser(h.app, base);
      await other.request("POST", "/api/auth/otp/send", { email });
      await other.request(
        "POST",
        "/api/auth/otp/verify",
        { email, otp: lastCodeFor(h.inbox, email) },
        i === 0 ? { "user-agent": IPHONE } : {},
      );
      h.clock.advance(31_000);
      const verified = await other.request("POST", "/api/auth/totp/verify", {
        code: totp.generate({ timestamp: h.clock.now.getTime() }),
      });
      expect(verified.statusCode, verified.body).toBe(200);
      others.push(other);
    }
    const meOf = async (b: ApiBrowser) => (await b.request("GET", "/api/auth/me")).statusCode;

    await openSection(page, "Access");
    const sessions = page.locator("#sessions tbody tr");
    await expect.poll(() => sessions.count(), SOON).toBe(3);
    expect(await sessions.filter({ hasText: "This session" }).count()).toBe(1);
    expect(await page.locator("#operators tbody tr th").allTextContents()).toEqual([email]);
    // Devices as a person names them, from the user agent each session signed in with (the API
    // session without one is named by the test client's own agent string).
    const devices = await sessions.locator("td:nth-child(2)").allTextContents();
    expect(devices).toEqual(expect.arrayContaining(["Safari 17 on iOS", "lightMyRequest"]));
    expect(
      devices.some((d) => /^Chrome \d+ on Linux$/.test(d)),
      devices.join(", "),
    ).toBe(true);
    await shot(page, "08-access");

    // Revoke one session by its button (never offered on the current one).
    expect(await sessions.filter({ hasText: "This session" }).getByRole("button").count()).toBe(0);
    await page
      .getByRole("button", { name: `Revoke the session of ${email}` })
      .first()
      .click();
    await expect.poll(() => statusOf(page), SOON).toBe(`Signed out that session of ${email}.`);
    await expect.poll(() => sessions.count()).toBe(2);
    expect((await Promise.all(others.map(meOf))).sort()).toEqual([200, 401]);

    // Sign out all the others.
    await page.getByRole("button", { name: "Sign out all your other sessions" }).click();
    await page.getByRole("button", { name: "Sign them out" }).click();
    await expect.poll(() => statusOf(page), SOON).toBe("Signed out 1 other session.");
    await expect.poll(() => sessions.count()).toBe(1);
    expect(await page.getByRole("button", { name: "Sign out all your other sessions" }).isDisabled()).toBe(
      true,
    );
    expect(await Promise.all(others.map(meOf))).toEqual([401, 401]);
    await shot(page, "09-access-after");

    // New backup codes, confirmed with the authenticator: shown once, copied, then hidden.
    h.clock.advance(31_000);
    await page
      .getByLabel("6-digit code from your authenticator app")
      .fill(totp.generate({ timestamp: h.clock.now.getTime() }));
    await page.getByRole("button", { name: "Make new backup codes" }).click();
    const newCodes = page.locator("#new-backup-codes li");
    await expect.poll(() => newCodes.count(), SOON).toBe(10);
    expect(await page.locator(":focus").getAttribute("id")).toBe("new-codes-heading");
    const fresh = await newCodes.allTextContents();
    await page.locator("#new-codes").getByRole("button", { name: "Copy codes" }).click();
    await expect.poll(() => statusOf(page)).toBe("Copied backup codes.");
    const copiedCodes = (await page.evaluate("navigator.clipboard.readText()")) as string;
    for (const code of fresh) expect(copiedCodes).toContain(code);
    await shot(page, "09b-new-backup-codes");
    await page.getByRole("button", { name: "I have saved them: hide the codes" }).click();
    expect(await page.locator("#new-codes").isHidden()).toBe(true);
    expect(await page.content()).not.toContain(fresh[0]!);

    // A second organisation: created from Access, the session moves into it; the switcher in
    // the top bar moves it back.
    const firstOrg = (await page.locator("#organisation").textContent())!;
    await page.locator("#org-form").getByLabel("Name").fill("Second org");
    await page.getByRole("button", { name: "Create and switch to it" }).click();
    await expect
      .poll(() => page.locator("#org-switch option:checked").textContent(), SOON)
      .toBe("Second org");
    expect(await page.locator("#org-switch option").allTextContents()).toEqual(
      expect.arrayContaining([firstOrg, "Second org"]),
    );
    expect(await page.locator("#organisation").textContent()).toBe("Second org");
    await page.locator("#org-switch").selectOption({ label: firstOrg });
    await expect.poll(() => page.locator("#organisation").textContent(), SOON).toBe(firstOrg);

    // Thirty credentials: pages of 25 with Previous and Next.
    await page.goto(`${base}/console#vault`);
    await page.evaluate(() =>
      Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          // The console's own api() (common.js): the session cookie and the CSRF header.
          (globalThis as unknown as { api: (m: string, p: string, b: unknown) => Promise<unknown> }).api(
            "POST",
            "/api/items",
            {
              name: `BULK_${String(i).padStart(2, "0")}`,
              value: `bulk-value-${i}-xyz`,
              environment: "staging",
              allowed_hosts: ["bulk.example.test"],
            },
          ),
        ),
      ),
    );
    await page.reload();
    const itemRows = page.locator("#items tbody tr");
    await expect.poll(() => itemRows.count(), SOON).toBe(25);
    const pager = page.getByRole("navigation", { name: "Pages of credentials" });
    expect(await pager.locator(".where").textContent()).toBe("Page 1 of 2 (30 in all)");
    expect(await pager.getByRole("button", { name: "Previous page of credentials" }).isDisabled()).toBe(true);
    await pager.getByRole("button", { name: "Next page of credentials" }).click();
    await expect.poll(() => itemRows.count()).toBe(5);
    expect(await itemRows.locator("th").last().textContent()).toBe("BULK_29");
    await shot(page, "10-vault-page-2");

    expect(await page.content()).not.toContain(second);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 180_000);

  it("never lets the browser submit a form itself: a value typed while a script failed to load stays out of the URL", async () => {
    const { page } = await openPage();
    await signUp(page);
    // The vault's script fails to load (a rolling deploy asks a replica that does not have it).
    await page.route(/\/assets\/console-vault[^/]*\.js/, (route) => route.abort());
    await page.goto("about:blank");
    await page.goto(`${base}/console#vault`);
    const before = page.url();
    const requests: string[] = [];
    page.on("request", (request) => requests.push(request.url()));
    // What pressing Enter in the form does when no script handles it (the page's own script code
    // is not the test's: a string, as the other browser tests evaluate).
    await page.evaluate(`(() => {
      const form = document.querySelector("#add-form");
      form.querySelector('[name="value"]').value = "sk_live_typed_before_script_0001";
      form.querySelector('[name="name"]').value = "TYPED_KEY";
      form.requestSubmit();
    })()`);
    await page.waitForTimeout(500);
    expect(page.url()).toBe(before);
    expect(requests.filter((url) => url.includes("sk_live_typed"))).toEqual([]);
    await page.context().close();
  }, 120_000);
});
