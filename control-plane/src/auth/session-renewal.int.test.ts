// A session that passes its authenticator step gets a new token and CSRF token (session fixation):
// whoever knew the pending session's (a cookie planted in the operator's browser, the otp/verify
// answer) holds nothing once the operator has typed their code into it.
import * as OTPAuth from "otpauth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Browser,
  type HostedHarness,
  signInWithEmailCode,
  signUpOperator,
  startHosted,
  uniqueEmail,
} from "../../test/hosted.ts";
import { noneAttestationPasskey, signAssertion } from "../../test/webauthn.ts";

let h: HostedHarness;

beforeAll(async () => {
  h = await startHosted();
}, 60_000);

afterAll(async () => {
  await h.close();
});

/** A second browser holding the same cookies: the one who planted them or read them. */
function copyOf(browser: Browser): Browser {
  const copy = new Browser(h.app);
  for (const [name, value] of browser.cookies) copy.cookies.set(name, value);
  return copy;
}

describe("the session passing its authenticator step", () => {
  it("gets a new token and CSRF token at sign-in: the pending one's holder is signed out", async () => {
    const { email, totp } = await signUpOperator(h);
    h.clock.advance(31_000);
    const victim = await signInWithEmailCode(h, new Browser(h.app), email);
    const planter = copyOf(victim);
    const pendingCsrf = victim.cookies.get("latch_csrf");

    const verified = await victim.request("POST", "/api/auth/totp/verify", {
      code: totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(verified.statusCode, verified.body).toBe(200);
    expect(victim.cookies.get("latch_csrf")).not.toBe(pendingCsrf);
    expect(victim.cookies.get("latch_session")).not.toBe(planter.cookies.get("latch_session"));

    // The operator's browser goes on, ready.
    expect((await victim.request("GET", "/api/access")).statusCode).toBe(200);
    expect((await victim.request("GET", "/api/auth/me")).json()).toMatchObject({ session_ready: true });
    // The pending token and its CSRF token are worth nothing now.
    expect((await planter.request("GET", "/api/auth/me")).statusCode).toBe(401);
    expect((await planter.request("GET", "/api/access")).statusCode).toBe(401);
    const withOldCsrf = await victim.request("POST", "/api/sessions/revoke-others", undefined, {
      "x-csrf-token": pendingCsrf ?? "",
    });
    expect(withOldCsrf.json().error.code).toBe("csrf_failed");
  });

  it("renews it after a backup code too, and after a sign-up's first authenticator", async () => {
    const email = uniqueEmail("renew");
    const signingUp = await signInWithEmailCode(h, new Browser(h.app), email);
    const planted = copyOf(signingUp);
    const started = await signingUp.request("POST", "/api/auth/totp/start", {});
    const totp = OTPAuth.URI.parse(started.json().otpauth_url) as OTPAuth.TOTP;
    const confirmed = await signingUp.request("POST", "/api/auth/totp/confirm", {
      code: totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    expect((await signingUp.request("GET", "/api/access")).statusCode).toBe(200);
    expect((await planted.request("GET", "/api/auth/me")).statusCode).toBe(401);

    const backupCode = (confirmed.json().backup_codes as string[])[0]!;
    const victim = await signInWithEmailCode(h, new Browser(h.app), email);
    const planter = copyOf(victim);
    const verified = await victim.request("POST", "/api/auth/totp/verify", { code: backupCode });
    expect(verified.json()).toMatchObject({ ok: true, used_backup_code: true });
    expect((await victim.request("GET", "/api/access")).statusCode).toBe(200);
    expect((await planter.request("GET", "/api/auth/me")).statusCode).toBe(401);
  });

  it("keeps the token of a ready session that steps up: its other tabs go on", async () => {
    const { browser, totp } = await signUpOperator(h);
    const otherTab = copyOf(browser);
    h.clock.advance(31_000);
    const stepUp = await browser.request("POST", "/api/auth/totp/verify", {
      code: totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(stepUp.statusCode, stepUp.body).toBe(200);
    expect(stepUp.cookies).toHaveLength(0);
    expect((await otherTab.request("GET", "/api/access")).statusCode).toBe(200);
    expect((await otherTab.request("POST", "/api/sessions/revoke-others")).statusCode).toBe(200);
  });

  it("gets a new token and CSRF token when the second step is a passkey", async () => {
    const { browser: first, email } = await signUpOperator(h, { label: "renew-passkey" });
    const options = await first.request("POST", "/api/auth/passkeys/options", {});
    expect(options.statusCode, options.body).toBe(200);
    const passkey = noneAttestationPasskey(options.json().challenge, "http://localhost:8787");
    const added = await first.request("POST", "/api/auth/passkeys", {
      name: "Laptop",
      response: passkey.response,
    });
    expect(added.statusCode, added.body).toBe(201);

    h.clock.advance(31_000);
    const victim = await signInWithEmailCode(h, new Browser(h.app), email);
    const planter = copyOf(victim);
    const pendingSession = victim.cookies.get("latch_session");
    const asked = await victim.request("POST", "/api/auth/passkey/options", {});
    expect(asked.statusCode, asked.body).toBe(200);
    const verified = await victim.request("POST", "/api/auth/passkey/verify", {
      response: signAssertion({
        credential: passkey.credential,
        challenge: asked.json().challenge,
        rpId: "localhost",
        origin: "http://localhost:8787",
        counter: 1,
      }),
    });
    expect(verified.statusCode, verified.body).toBe(200);
    expect(victim.cookies.get("latch_session")).not.toBe(pendingSession);
    expect((await victim.request("GET", "/api/access")).statusCode).toBe(200);
    expect((await planter.request("GET", "/api/access")).statusCode).toBe(401);
  });
});
