// Passkeys in a real Chromium with the DevTools virtual authenticator (CDP WebAuthn): adding one
// under Access, signing in with it as the second step and with no code at all, the step-up an
// "Always allow" needs once the session's verification is more than 5 minutes old (the test moves
// the plane's clock; nothing waits), and what an attacker would try: a removed passkey, another
// site's answer, another account's passkey, a replayed answer, another browser's challenge, a
// counter gone backwards. BASE_URL names localhost: WebAuthn refuses an IP address as an RP id.
import type * as OTPAuth from "otpauth";
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
import { Browser, type HostedHarness, lastCodeFor } from "../../test/hosted.ts";
import { addVirtualAuthenticator, signAssertion, type VirtualAuthenticator } from "../../test/webauthn.ts";

interface GrantRow {
  policy: string;
  status: string;
  item_name: string;
}

describe.skipIf(skipBrowserTests)("passkeys in Chromium", () => {
  let rig: BrowserRig | undefined;
  let h: HostedHarness;
  let base: string;

  beforeAll(async () => {
    rig = await startBrowserRig({ hostname: "localhost" });
    ({ h, base } = rig);
  }, 120_000);

  afterAll(async () => {
    await rig?.close();
  });

  /** A page that fails the test on a script error or anything the CSP refused. */
  const openPage = () => openWatchedPage(rig!.browser);
  const shot = (page: Page, name: string) => saveScreenshot(page, `${name}.png`);
  const status = (page: Page) => page.locator("#status").textContent();

  /** A JSON API call from the page's own cookies (Playwright's request context shares them). */
  async function pageApi(page: Page, method: "GET" | "POST" | "DELETE", path: string, body?: unknown) {
    const cookies = await page.context().cookies(base);
    const csrf = cookies.find((c) => c.name === "latch_csrf")?.value ?? "";
    const response = await page.request.fetch(`${base}${path}`, {
      method,
      headers: {
        origin: base,
        "x-csrf-token": csrf,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { data: JSON.stringify(body) }),
    });
    return {
      status: response.status(),
      json: (await response.json().catch(() => ({}))) as Record<string, unknown>,
    };
  }

  async function addPasskeyInAccess(page: Page, name: string) {
    await page.goto(`${base}/console#access`);
    await page.locator("#passkey-name").fill(name);
    await page.getByRole("button", { name: "Add a passkey" }).click();
    await expect.poll(() => status(page)).toBe(`Added the passkey ${name}.`);
    await expect.poll(() => page.locator("#passkeys tbody tr").count()).toBeGreaterThan(0);
  }

  async function signOut(page: Page) {
    await page.locator("#sign-out").click();
    await page.waitForURL(`${base}/sign-in`);
  }

  /** A pending approval in the operator's Inbox: a credential, a model client, and its request. */
  async function pendingApproval(page: Page, name: string): Promise<string> {
    const stored = await pageApi(page, "POST", "/api/items", {
      name,
      value: "sk_live_passkeys_test_value",
      environment: "staging",
      allowed_hosts: ["api.latch.test"],
    });
    expect(stored.status).toBe(201);
    const client = await pageApi(page, "POST", "/api/clients/model", {
      name: `agent-${name.toLowerCase()}`,
      environment: "staging",
    });
    expect(client.status).toBe(201);
    const asked = await h.app.inject({
      method: "POST",
      url: "/api/grants/request",
      headers: { authorization: `Bearer ${client.json.token}`, "content-type": "application/json" },
      payload: JSON.stringify({ item_name: name, task_description: "nightly sync" }),
    });
    expect(asked.statusCode).toBe(201);
    return asked.json().grant.grant_id as string;
  }

  let operator: {
    email: string;
    totp: OTPAuth.TOTP;
    backupCodes: string[];
    page: Page;
    authenticator: VirtualAuthenticator;
  };

  it("adds a passkey under Access, then signs in with it as the second step and with no code at all", async () => {
    const { page, problems } = await openPage();
    const authenticator = await addVirtualAuthenticator(page);
    let backupCodes: string[] = [];
    const { email, totp } = await signUpInChromium(page, h, base, {
      label: "passkey",
      at: async (step) => {
        if (step === "backup-codes") backupCodes = await page.locator("#backup-codes li").allTextContents();
      },
    });
    operator = { email, totp, backupCodes, page, authenticator };

    // Just signed in: the verification is fresh, so adding asks nothing more.
    await addPasskeyInAccess(page, "Test laptop");
    const listed = page.locator("#passkeys tbody tr").first();
    await expect.poll(() => listed.locator("th").textContent()).toBe("Test laptop");
    await expect.poll(() => listed.locator("td").nth(1).textContent()).toBe("Never");
    expect(await authenticator.credentials()).toHaveLength(1);
    await shot(page, "passkeys-access");
    expect(await seriousViolations(page)).toEqual([]);
    expect(h.inbox.mails.at(-1)?.raw).toContain('the passkey "Test laptop" was added');

    // The second step: the email code, then the passkey instead of the authenticator code.
    await signOut(page);
    await page.getByLabel("Email address").fill(email);
    await page.getByRole("button", { name: "Email me a code" }).click();
    const before = h.inbox.mails.filter((m) => m.to === email).length;
    await expect
      .poll(() => h.inbox.mails.filter((m) => m.to === email).length)
      .toBeGreaterThanOrEqual(before);
    await expect.poll(() => lastCodeFor(h.inbox, email)).toMatch(/^\d{8}$/);
    await page.getByLabel("8-digit code from the email").fill(lastCodeFor(h.inbox, email));
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL(`${base}/verify-totp`);
    await page.getByRole("button", { name: "Use a passkey" }).waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole("button", { name: "Use a passkey" }).click();
    await page.waitForURL(`${base}/console`);
    const session = await h.plane.database.db
      .selectFrom("operator_sessions")
      .innerJoin("operators", "operators.id", "operator_sessions.operator_id")
      .select(["operator_sessions.verified_method", "operator_sessions.is_mfa_passed"])
      .where("operators.email", "=", email)
      .where("operator_sessions.revoked_at", "is", null)
      .executeTakeFirstOrThrow();
    expect(session).toEqual({ verified_method: "passkey", is_mfa_passed: true });

    // Passwordless: no email is sent, no code typed.
    await signOut(page);
    const mailsBefore = h.inbox.mails.length;
    await page.getByRole("button", { name: "Sign in with a passkey" }).waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await page.waitForURL(`${base}/console`);
    expect(h.inbox.mails.length).toBe(mailsBefore);
    await expect.poll(() => page.locator("#header-email").textContent()).toBe(email);
    await page.goto(`${base}/console#access`);
    await expect
      .poll(() => page.locator("#passkeys tbody tr").first().locator("td").nth(1).textContent())
      .not.toBe("Never");
    expect(problems).toEqual([]);
  }, 120_000);

  it("asks for the passkey again in place when an Always allow comes more than 5 minutes after it", async () => {
    const { page, authenticator } = operator;
    const problems: string[] = [];
    page.on("pageerror", (error) => problems.push(error.message));
    await pendingApproval(page, "STEPUP_KEY");
    await page.goto(`${base}/console#inbox`);
    // "Always allow" first asks what it covers; the confirm is the request that needs the step-up.
    await page.getByRole("button", { name: /^Always allow: STEPUP_KEY/ }).click();
    const always = page.getByRole("button", { name: /^Always allow, as chosen: STEPUP_KEY/ });
    await always.waitFor();
    const usesBefore = (await authenticator.credentials())[0]!.signCount;

    // Six minutes later by the plane's clock: the sign-in's passkey no longer counts.
    h.clock.advance(6 * 60_000);
    await always.click();
    const dialog = page.getByRole("dialog", { name: "Confirm it is you" });
    await dialog.waitFor();
    await expect
      .poll(() => dialog.locator("#step-up-why").textContent())
      .toBe(
        "Approving a standing approval needs a verification of the last 5 minutes: confirm with your passkey.",
      );
    await shot(page, "step-up-prompt");
    expect(await seriousViolations(page)).toEqual([]);
    await dialog.getByRole("button", { name: "Confirm with your passkey" }).click();
    // The approval is sent again by itself once the passkey answered.
    await expect
      .poll(() => status(page))
      .toMatch(/^Approved STEPUP_KEY for agent-stepup_key until revoked\.$/);
    await expect.poll(() => dialog.isVisible()).toBe(false);
    expect((await authenticator.credentials())[0]!.signCount).toBeGreaterThan(usesBefore);
    const grants = (await pageApi(page, "GET", "/api/grants")).json.grants as GrantRow[];
    expect(grants.some((g) => g.policy === "item_standing" && g.status === "active")).toBe(true);

    // Cancelled: nothing is approved, and the sentence says so.
    await pendingApproval(page, "STEPUP_CANCEL");
    await page.goto(`${base}/console#inbox`);
    h.clock.advance(6 * 60_000);
    // By keyboard: Enter opens the prompt on its button, Escape cancels, focus goes back.
    await page.getByRole("button", { name: /^Always allow: STEPUP_CANCEL/ }).click();
    const cancelled = page.getByRole("button", { name: /^Always allow, as chosen: STEPUP_CANCEL/ });
    await cancelled.focus();
    await page.keyboard.press("Enter");
    await dialog.waitFor();
    await expect.poll(() => page.evaluate("document.activeElement?.id")).toBe("step-up-passkey-button");
    await page.keyboard.press("Escape");
    await expect.poll(() => status(page)).toBe("Not done: the verification was cancelled.");
    await expect
      .poll(() => page.evaluate("document.activeElement?.getAttribute('aria-label')"))
      .toMatch(/^Always allow, as chosen: STEPUP_CANCEL/);
    const after = (await pageApi(page, "GET", "/api/inbox")).json.approvals as GrantRow[];
    expect(after.map((g) => g.item_name)).toContain("STEPUP_CANCEL");
    expect(problems).toEqual([]);
  }, 120_000);

  it("refuses another site's answer, another account's passkey, a replay, another browser's challenge and a counter gone backwards", async () => {
    const [credential] = await operator.authenticator.credentials();
    const rpId = new URL(base).hostname;
    const stored = async () =>
      Number(
        (
          await h.plane.database.db
            .selectFrom("operator_passkeys")
            .select("sign_count")
            .where(
              "credential_id",
              "=",
              Buffer.from(credential!.credentialId, "base64").toString("base64url"),
            )
            .executeTakeFirstOrThrow()
        ).sign_count,
      );
    const attacker = new Browser(h.app, base);
    const challenge = async (browser: Browser) =>
      (await browser.request("POST", "/api/auth/passkey/sign-in/options", {})).json().challenge as string;
    const signIn = (browser: Browser, response: unknown) =>
      browser.request("POST", "/api/auth/passkey/sign-in", { response });

    // Signed as the real key, for an answer the real origin and RP would accept: it works.
    let counter = (await stored()) + 1;
    const honest = signAssertion({
      credential: credential!,
      challenge: await challenge(attacker),
      rpId,
      origin: base,
      counter,
    });
    expect((await signIn(attacker, honest)).statusCode).toBe(200);
    // The same answer again: its challenge is spent.
    const replay = await signIn(attacker, honest);
    expect(replay.statusCode).toBe(401);
    expect(replay.json().error.code).toBe("passkey_invalid");

    // Another relying party's answer (its RP id, its origin) and this site's origin with another RP id.
    for (const [rp, origin] of [
      ["evil.example", "https://evil.example"],
      ["evil.example", base],
      [rpId, "https://evil.example"],
    ] as const) {
      counter += 1;
      const answer = signAssertion({
        credential: credential!,
        challenge: await challenge(attacker),
        rpId: rp,
        origin,
        counter,
      });
      const refused = await signIn(attacker, answer);
      expect(refused.statusCode, `${rp} ${origin}`).toBe(401);
    }

    // Not verified by its user (UV flag clear): refused, user verification is required.
    counter += 1;
    const unverified = signAssertion({
      credential: credential!,
      challenge: await challenge(attacker),
      rpId,
      origin: base,
      counter,
      flags: 0x01,
    });
    expect((await signIn(attacker, unverified)).statusCode).toBe(401);

    // A challenge asked for by one browser, answered from another: refused, and still the owner's.
    const owner = new Browser(h.app, base);
    const ownersChallenge = await challenge(owner);
    counter += 1;
    const stolen = signAssertion({
      credential: credential!,
      challenge: ownersChallenge,
      rpId,
      origin: base,
      counter,
    });
    expect((await signIn(attacker, stolen)).statusCode).toBe(401);
    expect((await signIn(owner, stolen)).statusCode).toBe(200);

    // A counter that does not move forward is a cloned key's.
    const last = await stored();
    const backwards = signAssertion({
      credential: credential!,
      challenge: await challenge(attacker),
      rpId,
      origin: base,
      counter: last - 1,
    });
    expect((await signIn(attacker, backwards)).statusCode).toBe(401);
    expect(await stored()).toBe(last);

    // Another account's passkey as this account's second step.
    const { page: other } = await openPage();
    await signUpInChromium(other, h, base, { label: "other" });
    const otherBrowser = new Browser(h.app, base);
    for (const cookie of await other.context().cookies(base))
      otherBrowser.cookies.set(cookie.name, cookie.value);
    // The other account signs in again (email code only): its session waits for the second step.
    const email2 = (await otherBrowser.request("GET", "/api/auth/me")).json().email as string;
    const fresh = new Browser(h.app, base);
    await fresh.request("POST", "/api/auth/otp/send", { email: email2 });
    await fresh.request("POST", "/api/auth/otp/verify", { email: email2, otp: lastCodeFor(h.inbox, email2) });
    // It has no passkey, so there are no options; a forged answer with the first account's key is refused.
    expect((await fresh.request("POST", "/api/auth/passkey/options", {})).statusCode).toBe(404);
    counter = (await stored()) + 1;
    const foreign = signAssertion({
      credential: credential!,
      challenge: await challenge(attacker),
      rpId,
      origin: base,
      counter,
    });
    const crossed = await fresh.request("POST", "/api/auth/passkey/verify", { response: foreign });
    expect(crossed.statusCode).toBe(401);
    expect(crossed.json().error.message).toBe("this passkey is not registered to this Latch account");
    expect((await fresh.request("GET", "/api/access")).statusCode).toBe(403);

    // The real authenticator goes on from the highest counter the test's own answers used.
    await operator.authenticator.setSignCount(credential!, (await stored()) + 1);
  }, 120_000);

  it("keeps a Remove being confirmed open, with its focus, when the table is drawn again", async () => {
    const { page } = operator;
    await page.goto(`${base}/console#access`);
    await expect.poll(() => page.locator("#passkeys tbody tr").count()).toBe(1);
    await page.evaluate("loaders.access()");
    await page.getByRole("button", { name: "Remove the passkey Test laptop" }).click();
    const question = page.getByRole("group", { name: "Remove the passkey Test laptop?" });
    await question.waitFor();
    const focusedText = () => page.evaluate("document.activeElement && document.activeElement.textContent");
    expect(await focusedText()).toBe("Cancel");

    // The passkey signs in on another device meanwhile: its "last used" changes and the section,
    // loaded again, draws the table anew.
    const usedAt = new Date(h.clock.now.getTime() + 60_000);
    await h.plane.database.db
      .updateTable("operator_passkeys")
      .set({ last_used_at: usedAt })
      .where("name", "=", "Test laptop")
      .execute();
    await page.evaluate("loaders.access()");
    await expect
      .poll(() => page.locator(`#passkeys time[datetime="${usedAt.toISOString()}"]`).count())
      .toBe(1);
    expect(await question.isVisible()).toBe(true);
    expect(await focusedText()).toBe("Cancel");

    // Cancel puts the Remove of the new row back; nothing was removed.
    await page.keyboard.press("Enter");
    await expect.poll(() => question.count()).toBe(0);
    expect(
      await page.evaluate("document.activeElement && document.activeElement.getAttribute('aria-label')"),
    ).toBe("Remove the passkey Test laptop");
    expect(await page.locator("#passkeys tbody tr").count()).toBe(1);
  }, 60_000);

  it("refuses a removed passkey, and never removes the last way to sign in", async () => {
    const { page, email, totp } = operator;
    await page.goto(`${base}/console#access`);
    h.clock.advance(6 * 60_000);
    // Drawn from what the server holds now: the last test's passkey use may land its "last used"
    // after the page's first load (on PostgreSQL under load it did), and a table drawn again for
    // it would take the Remove being confirmed below away with it.
    await expect.poll(() => page.locator("#passkeys tbody tr").count()).toBe(1);
    await page.evaluate("loaders.access()");
    await page.getByRole("button", { name: "Remove the passkey Test laptop" }).click();
    // The section loaded again meanwhile (shown twice while the page starts, as it is on a slow
    // machine): nothing changed, so the Remove being confirmed stays where it is.
    await page.evaluate("loaders.access()");
    await page.getByRole("button", { name: "Remove it" }).click({ timeout: 5_000 });
    // Removing changes how the account signs in: the passkey confirms it first.
    const dialog = page.getByRole("dialog", { name: "Confirm it is you" });
    await dialog.getByRole("button", { name: "Confirm with your passkey" }).click();
    await expect.poll(() => status(page)).toBe("Removed the passkey Test laptop.");
    await expect.poll(() => page.locator("#passkeys-empty").isVisible()).toBe(true);
    expect(h.inbox.mails.at(-1)?.raw).toContain('the passkey "Test laptop" was removed');

    // The authenticator still holds the key; Latch no longer knows it.
    await signOut(page);
    await page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await expect.poll(() => status(page)).toBe("This passkey is not registered to this Latch account.");
    expect(page.url()).toBe(`${base}/sign-in`);

    // Back in with the email code and the authenticator, a new passkey, then the authenticator goes.
    await page.getByLabel("Email address").fill(email);
    await page.getByRole("button", { name: "Email me a code" }).click();
    await page.getByLabel("8-digit code from the email").waitFor();
    await expect.poll(() => lastCodeFor(h.inbox, email)).toMatch(/^\d{8}$/);
    await page.getByLabel("8-digit code from the email").fill(lastCodeFor(h.inbox, email));
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL(`${base}/verify-totp`);
    await page
      .getByLabel(/Code from your authenticator app/)
      .fill(totp.generate({ timestamp: h.clock.now.getTime() }));
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL(`${base}/console`);
    await addPasskeyInAccess(page, "Security key");
    await page.getByRole("button", { name: "Remove the authenticator app" }).click();
    await page.getByRole("button", { name: "Remove it" }).click();
    // With a passkey on the account, only the passkey confirms (a phished code no longer would).
    // The mail relay is down: the removal is saved and said so; the notice is logged as unsent.
    h.inbox.isRefusing = true;
    await dialog.getByRole("button", { name: "Confirm with your passkey" }).click();
    await expect.poll(() => status(page)).toBe("Removed the authenticator app.");
    h.inbox.isRefusing = false;
    expect(h.logs.text()).toContain("the security notice of a sign-in change could not be mailed");
    await expect
      .poll(() => page.locator("#authenticator-state").textContent())
      .toBe("Set up an authenticator app");

    // The passkey is now the only factor: removing it is refused, saying why.
    await page.getByRole("button", { name: "Remove the passkey Security key" }).click();
    await page.getByRole("button", { name: "Remove it" }).click();
    await expect
      .poll(() => status(page))
      .toBe(
        "This is your only way to sign in besides the email code; add another passkey or an authenticator app first.",
      );
    expect(await page.locator("#passkeys tbody tr").count()).toBe(1);

    // The next sign-in's second step is the passkey (or a backup code).
    await signOut(page);
    await page.getByLabel("Email address").fill(email);
    await page.getByRole("button", { name: "Email me a code" }).click();
    await page.getByLabel("8-digit code from the email").waitFor();
    await page.getByLabel("8-digit code from the email").fill(lastCodeFor(h.inbox, email));
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL(`${base}/verify-totp`);
    await expect.poll(() => page.locator("#verify-heading").textContent()).toBe("Confirm it is you");
    // Someone who reads this mailbox has the email code alone: no authenticator of theirs may be
    // set up on a passkey-only account at this step (it would then pass the second step).
    for (const [method, path, body] of [
      ["POST", "/api/auth/totp/start", {}],
      ["GET", "/api/auth/totp/pending", undefined],
      ["POST", "/api/auth/totp/confirm", { code: "123456" }],
    ] as const) {
      const refused = await pageApi(page, method, path, body);
      expect(refused.status, `${path} ${JSON.stringify(refused.json)}`).toBe(403);
      expect(refused.json.error, `${path} ${JSON.stringify(refused.json)}`).toBe("mfa_required");
    }
    await page.getByRole("button", { name: "Use a passkey" }).click();
    await page.waitForURL(`${base}/console`);

    // A lost passkey: a backup code is still the way back in.
    await signOut(page);
    await page.getByLabel("Email address").fill(email);
    await page.getByRole("button", { name: "Email me a code" }).click();
    await page.getByLabel("8-digit code from the email").waitFor();
    await page.getByLabel("8-digit code from the email").fill(lastCodeFor(h.inbox, email));
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL(`${base}/verify-totp`);
    await page.getByLabel("Or a backup code").fill(operator.backupCodes[0]!);
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL(`${base}/console`);

    // New backup codes with no authenticator app: no code is asked for, the passkey confirms them.
    await page.goto(`${base}/console#access`);
    await expect
      .poll(() => page.locator("#regen-form .hint").textContent())
      .toBe("Replaces every unused backup code. Confirm with your passkey.");
    expect(await page.locator("#regen-code").isVisible()).toBe(false);
    h.clock.advance(6 * 60_000);
    await page.getByRole("button", { name: "Make new backup codes" }).click();
    await dialog.getByRole("button", { name: "Confirm with your passkey" }).click();
    await expect
      .poll(() => status(page))
      .toBe("New backup codes made. Save them now: they are shown only once.");
    expect(await page.locator("#new-backup-codes li").count()).toBe(10);
  }, 120_000);
});
