// Sign-up and sign-in through the JSON API (spec 3.3, 4.3, 5, 8), with a real SMTP server, real
// authenticator codes (otpauth) and a clock the test moves instead of sleeping.
import * as OTPAuth from "otpauth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Browser, type HostedHarness, lastCodeFor, startHosted, uniqueEmail } from "../../test/hosted.ts";

let h: HostedHarness;

beforeAll(async () => {
  h = await startHosted();
}, 60_000);

afterAll(async () => {
  await h.close();
});

async function signInWithEmail(browser: Browser, email: string) {
  expect((await browser.request("POST", "/api/auth/otp/send", { email })).json()).toEqual({ ok: true });
  const verified = await browser.request("POST", "/api/auth/otp/verify", {
    email,
    otp: lastCodeFor(h.inbox, email),
  });
  expect(verified.statusCode, verified.body).toBe(200);
  return verified.json() as { ok: boolean; enroll: boolean; verify: boolean; csrf_token: string };
}

function totpOf(otpauthUrl: string): OTPAuth.TOTP {
  return OTPAuth.URI.parse(otpauthUrl) as OTPAuth.TOTP;
}

const codeAt = (totp: OTPAuth.TOTP, offsetMs = 0) =>
  totp.generate({ timestamp: h.clock.now.getTime() + offsetMs });

/** A signed-up operator with an authenticator: its browser, its TOTP and its backup codes. */
async function signUp() {
  const email = uniqueEmail();
  const browser = new Browser(h.app);
  const first = await signInWithEmail(browser, email);
  expect(first).toMatchObject({ ok: true, enroll: true, verify: false });
  const started = await browser.request("POST", "/api/auth/totp/start", {});
  expect(started.statusCode, started.body).toBe(200);
  const totp = totpOf(started.json().otpauth_url);
  const confirmed = await browser.request("POST", "/api/auth/totp/confirm", { code: codeAt(totp) });
  expect(confirmed.statusCode, confirmed.body).toBe(200);
  h.clock.advance(31_000);
  return { email, browser, totp, backupCodes: confirmed.json().backup_codes as string[] };
}

describe("sign-up, enrolment and sign-in", () => {
  it("runs the whole flow: email code, enrol, confirm, sign out, sign in with a backup code", async () => {
    const email = uniqueEmail("flow");
    const browser = new Browser(h.app);
    const first = await signInWithEmail(browser, email);
    expect(first).toMatchObject({ ok: true, enroll: true, verify: false });
    expect(browser.cookies.has("latch_session")).toBe(true);

    const blocked = await browser.request("GET", "/api/access");
    expect(blocked.statusCode).toBe(403);
    expect(blocked.json()).toMatchObject({ error: "mfa_required", enroll_url: "/enroll-totp" });

    const started = await browser.request("POST", "/api/auth/totp/start", {});
    expect(started.json().otpauth_url).toMatch(
      /^otpauth:\/\/totp\/Latch:.*algorithm=SHA1&digits=6&period=30/,
    );
    expect(started.json().qr_svg).toMatch(/^<svg[\s\S]*<\/svg>\s*$/);
    const pending = await browser.request("GET", "/api/auth/totp/pending");
    expect(pending.json().otpauth_url).toBe(started.json().otpauth_url);
    const totp = totpOf(started.json().otpauth_url);

    expect((await browser.request("POST", "/api/auth/totp/confirm", { code: "000000" })).statusCode).toBe(
      401,
    );
    const confirmed = await browser.request("POST", "/api/auth/totp/confirm", { code: codeAt(totp) });
    const backupCodes = confirmed.json().backup_codes as string[];
    expect(backupCodes).toHaveLength(10);
    expect(new Set(backupCodes).size).toBe(10);

    const me = await browser.request("GET", "/api/auth/me");
    expect(me.json()).toMatchObject({
      email,
      totp_enabled: true,
      backup_codes_remaining: 10,
      session_ready: true,
    });
    expect((await browser.request("GET", "/api/access")).statusCode).toBe(200);
    expect((await browser.request("GET", "/api/auth/totp/pending")).json().error.code).toBe(
      "no_pending_enrollment",
    );

    const logout = await browser.request("POST", "/api/auth/logout");
    expect(logout.statusCode).toBe(200);
    expect((await browser.request("GET", "/api/auth/me")).statusCode).toBe(401);

    const again = await signInWithEmail(browser, email);
    expect(again).toMatchObject({ enroll: false, verify: true });
    const needsVerify = await browser.request("GET", "/api/access");
    expect(needsVerify.json()).toMatchObject({ error: "mfa_required", verify_url: "/verify-totp" });
    const viaBackup = await browser.request("POST", "/api/auth/totp/verify", {
      code: backupCodes[3]!.toLowerCase(),
    });
    expect(viaBackup.json()).toMatchObject({ ok: true, used_backup_code: true });
    expect((await browser.request("GET", "/api/auth/me")).json().backup_codes_remaining).toBe(9);

    // A backup code works once.
    const other = new Browser(h.app);
    await signInWithEmail(other, email);
    expect((await other.request("POST", "/api/auth/totp/verify", { code: backupCodes[3] })).statusCode).toBe(
      401,
    );
    // The mails carried the code and nothing else of value; the logs never carry a code.
    expect(h.logs.text()).not.toContain(lastCodeFor(h.inbox, email));
  });

  it("answers {ok:true} for known and unknown emails alike", async () => {
    const browser = new Browser(h.app);
    const unknown = await browser.request("POST", "/api/auth/otp/send", { email: uniqueEmail("unknown") });
    const { email } = await signUp();
    const known = await browser.request("POST", "/api/auth/otp/send", { email });
    expect(unknown.json()).toEqual({ ok: true });
    expect(known.json()).toEqual(unknown.json());
    expect(
      (await browser.request("POST", "/api/auth/otp/send", { email: "not-an-email" })).json().error.code,
    ).toBe("invalid_email");
  });
});

