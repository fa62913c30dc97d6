// The collect page in a real headless Chromium (issue 21 item 6; spec 4.2 need_item): an agent that
// names a credential by item_name alone gets a collect link too, and the page then asks the operator
// for the API host as well as the value; a request that named its host does not ask. Needs Debian's
// chromium: skipped without it, except on CI.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type BrowserRig,
  openWatchedPage,
  saveScreenshot,
  skipBrowserTests,
  startBrowserRig,
} from "../../test/chromium.ts";
import { connectAgent, operatorWithClient, toolAnswer } from "../../test/hosted.ts";

const SECRET = "sk_live_collect_by_name_5d2e";

describe.skipIf(skipBrowserTests)("the collect page in Chromium", () => {
  let rig: BrowserRig | undefined;

  beforeAll(async () => {
    rig = await startBrowserRig();
    rig.h.egress.setHandler((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ path: req.url, authorization: req.headers.authorization }));
    });
  }, 120_000);

  afterAll(async () => {
    await rig?.close();
  });

  /** An operator with an agent whose http_request names `itemName`, which nothing stores yet. */
  async function agentAsking(clientName: string, itemName: string) {
    const { h, base } = rig!;
    const { op, token, totp } = await operatorWithClient(h, {
      secret: SECRET,
      items: [],
      clientName,
      origin: base,
    });
    const agent = await connectAgent(base, token, clientName.replace(/ /g, "-"));
    const call = { method: "GET", path: "/v1/me", item_name: itemName };
    const miss = toolAnswer(await agent.callTool({ name: "http_request", arguments: call }));
    return { op, totp, agent, call, miss };
  }

  it("asks for the host when the agent named only the credential, stores it, and the agent's retry goes out", async () => {
    const { base, browser } = rig!;
    const { op, agent, call, miss } = await agentAsking("by-name agent", "BY_NAME_KEY");
    expect(miss).toMatchObject({ status: "need_item", suggested_name: "BY_NAME_KEY" });
    const byHost = toolAnswer(
      await agent.callTool({ name: "find_items", arguments: { host: "hosted.latch.test" } }),
    );

    const { context, page, problems } = await openWatchedPage(browser, {
      viewport: { width: 900, height: 900 },
      session: { cookies: op.cookies, url: base },
    });

    // A request that named its host: no host field.
    await page.goto(String(byHost.collect_url));
    await page.locator("#collect").waitFor({ state: "visible" });
    expect(await page.getByLabel("Host it may be sent to").isVisible()).toBe(false);
    expect(await page.locator("#summary").textContent()).toContain("hosted.latch.test");

    // The request by name alone: the host is asked for, and required.
    await page.goto(String(miss.collect_url));
    await page.locator("#collect").waitFor({ state: "visible" });
    expect(await page.locator("#summary").textContent()).toContain("named no API host");
    const host = page.getByLabel("Host it may be sent to");
    expect(await host.isVisible()).toBe(true);
    expect(await page.getByLabel("Name", { exact: true }).inputValue()).toBe("BY_NAME_KEY");
    await page.getByLabel("Value").fill(SECRET);
    await page.getByRole("button", { name: "Store it" }).click();
    // Not sent without the host (the field is required).
    expect(
      await host.evaluate((field: { validity: { valueMissing: boolean } }) => field.validity.valueMissing),
    ).toBe(true);
    await host.fill("api.latch.test");
    await saveScreenshot(page, `collect-by-name.png`);
    await page.getByRole("button", { name: "Store it" }).click();
    await expect
      .poll(() => page.locator("#status").textContent())
      .toBe("Stored. The agent can retry its request now.");
    expect(problems).toEqual([]);

    const items = (await op.request("GET", "/api/items")).json().items as {
      name: string;
      allowed_hosts: string[];
    }[];
    expect(items.find((i) => i.name === "BY_NAME_KEY")?.allowed_hosts).toEqual(["api.latch.test"]);
    const sent = toolAnswer(await agent.callTool({ name: "http_request", arguments: call }));
    expect(sent.origin_status, JSON.stringify(sent)).toBe(200);
    expect(String(sent.body)).toContain("[redacted]");
    expect(await page.content()).not.toContain(SECRET);
    await agent.close();
    await context.close();
  }, 120_000);

  it("a Deny after a value was typed leaves the value nowhere in the page", async () => {
    const { base, browser } = rig!;
    const { op, agent, miss } = await agentAsking("deny agent", "DENY_KEY");
    const { context, page, problems } = await openWatchedPage(browser, {
      viewport: { width: 900, height: 900 },
      session: { cookies: op.cookies, url: base },
    });
    await page.goto(String(miss.collect_url));
    await page.locator("#collect").waitFor({ state: "visible" });
    await page.getByLabel("Value").fill(SECRET);
    await page.getByRole("button", { name: "Deny" }).click();
    await expect
      .poll(() => page.locator("#status").textContent())
      .toBe("Denied. The agent is told nothing was stored.");
    expect(await page.locator("#value").inputValue()).toBe("");
    expect(problems).toEqual([]);
    await agent.close();
    await context.close();
  }, 120_000);

  it("asks for the authenticator code in place when an Always allow comes more than 5 minutes after the sign-in", async () => {
    const { h, base, browser } = rig!;
    const { op, totp, agent, miss } = await agentAsking("step-up agent", "ALWAYS_KEY");
    const { context, page, problems } = await openWatchedPage(browser, {
      viewport: { width: 900, height: 900 },
      session: { cookies: op.cookies, url: base },
    });
    await page.goto(String(miss.collect_url));
    await page.locator("#collect").waitFor({ state: "visible" });
    await page.getByLabel("Value").fill(SECRET);
    await page.getByLabel("Host it may be sent to").fill("api.latch.test");
    await page.getByLabel(/^Always: the whole credential/).check();

    // Six minutes later by the plane's clock: the sign-in's code no longer counts.
    h.clock.advance(6 * 60_000);
    await page.getByRole("button", { name: "Store it" }).click();
    const dialog = page.getByRole("dialog", { name: "Confirm it is you" });
    await dialog.waitFor();
    expect(await dialog.locator("#step-up-why").textContent()).toMatch(/verification of the last 5 minutes/);
    await dialog
      .getByLabel(/Code from your authenticator app/)
      .fill(totp.generate({ timestamp: h.clock.now.getTime() }));
    await dialog.getByRole("button", { name: "Confirm" }).click();
    // The store is sent again by itself once the code is accepted.
    await expect
      .poll(() => page.locator("#status").textContent())
      .toBe("Stored, and always allowed as you chose. The agent can retry its request now.");
    await expect.poll(() => dialog.isVisible()).toBe(false);
    const grants = (await op.request("GET", "/api/grants")).json().grants as {
      policy: string;
      status: string;
    }[];
    expect(grants.some((g) => g.policy === "item_standing" && g.status === "active")).toBe(true);
    expect(problems).toEqual([]);
    await agent.close();
    await context.close();
  }, 120_000);
});
