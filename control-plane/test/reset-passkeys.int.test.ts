// An operator who lost their passkey (vault reset-passkeys, cli/reset-passkeys.command.ts): once an
// account has a passkey every step-up takes it, so without it they can neither remove it nor add
// another. The administrator's reset removes the account's passkeys, ends its sessions and audits
// it in its organisation, in one transaction; the operator then signs in with the email code and
// the authenticator app, whose code is the step-up again, and may add a new passkey. An unknown
// address, an account without a passkey, and (unless asked for) one left with no second factor are
// refused with nothing changed.
import { randomBytes } from "node:crypto";
import { newId } from "@latch/shared/ids";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPasskeysRepo } from "../src/auth/passkeys.repo.ts";
import { resetPasskeys } from "../src/cli/reset-passkeys.command.ts";
import { Browser, type HostedHarness, signInWithEmailCode, signUpOperator, startHosted } from "./hosted.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

const MINUTE = 60_000;

/**
 * A passkey on the account, as a registration stores it (the ceremony itself is the browser
 * tests' subject, passkeys.browser.test.ts): only its presence matters here.
 */
async function addStoredPasskey(browser: Browser): Promise<void> {
  const operatorId = (await browser.request("GET", "/api/orgs/members")).json().members[0].operator_id;
  await createPasskeysRepo(h.plane.database.db).insertPasskey({
    id: newId("pky"),
    operatorId,
    credentialId: randomBytes(32).toString("base64url"),
    publicKey: randomBytes(77),
    signCount: 0,
    transports: ["internal"],
    deviceType: "singleDevice",
    backedUp: false,
    aaguid: null,
    name: "Lost phone",
    createdAt: h.clock.now,
  });
}

async function signInAgain(email: string, totp: { generate(o: { timestamp: number }): string }) {
  const browser = await signInWithEmailCode(h, new Browser(h.app), email);
  h.clock.advance(30_000);
  const verified = await browser.request("POST", "/api/auth/totp/verify", {
    code: totp.generate({ timestamp: h.clock.now.getTime() }),
  });
  expect(verified.statusCode, verified.body).toBe(200);
  return browser;
}

describe("vault reset-passkeys", () => {
  it("lets an operator who lost their passkey back to the authenticator app, and audits it", async () => {
    const { browser, email, totp } = await signUpOperator(h, { label: "lost-passkey" });
    await addStoredPasskey(browser);
    h.clock.advance(6 * MINUTE);
    // Locked out of every step-up: the lost passkey is the only one it takes.
    const locked = await browser.request("POST", "/api/auth/passkeys/options", {});
    expect(locked.statusCode).toBe(403);
    expect(locked.json().error).toMatchObject({ code: "step_up_required", methods: ["passkey"] });

    const reset = await resetPasskeys(
      h.plane.database.db,
      { email: email.toUpperCase(), isLastFactorAllowed: false },
      h.clock.now,
    );
    expect(reset).toMatchObject({ email, passkeysRemoved: 1, organisations: 1, hasAuthenticator: true });
    expect(reset.sessionsEnded).toBeGreaterThanOrEqual(1);
    // Every session of the account ended: whoever holds one (or the lost device) is out.
    expect((await browser.request("GET", "/api/auth/me")).statusCode).toBe(401);

    const again = await signInAgain(email, totp);
    expect((await again.request("GET", "/api/auth/me")).json()).toMatchObject({
      passkeys: 0,
      session_ready: true,
    });
    // The authenticator code just given is the step-up now: a new passkey can be started.
    const options = await again.request("POST", "/api/auth/passkeys/options", {});
    expect(options.statusCode, options.body).toBe(200);
    const rows = (await again.request("GET", "/api/audit?action=passkeys_reset")).json().events;
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      actor: "system",
      detail: { email, passkeys_removed: 1, by: "vault reset-passkeys" },
    });
  });

  it("refuses an unknown address, an account without a passkey, and one left with no second factor", async () => {
    await expect(
      resetPasskeys(
        h.plane.database.db,
        { email: "nobody-here@example.test", isLastFactorAllowed: false },
        h.clock.now,
      ),
    ).rejects.toMatchObject({ code: "not_found" });
    await expect(
      resetPasskeys(
        h.plane.database.db,
        { email: "not an address", isLastFactorAllowed: false },
        h.clock.now,
      ),
    ).rejects.toMatchObject({ code: "invalid_email" });

    const { browser, email } = await signUpOperator(h, { label: "no-passkey" });
    await expect(
      resetPasskeys(h.plane.database.db, { email, isLastFactorAllowed: false }, h.clock.now),
    ).rejects.toMatchObject({ code: "not_found", message: `${email} has no passkey: nothing to reset` });
    // Nothing happened: the session still works.
    expect((await browser.request("GET", "/api/auth/me")).statusCode).toBe(200);

    // Passkeys only (the authenticator app removed once a passkey was there).
    await addStoredPasskey(browser);
    await h.plane.database.db
      .updateTable("operators")
      .set({ totp_enabled: false })
      .where("email", "=", email)
      .execute();
    await expect(
      resetPasskeys(h.plane.database.db, { email, isLastFactorAllowed: false }, h.clock.now),
    ).rejects.toMatchObject({ code: "last_factor" });
    expect((await browser.request("GET", "/api/auth/me")).json().passkeys).toBe(1);
    const forced = await resetPasskeys(
      h.plane.database.db,
      { email, isLastFactorAllowed: true },
      h.clock.now,
    );
    expect(forced).toMatchObject({ passkeysRemoved: 1, hasAuthenticator: false });
  });
});