describe("email code rules", () => {
  it("voids a code after five wrong attempts, counting attempts_remaining down", async () => {
    const email = uniqueEmail("wrong");
    const browser = new Browser(h.app);
    await browser.request("POST", "/api/auth/otp/send", { email });
    const good = lastCodeFor(h.inbox, email);
    const wrong = good === "00000000" ? "11111111" : "00000000";
    const remaining: number[] = [];
    for (let i = 0; i < 5; i++) {
      const response = await browser.request("POST", "/api/auth/otp/verify", { email, otp: wrong });
      expect(response.statusCode).toBe(401);
      remaining.push(response.json().error.attempts_remaining);
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0]);
    const late = await browser.request("POST", "/api/auth/otp/verify", { email, otp: good });
    expect(late.statusCode).toBe(401);
    expect(late.json().error).toMatchObject({ code: "otp_invalid", attempts_remaining: 0 });
  });

  it("is single use, replaced by a new send, and expires after 10 minutes", async () => {
    const email = uniqueEmail("rules");
    const browser = new Browser(h.app);
    await browser.request("POST", "/api/auth/otp/send", { email });
    const first = lastCodeFor(h.inbox, email);
    await browser.request("POST", "/api/auth/otp/send", { email });
    const second = lastCodeFor(h.inbox, email);
    if (first !== second) {
      expect((await browser.request("POST", "/api/auth/otp/verify", { email, otp: first })).statusCode).toBe(
        401,
      );
    }
    expect((await browser.request("POST", "/api/auth/otp/verify", { email, otp: second })).statusCode).toBe(
      200,
    );
    expect((await browser.request("POST", "/api/auth/otp/verify", { email, otp: second })).statusCode).toBe(
      401,
    );

    await browser.request("POST", "/api/auth/otp/send", { email });
    const third = lastCodeFor(h.inbox, email);
    h.clock.advance(10 * 60_000 + 1);
    expect((await browser.request("POST", "/api/auth/otp/verify", { email, otp: third })).statusCode).toBe(
      401,
    );
  });

  it("sends at most five codes per email per 15 minutes", async () => {
    const email = uniqueEmail("limit");
    const browser = new Browser(h.app);
    for (let i = 0; i < 5; i++) {
      expect((await browser.request("POST", "/api/auth/otp/send", { email })).statusCode).toBe(200);
    }
    const sixth = await browser.request("POST", "/api/auth/otp/send", { email });
    expect(sixth.statusCode).toBe(429);
    expect(sixth.json().error.retry_after).toBeGreaterThan(0);
    expect(sixth.headers["retry-after"]).toBe(String(sixth.json().error.retry_after));
    h.clock.advance(15 * 60_000 + 1000);
    expect((await browser.request("POST", "/api/auth/otp/send", { email })).statusCode).toBe(200);
  });
});

