// Single sign-on in a real Chromium: an owner connects the organisation's identity provider under
// Members, and a colleague signs in with "Sign in with SSO" (the address finds the organisation,
// the browser goes through the provider, a real oidc-provider on a loopback TLS origin, and lands
// in the console as an auditor). Chromium reaches the provider by host resolver rules; the plane
// only through the egress proxy. axe over each new page and state; screenshots of each step.
import type { Page } from "playwright-core";
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
import { DOH_URL, startTestDoh, type TestDoh } from "../../test/doh-server.ts";
import type { HostedHarness } from "../../test/hosted.ts";
import { IDP_HOST, IDP_ISSUER, startTestIdp, type TestIdp } from "../../test/oidc-idp.ts";
import { RECHECK_EVERY_MS } from "../sso/domain-recheck.ts";

describe.skipIf(skipBrowserTests)("single sign-on in Chromium", () => {
  let rig: BrowserRig | undefined;
  let idp: TestIdp | undefined;
  let doh: TestDoh | undefined;
  let h: HostedHarness;
  let base: string;

  beforeAll(async () => {
    rig = await startBrowserRig({
      hostname: "localhost",
      prepare: async (planeBase) => {
        idp = await startTestIdp({ redirectUri: `${planeBase}/sso/callback` });
        doh = await startTestDoh();
        return {
          connectTo: [idp.connectTo, doh.connectTo],
          ssoDnsUrl: DOH_URL,
          chromiumArgs: [`--host-resolver-rules=MAP ${IDP_HOST} 127.0.0.1:${idp.port}`],
        };
      },
    });
    ({ h, base } = rig);
  }, 120_000);

  afterAll(async () => {
    await rig?.close();
    await idp?.close();
    await doh?.close();
  });

  /** A page that fails the test on a script error or anything the CSP refused. */
  // The provider's certificate is the test PKI's, which Chromium does not know.
  const openPage = () => openWatchedPage(rig!.browser, { ignoreHTTPSErrors: true });
  const shot = (page: Page, name: string) => saveScreenshot(page, `${name}.png`);
  const status = (page: Page) => page.locator("#status").textContent();
  /** A domain of this run's own: the database may hold other runs' connections. */
  const domain = `corp-${Math.random().toString(16).slice(2, 8)}.latch.test`;

  it("an owner connects the provider; a colleague signs in with SSO and lands in the console as an auditor", async () => {
    const { page: ownerPage, problems } = await openPage();
    await signUpInChromium(ownerPage, h, base, { label: "sso-owner" });
    await ownerPage.goto(`${base}/console#members`);
    const card = ownerPage.locator("#sso");
    await expect
      .poll(() => card.locator("#sso-state").textContent())
      .toContain("No identity provider is connected");
    await card.getByLabel("Issuer").fill(IDP_ISSUER);
    await card.getByLabel("Client ID").fill(idp!.clientId);
    await card.getByLabel("Client secret").fill(idp!.clientSecret);
    await card.getByLabel("Email domains").fill(domain);
    await card.getByLabel("Require single sign-on for these domains").check();
    await card.getByRole("button", { name: "Save single sign-on" }).click();
    await expect
      .poll(() => status(ownerPage))
      .toBe(
        `Saved. Publish the DNS record of ${domain} below, then check: until then a new address of it cannot join.`,
      );
    await expect
      .poll(() => card.locator("#sso-state").textContent())
      .toContain(`Signs in ${domain} addresses through https://idp.latch.test`);
    // Required of nobody while no domain is proven: the sentence claims no more than is enforced.
    expect(await card.locator("#sso-state").textContent()).toContain(
      "Required of no address yet: no domain is proven.",
    );
    const slug = (await ownerPage.locator("#sso-sign-in-url").textContent())!.split("/sso/")[1]!;
    expect(await card.locator("#sso-redirect-uri").textContent()).toBe(`${base}/sso/callback`);
    // The domain counts once proven: its TXT record, as the table shows it, published; then checked.
    const domainRow = card.getByRole("row", { name: new RegExp(domain.replace(/\./g, "\\.")) });
    expect(await domainRow.textContent()).toContain("Not proven yet");
    const recordName = await domainRow.locator("code").nth(0).textContent();
    const recordValue = await domainRow.locator("code").nth(1).textContent();
    expect(recordName).toBe(`_latch-verification.${domain}`);
    doh!.publish(recordName!, recordValue!);
    await card.getByRole("button", { name: "Check DNS records" }).click();
    await expect.poll(() => status(ownerPage)).toBe(`Proven: ${domain}.`);
    await expect.poll(() => domainRow.textContent()).toContain("Proven");
    await expect
      .poll(() => card.locator("#sso-state").textContent())
      .toContain(`Required of ${domain} addresses.`);
    await shot(ownerPage, "sso-connection");
    expect(await seriousViolations(ownerPage)).toEqual([]);

    // A colleague: the sign-in page, their work address, Sign in with SSO.
    const { page, problems: colleagueProblems } = await openPage();
    const email = `colleague-${Date.now()}@${domain}`;
    idp!.signInAs({ sub: "colleague-1", email, email_verified: true });
    await page.goto(`${base}/sign-in`);
    await page.getByLabel("Email address").fill(email);
    await shot(page, "sso-sign-in");
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole("button", { name: "Sign in with SSO" }).click();
    await page.waitForURL(`${base}/console`);
    await expect.poll(() => page.locator("#header-email").textContent()).toBe(email);
    const me = await page.evaluate(
      "fetch('/api/auth/me', { headers: { accept: 'application/json' } }).then((r) => r.json())",
    );
    expect(me).toMatchObject({ signed_in_with_sso: true, organisation: { slug, role: "auditor" } });
    await shot(page, "sso-console");
    // The provider was asked for the token by the proxy, never by the browser.
    const token = idp!.requests.filter((r) => r.method === "POST" && r.path === "/token");
    expect(token.length).toBeGreaterThan(0);
    expect(token.every((r) => !/Chrome/.test(String(r.headers["user-agent"])))).toBe(true);

    // A sign-in that does not finish says why, in words (here: a state used twice).
    await page.goBack();
    const refused = await page.goto(`${base}/sso/callback?code=x&state=used`);
    expect(refused?.status()).toBe(401);
    await expect.poll(() => page.locator("h1").textContent()).toBe("Single sign-on did not finish");
    expect(await seriousViolations(page)).toEqual([]);

    // The record withdrawn, the next day's check misses it: the owner's table says so.
    doh!.withdraw(recordName!);
    const owner = (await ownerPage.evaluate(
      "fetch('/api/auth/me', { headers: { accept: 'application/json' } }).then((r) => r.json())",
    )) as { organisation: { id: string } };
    h.clock.advance(RECHECK_EVERY_MS + 60_000);
    await h.plane.services.sso.domainRecheck.recheckDue({ only: [owner.organisation.id] });
    await ownerPage.reload();
    await expect
      .poll(() => domainRow.textContent())
      .toContain("Proven, but its record was missing on the last daily check: publish it again");
    await shot(ownerPage, "sso-domain-missing");
    expect(await seriousViolations(ownerPage)).toEqual([]);
    expect([...problems, ...colleagueProblems]).toEqual([]);
  }, 120_000);
});
