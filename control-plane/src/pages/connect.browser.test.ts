// Provider connect from the console in a real headless Chromium (spec 3.2, 4.3): an agent's
// user-only call answers user_connect_required and opens a connect request; the operator clicks
// the Inbox's connect card, the browser goes to the provider's authorize URL (the fake provider
// answers it inside the browser, as the real page would after the user approves), comes back to
// /connect/callback and lands on the console's vault with the connected message; the agent's
// retry then works. Spotify, GitHub, Google and Slack; Stripe has no user-only path (its platform
// key serves every call), so no agent asks for it: the Vault's Connect action on its app credential
// starts it. Needs Debian's chromium: skipped without it, except on CI.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type BrowserRig,
  openWatchedPage,
  saveScreenshot,
  skipBrowserTests,
  startBrowserRig,
} from "../../test/chromium.ts";
import { FAKE_PROVIDER_HOSTS, FakeProviders } from "../../test/fake-providers.ts";
import { type Browser as ApiBrowser, connectAgent, signUpOperator, toolAnswer } from "../../test/hosted.ts";

describe.skipIf(skipBrowserTests)("provider connect from the console in Chromium", () => {
  let rig: BrowserRig | undefined;
  const fakes = new FakeProviders();

  beforeAll(async () => {
    rig = await startBrowserRig({ providerHosts: [...FAKE_PROVIDER_HOSTS] });
    rig.h.egress.setHandler(fakes.handler);
  }, 120_000);

  afterAll(async () => {
    await rig?.close();
  });

  /** An operator signed up through the JSON API, as the console would. */
  async function signedUpOperator(): Promise<ApiBrowser> {
    const { h, base } = rig!;
    return (await signUpOperator(h, { label: "connect", origin: base })).browser;
  }

  const PROVIDERS = [
    {
      id: "spotify",
      hosts: ["api.spotify.com", "accounts.spotify.com"],
      path: "/v1/me",
      authorize: "https://accounts.spotify.com/authorize**",
    },
    {
      id: "github",
      hosts: ["api.github.com", "github.com"],
      path: "/user",
      authorize: "https://github.com/login/oauth/authorize**",
    },
    {
      id: "google",
      hosts: ["www.googleapis.com", "oauth2.googleapis.com"],
      path: "/oauth2/v3/userinfo",
      authorize: "https://accounts.google.com/o/oauth2/v2/auth**",
    },
    {
      id: "slack",
      hosts: ["slack.com"],
      path: "/api/users.profile.get",
      authorize: "https://slack.com/oauth/v2/authorize**",
    },
  ] as const;

  it("for each provider, the connect card opens the provider, the callback stores the account, and the agent's retry works", async () => {
    const { base, browser } = rig!;
    const op = await signedUpOperator();
    const issued = (
      await op.request("POST", "/api/clients/model", { name: "dj", environment: "staging" })
    ).json();
    const agent = await connectAgent(base, issued.token as string, "dj");

    const { context, page, problems } = await openWatchedPage(browser, {
      viewport: { width: 1280, height: 900 },
      session: { cookies: op.cookies, url: base },
    });

    for (const provider of PROVIDERS) {
      const item = provider.id.toUpperCase();
      const stored = await op.request("POST", "/api/items", {
        name: item,
        value: fakes.clients[provider.id].clientSecret,
        username: fakes.clients[provider.id].clientId,
        kind: "client_secret",
        inject: "client_credentials",
        environment: "staging",
        allowed_hosts: provider.hosts,
      });
      expect(stored.statusCode, stored.body).toBe(201);
      const args = { method: "GET", host: provider.hosts[0], path: provider.path, item_name: item };
      const first = toolAnswer(await agent.callTool({ name: "http_request", arguments: args }));
      expect(first.status, JSON.stringify(first)).toBe("user_connect_required");

      // The provider's authorize page, as the user approving on it: back to the redirect URI.
      await page.route(provider.authorize, async (route) => {
        const { code, state, redirectUri } = fakes.authorize(provider.id, route.request().url());
        await route.fulfill({
          status: 302,
          headers: { location: `${redirectUri}?${new URLSearchParams({ code, state })}` },
        });
      });
      await page.goto(`${base}/console#inbox`);
      const connect = page.getByRole("button", { name: `Connect the ${provider.id} account for ${item}` });
      await connect.waitFor({ state: "visible", timeout: 15_000 });
      if (provider.id === "spotify") await saveScreenshot(page, `connect-card.png`);
      await connect.click();
      await page.waitForURL(`${base}/console#vault?connected=${provider.id}`, { timeout: 15_000 });
      await expect
        .poll(() => page.locator("#status").textContent(), { timeout: 10_000 })
        .toContain(provider.id);

      const retried = toolAnswer(await agent.callTool({ name: "http_request", arguments: args }));
      expect(retried.origin_status, JSON.stringify(retried)).toBe(200);
      expect(String(retried.body)).toContain("[redacted]");
    }
    await saveScreenshot(page, `connect-done.png`);
    expect(problems).toEqual([]);
    const html = await page.content();
    for (const secret of fakes.secrets) expect(html.includes(secret)).toBe(false);
    await agent.close();
    await context.close();
  }, 180_000);

  it("connects Stripe (which no agent ever asks for) from the Vault's Connect action", async () => {
    const { base, browser } = rig!;
    const op = await signedUpOperator();
    const stored = await op.request("POST", "/api/items", {
      name: "STRIPE",
      value: fakes.clients.stripe.clientSecret,
      username: fakes.clients.stripe.clientId,
      kind: "client_secret",
      inject: "client_credentials",
      environment: "staging",
      allowed_hosts: ["api.stripe.com", "connect.stripe.com"],
    });
    expect(stored.statusCode, stored.body).toBe(201);
    const listed = (await op.request("GET", "/api/items")).json().items as {
      name: string;
      connect_provider: string | null;
    }[];
    expect(listed.find((i) => i.name === "STRIPE")?.connect_provider).toBe("stripe");

    const { context, page, problems } = await openWatchedPage(browser, {
      viewport: { width: 1280, height: 900 },
      session: { cookies: op.cookies, url: base },
    });
    await page.route("https://connect.stripe.com/oauth/authorize**", async (route) => {
      const { code, state, redirectUri } = fakes.authorize("stripe", route.request().url());
      await route.fulfill({
        status: 302,
        headers: { location: `${redirectUri}?${new URLSearchParams({ code, state })}` },
      });
    });
    await page.goto(`${base}/console#vault`);
    const connect = page.getByRole("button", { name: "Connect a stripe account for STRIPE" });
    await connect.waitFor({ state: "visible", timeout: 15_000 });
    await connect.click();
    await page.waitForURL(`${base}/console#vault?connected=stripe`, { timeout: 15_000 });
    const after = (await op.request("GET", "/api/items")).json().items as { name: string }[];
    expect(after.map((i) => i.name)).toContain("STRIPE_REFRESH");
    expect(problems).toEqual([]);
    const html = await page.content();
    for (const secret of fakes.secrets) expect(html.includes(secret)).toBe(false);
    await context.close();
  }, 120_000);
});