describe("authenticator rules", () => {
  it("accepts a code once (replay protection)", async () => {
    const { email, totp } = await signUp();
    const a = new Browser(h.app);
    await signInWithEmail(a, email);
    const code = codeAt(totp);
    expect((await a.request("POST", "/api/auth/totp/verify", { code })).statusCode).toBe(200);
    const b = new Browser(h.app);
    await signInWithEmail(b, email);
    expect((await b.request("POST", "/api/auth/totp/verify", { code })).statusCode).toBe(401);
  });

  it("locks the account for 15 minutes after ten failures", async () => {
    const { email, totp } = await signUp();
    const browser = new Browser(h.app);
    await signInWithEmail(browser, email);
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) {
      statuses.push((await browser.request("POST", "/api/auth/totp/verify", { code: "12345x" })).statusCode);
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 401, 401, 401, 401, 429]);
    const locked = await browser.request("POST", "/api/auth/totp/verify", { code: codeAt(totp) });
    expect(locked.statusCode).toBe(429);
    expect(locked.json().error.retry_after).toBeGreaterThan(800);
    h.clock.advance(15 * 60_000 + 1000);
    expect((await browser.request("POST", "/api/auth/totp/verify", { code: codeAt(totp) })).statusCode).toBe(
      200,
    );
  });

  it("reads no more than ten of the codes sent at once, then none until the lock runs out", async () => {
    // An attacker with the email step passed sends many guesses at the same moment: each takes an
    // attempt before its code is read, and the tenth locks the account in the same statement.
    const { email, totp } = await signUp();
    const browser = new Browser(h.app);
    await signInWithEmail(browser, email);
    const answers = await Promise.all(
      Array.from({ length: 40 }, () => browser.request("POST", "/api/auth/totp/verify", { code: "12345x" })),
    );
    const codes = answers.map((answer) => answer.json().error.code as string);
    expect(codes.filter((code) => code === "totp_invalid")).toHaveLength(9);
    expect(codes.filter((code) => code === "totp_locked")).toHaveLength(31);
    // Ten attempts were taken, no more: the rest were refused unread.
    const operator = await h.plane.database.db
      .selectFrom("operators")
      .select(["totp_failures", "totp_locked_until"])
      .where("email", "=", email)
      .executeTakeFirstOrThrow();
    expect(operator.totp_failures).toBe(10);
    expect(operator.totp_locked_until).not.toBeNull();
    expect((await browser.request("POST", "/api/auth/totp/verify", { code: codeAt(totp) })).statusCode).toBe(
      429,
    );
    h.clock.advance(15 * 60_000 + 1000);
    expect((await browser.request("POST", "/api/auth/totp/verify", { code: codeAt(totp) })).statusCode).toBe(
      200,
    );
  });

  it("gives a right code back its attempts, and takes an attempt for backup codes and new ones too", async () => {
    const { email, totp, backupCodes } = await signUp();
    const browser = new Browser(h.app);
    await signInWithEmail(browser, email);
    for (let i = 0; i < 9; i++) await browser.request("POST", "/api/auth/totp/verify", { code: "12345x" });
    // A backup code is a right code: the nine wrong ones are forgotten.
    expect(
      (await browser.request("POST", "/api/auth/totp/verify", { code: backupCodes[0] })).statusCode,
    ).toBe(200);
    // Nine more wrong codes, then a right one: still not locked. (A backup code is no step-up: the
    // session gives the authenticator's code before it makes new backup codes.)
    for (let i = 0; i < 9; i++) {
      const wrong = await browser.request("POST", "/api/auth/totp/verify", { code: "000000" });
      expect(wrong.json().error.code).toBe("totp_invalid");
    }
    h.clock.advance(31_000);
    expect((await browser.request("POST", "/api/auth/totp/verify", { code: codeAt(totp) })).statusCode).toBe(
      200,
    );
    // Nine wrong codes for new backup codes, then a right one: still not locked.
    for (let i = 0; i < 9; i++) {
      const wrong = await browser.request("POST", "/api/auth/backup-codes/regenerate", { code: "000000" });
      expect(wrong.json().error.code).toBe("totp_invalid");
    }
    h.clock.advance(31_000);
    const renewed = await browser.request("POST", "/api/auth/backup-codes/regenerate", {
      code: codeAt(totp),
    });
    expect(renewed.statusCode, renewed.body).toBe(200);
    // And ten wrong ones there lock the account as on the sign-in step.
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) {
      statuses.push(
        (await browser.request("POST", "/api/auth/backup-codes/regenerate", { code: "000000" })).statusCode,
      );
    }
    expect(statuses.slice(-1)).toEqual([429]);
  });

  it("ends a session that passed the email code but not the authenticator after 30 minutes", async () => {
    const { email, totp } = await signUp();
    const browser = new Browser(h.app);
    await signInWithEmail(browser, email);
    // Until then it reads what the verify page needs, and nothing of the account's organisations.
    const pending = (await browser.request("GET", "/api/auth/me")).json();
    expect(pending).toMatchObject({ session_ready: false, totp_enabled: true, organisation: null });
    expect(pending.organisations).toEqual([]);
    expect(pending.permissions).toEqual([]);
    h.clock.advance(29 * 60_000);
    expect((await browser.request("GET", "/api/auth/me")).statusCode).toBe(200);
    h.clock.advance(2 * 60_000);
    // One code read from a mailbox does not buy the second step, or a lock of the account, for ever.
    expect((await browser.request("GET", "/api/auth/me")).statusCode).toBe(401);
    const late = await browser.request("POST", "/api/auth/totp/verify", { code: codeAt(totp) });
    expect(late.statusCode).toBe(401);
    // A fresh sign-in goes on as ever.
    const again = new Browser(h.app);
    await signInWithEmail(again, email);
    h.clock.advance(31_000);
    expect((await again.request("POST", "/api/auth/totp/verify", { code: codeAt(totp) })).statusCode).toBe(
      200,
    );
  });

  it("lets an enrolment wait 10 minutes, then answers 404 no_pending_enrollment", async () => {
    const browser = new Browser(h.app);
    await signInWithEmail(browser, uniqueEmail("pending"));
    const started = await browser.request("POST", "/api/auth/totp/start", {});
    h.clock.advance(10 * 60_000 + 1);
    const gone = await browser.request("GET", "/api/auth/totp/pending");
    expect(gone.statusCode).toBe(404);
    expect(gone.json().error.code).toBe("no_pending_enrollment");
    const late = await browser.request("POST", "/api/auth/totp/confirm", {
      code: codeAt(totpOf(started.json().otpauth_url)),
    });
    expect(late.statusCode).toBe(404);
  });

  it("re-enrols only from a ready session with a current code, and regenerates backup codes", async () => {
    const { browser, totp, backupCodes } = await signUp();
    const refused = await browser.request("POST", "/api/auth/totp/start", { current_code: "000000" });
    expect(refused.statusCode).toBe(401);
    const restarted = await browser.request("POST", "/api/auth/totp/start", { current_code: codeAt(totp) });
    expect(restarted.statusCode).toBe(200);
    const next = totpOf(restarted.json().otpauth_url);
    expect(next.secret.base32).not.toBe(totp.secret.base32);
    expect((await browser.request("POST", "/api/auth/totp/confirm", { code: codeAt(next) })).statusCode).toBe(
      200,
    );
    h.clock.advance(31_000);
    const regenerated = await browser.request("POST", "/api/auth/backup-codes/regenerate", {
      code: codeAt(next),
    });
    expect(regenerated.json().backup_codes).toHaveLength(10);
    expect(regenerated.json().backup_codes).not.toContain(backupCodes[0]);
  });
});

describe("replacing an authenticator", () => {
  it("does not let a session that only passed the email step read or confirm a pending replacement", async () => {
    const { email, browser, totp } = await signUp();
    const replacement = await browser.request("POST", "/api/auth/totp/start", { current_code: codeAt(totp) });
    expect(replacement.statusCode).toBe(200);
    // Someone who can read the operator's mail signs in while the replacement is pending.
    const intruder = new Browser(h.app);
    await signInWithEmail(intruder, email);
    const peek = await intruder.request("GET", "/api/auth/totp/pending");
    expect(peek.statusCode).toBe(403);
    expect(peek.json()).toMatchObject({ error: "mfa_required", verify_url: "/verify-totp" });
    const stolen = totpOf(replacement.json().otpauth_url);
    const confirm = await intruder.request("POST", "/api/auth/totp/confirm", { code: codeAt(stolen) });
    expect(confirm.statusCode).toBe(403);
    expect((await intruder.request("GET", "/api/access")).statusCode).toBe(403);
    // The operator's own ready session still completes it.
    expect(
      (await browser.request("POST", "/api/auth/totp/confirm", { code: codeAt(stolen) })).statusCode,
    ).toBe(200);
  });
});

describe("the walls", () => {
  it("needs X-CSRF-Token on POST and DELETE", async () => {
    const { browser } = await signUp();
    const noToken = await browser.request("POST", "/api/orgs", { name: "Acme" }, { "x-csrf-token": "" });
    expect(noToken.statusCode).toBe(403);
    expect(noToken.json().error.code).toBe("csrf_failed");
    const wrong = await browser.request("POST", "/api/auth/logout", undefined, { "x-csrf-token": "nope" });
    expect(wrong.statusCode).toBe(403);
  });

  it("refuses a foreign Origin with 403 and no CORS allow header", async () => {
    const evil = new Browser(h.app, "https://evil.example");
    for (const [method, url] of [
      ["POST", "/api/auth/otp/send"],
      ["GET", "/api/auth/me"],
      ["GET", "/console"],
      ["GET", "/sign-in"],
    ] as const) {
      const response = await evil.request(
        method,
        url,
        method === "POST" ? { email: uniqueEmail() } : undefined,
      );
      expect(response.statusCode, url).toBe(403);
      expect(response.headers["access-control-allow-origin"]).toBeUndefined();
    }
  });

  it("takes JSON only (415) and at most 128 KiB (413)", async () => {
    const text = await h.app.inject({
      method: "POST",
      url: "/api/auth/otp/send",
      headers: { "content-type": "text/plain" },
      payload: "email=a@b.c",
    });
    expect(text.statusCode).toBe(415);
    const form = await h.app.inject({
      method: "POST",
      url: "/api/auth/otp/send",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      payload: "email=a@b.c",
    });
    expect(form.statusCode).toBe(415);
    const big = await h.app.inject({
      method: "POST",
      url: "/api/auth/otp/send",
      headers: { "content-type": "application/json" },
      payload: JSON.stringify({ email: "a".repeat(140 * 1024) }),
    });
    expect(big.statusCode).toBe(413);
  });
});

describe("organisations and sessions", () => {
  it("creates organisations up to ten owned, then 402 plan_limit", async () => {
    const { browser } = await signUp();
    expect((await browser.request("POST", "/api/orgs", { name: "" })).statusCode).toBe(400);
    expect((await browser.request("POST", "/api/orgs", { name: "x".repeat(81) })).statusCode).toBe(400);
    // The sign-up made the first one.
    for (let i = 2; i <= 10; i++) {
      const created = await browser.request("POST", "/api/orgs", { name: `Org ${i}` });
      expect(created.statusCode, created.body).toBe(201);
    }
    const eleventh = await browser.request("POST", "/api/orgs", { name: "One too many" });
    expect(eleventh.statusCode).toBe(402);
    expect(eleventh.json().error.code).toBe("plan_limit");
  });

  it("lists the operator's organisations and switches the session between them, never into a stranger's", async () => {
    const { browser } = await signUp();
    const first = (await browser.request("GET", "/api/auth/me")).json();
    expect(first.organisations).toEqual([{ ...first.organisation, role: "owner" }]);
    const second = (await browser.request("POST", "/api/orgs", { name: "Second" })).json().organisation;
    const listed = (await browser.request("GET", "/api/auth/me")).json();
    expect(listed.organisation).toEqual(second);
    expect(listed.organisations.map((o: { name: string }) => o.name).sort()).toEqual(
      [first.organisation.name, "Second"].sort(),
    );

    const back = await browser.request("POST", "/api/orgs/switch", {
      organisation_id: first.organisation.id,
    });
    expect(back.statusCode, back.body).toBe(200);
    expect((await browser.request("GET", "/api/auth/me")).json().organisation).toEqual(first.organisation);

    const stranger = await signUp();
    const theirs = (await stranger.browser.request("GET", "/api/auth/me")).json().organisation;
    const refused = await browser.request("POST", "/api/orgs/switch", { organisation_id: theirs.id });
    expect(refused.statusCode).toBe(404);
    expect(refused.json().error.code).toBe("not_found");
    expect((await browser.request("GET", "/api/auth/me")).json().organisation).toEqual(first.organisation);
    const hostile = await browser.request("POST", "/api/orgs/switch", { organisation_id: "org_\u0000" });
    expect(hostile.statusCode).toBe(400);
  });

  it("deletes an organisation and everything in it, only with its exact name", async () => {
    const { browser } = await signUp();
    const created = (await browser.request("POST", "/api/orgs", { name: "Doomed" })).json().organisation;
    await h.plane.services.audit.insertAuditEvent({
      organisationId: created.id,
      actor: "operator",
      action: "test",
    });
    const wrong = await browser.request("DELETE", "/api/orgs", { confirm_name: "doomed" });
    expect(wrong.statusCode).toBe(400);
    expect((await browser.request("DELETE", "/api/orgs", { confirm_name: "Doomed" })).statusCode).toBe(200);
    const left = await h.plane.database.db
      .selectFrom("audit_events")
      .select("id")
      .where("organisation_id", "=", created.id)
      .execute();
    expect(left).toEqual([]);
  });

  it("lists sessions acting in the organisation and revokes another, never the current one", async () => {
    const { email, browser, totp } = await signUp();
    const second = new Browser(h.app);
    await signInWithEmail(second, email);
    await second.request("POST", "/api/auth/totp/verify", { code: codeAt(totp) });
    const access = (await browser.request("GET", "/api/access")).json();
    expect(access.operators).toEqual([expect.objectContaining({ email, role: "owner" })]);
    expect(access.sessions).toHaveLength(2);
    const current = access.sessions.find((s: { current: boolean }) => s.current);
    const other = access.sessions.find((s: { current: boolean }) => !s.current);
    const self = await browser.request("POST", `/api/sessions/${current.session_id}/revoke`);
    expect(self.statusCode).toBe(400);
    expect(self.json().error.code).toBe("cannot_revoke_current");
    expect((await browser.request("POST", `/api/sessions/${other.session_id}/revoke`)).statusCode).toBe(200);
    expect((await second.request("GET", "/api/auth/me")).statusCode).toBe(401);
    expect((await browser.request("POST", "/api/sessions/ses_notmine/revoke")).statusCode).toBe(404);
  });

  it("lists a session's user agent with what an operator cannot see as U+FFFD", async () => {
    const { email, browser, totp } = await signUp();
    const second = new Browser(h.app);
    await signInWithEmail(second, email);
    await second.request("POST", "/api/auth/totp/verify", { code: codeAt(totp) });
    const listed = (await browser.request("GET", "/api/access")).json().sessions;
    const other = listed.find((s: { current: boolean }) => !s.current);
    // A header is read as latin1: UTF-8 bytes of a direction override arrive as C1 controls.
    await h.plane.database.db
      .updateTable("operator_sessions")
      .set({ user_agent: "Safari on iPhone\u202E\u0085\u200Bevil" })
      .where("id", "=", other.session_id)
      .execute();
    const shown = (await browser.request("GET", "/api/access")).json().sessions;
    expect(shown.find((s: { session_id: string }) => s.session_id === other.session_id).user_agent).toBe(
      "Safari on iPhone\uFFFD\uFFFD\uFFFDevil",
    );
  });
});
