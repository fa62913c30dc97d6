// Changes to how an account signs in (auth/auth.routes.ts, passkeys.routes.ts, step-up.ts), through
// the real routes: a backup code is recovery, never the authenticator code of a step-up, so one
// code and the mailbox can neither add a passkey nor sign the owner out; an operator who lost the
// phone still signs in with a backup code and sets up a new authenticator, whose live codes then
// step up; a pending enrolment belongs to the session that started it; a session begun with single
// sign-on cannot spend the account's authenticator attempts where its step-up is not that code; and
// the operator is mailed of each change, with no code or secret in the mail.
import { randomBytes } from "node:crypto";
import { newId } from "@latch/shared/ids";
import * as OTPAuth from "otpauth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPasskeysRepo } from "../src/auth/passkeys.repo.ts";
import { createSessionsRepo } from "../src/auth/sessions.repo.ts";
import {
  Browser,
  type HostedHarness,
  readableMail,
  signInWithEmailCode,
  signUpOperator,
  startHosted,
} from "./hosted.ts";
import { noneAttestationRegistration } from "./webauthn.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 120_000);
afterAll(async () => {
  await h?.close();
});

const MINUTE = 60_000;
const BASE = "http://localhost:8787";

type Answer = Awaited<ReturnType<Browser["request"]>>;

function expectStepUp(response: Answer, methods: string[]) {
  expect(response.statusCode, response.body).toBe(403);
  expect(response.json().error).toMatchObject({ code: "step_up_required", methods });
}

/** A signed-up owner with an authenticator, and backup codes it made on its ready session. */
async function ownerWithCodes(label: string) {
  const { browser, email, totp } = await signUpOperator(h, { label });
  h.clock.advance(30_000);
  const made = await browser.request("POST", "/api/auth/backup-codes/regenerate", {
    code: totp.generate({ timestamp: h.clock.now.getTime() }),
  });
  expect(made.statusCode, made.body).toBe(200);
  return { browser, email, totp, backupCodes: made.json().backup_codes as string[] };
}

const mailsTo = (email: string) => h.inbox.mails.filter((m) => m.to === email).map(readableMail);

describe("a backup code signs in but is no step-up", () => {
  it("cannot add a passkey, sign the owner out, or pass an organisation's step-up", async () => {
    const owner = await ownerWithCodes("takeover");
    h.clock.advance(10 * MINUTE);

    // Someone with the mailbox and one backup code: signed in.
    const attacker = await signInWithEmailCode(h, new Browser(h.app), owner.email);
    const signedIn = await attacker.request("POST", "/api/auth/totp/verify", { code: owner.backupCodes[0] });
    expect(signedIn.statusCode, signedIn.body).toBe(200);
    expect(signedIn.json()).toMatchObject({ used_backup_code: true });

    // Adding a passkey needs the authenticator's live code, which a backup code is not.
    const options = await attacker.request("POST", "/api/auth/passkeys/options", {});
    expectStepUp(options, ["totp"]);
    expect(options.json().error.message).toBe(
      "changing how you sign in needs a verification of the last 5 minutes: enter a code from your authenticator app",
    );
    // Nor does it sign the owner's sessions out.
    expectStepUp(await attacker.request("POST", "/api/sessions/revoke-others"), ["totp"]);
    // Nor any step-up an organisation route declares.
    expectStepUp(await attacker.request("PATCH", "/api/orgs/settings", { standing_approvals_need: 2 }), [
      "totp",
    ]);
    expectStepUp(
      await attacker.request("POST", "/api/orgs/members/invite", { email: "x@example.test", role: "admin" }),
      ["totp"],
    );
    // A second backup code on the signed-in session verifies nothing, and is not spent.
    const again = await attacker.request("POST", "/api/auth/totp/verify", { code: owner.backupCodes[1] });
    expect(again.statusCode, again.body).toBe(401);
    expect(again.json().error.code).toBe("totp_invalid");
    expect((await attacker.request("GET", "/api/auth/me")).json().backup_codes_remaining).toBe(9);
    expectStepUp(await attacker.request("POST", "/api/auth/passkeys/options", {}), ["totp"]);

    // The owner's session is untouched, and its live code steps up as before.
    expect((await owner.browser.request("GET", "/api/auth/me")).statusCode).toBe(200);
    h.clock.advance(30_000);
    const live = await owner.browser.request("POST", "/api/auth/totp/verify", {
      code: owner.totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(live.statusCode, live.body).toBe(200);
    expect((await owner.browser.request("POST", "/api/auth/passkeys/options", {})).statusCode).toBe(200);
  });

  it("signs other sessions out only after a fresh step-up", async () => {
    const owner = await ownerWithCodes("revoke-others");
    const other = await signInWithEmailCode(h, new Browser(h.app), owner.email);
    h.clock.advance(30_000);
    expect(
      (
        await other.request("POST", "/api/auth/totp/verify", {
          code: owner.totp.generate({ timestamp: h.clock.now.getTime() }),
        })
      ).statusCode,
    ).toBe(200);
    h.clock.advance(6 * MINUTE);
    expectStepUp(await owner.browser.request("POST", "/api/sessions/revoke-others"), ["totp"]);
    expect((await other.request("GET", "/api/auth/me")).statusCode).toBe(200);
    h.clock.advance(30_000);
    const stepped = await owner.browser.request("POST", "/api/auth/totp/verify", {
      code: owner.totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(stepped.statusCode, stepped.body).toBe(200);
    const revoked = await owner.browser.request("POST", "/api/sessions/revoke-others");
    expect(revoked.statusCode, revoked.body).toBe(200);
    expect(revoked.json().revoked).toBeGreaterThanOrEqual(1);
    expect((await other.request("GET", "/api/auth/me")).statusCode).toBe(401);
  });
});

describe("recovery with a backup code", () => {
  it("sets up a new authenticator (mailed), whose live code then steps up", async () => {
    const owner = await ownerWithCodes("lost-phone");
    h.clock.advance(10 * MINUTE);
    // The phone is gone: a backup code signs in.
    const browser = await signInWithEmailCode(h, new Browser(h.app), owner.email);
    expect(
      (await browser.request("POST", "/api/auth/totp/verify", { code: owner.backupCodes[0] })).statusCode,
    ).toBe(200);
    // Re-enrolling asks for a current code: a wrong one is refused, another backup code is one.
    const wrong = await browser.request("POST", "/api/auth/totp/start", { current_code: "ABCDE-FGHJK" });
    expect(wrong.statusCode, wrong.body).toBe(401);
    expect(wrong.json().error.code).toBe("totp_invalid");
    const started = await browser.request("POST", "/api/auth/totp/start", {
      current_code: owner.backupCodes[1],
    });
    expect(started.statusCode, started.body).toBe(200);
    const app = OTPAuth.URI.parse(started.json().otpauth_url) as OTPAuth.TOTP;
    // The same backup code does not start another.
    expect(
      (await browser.request("POST", "/api/auth/totp/start", { current_code: owner.backupCodes[1] }))
        .statusCode,
    ).toBe(401);
    expect((await browser.request("GET", "/api/auth/totp/pending")).statusCode).toBe(200);

    const mailed = mailsTo(owner.email).length;
    const confirmed = await browser.request("POST", "/api/auth/totp/confirm", {
      code: app.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    const newCodes = confirmed.json().backup_codes as string[];
    const notices = mailsTo(owner.email).slice(mailed);
    expect(notices).toHaveLength(1);
    expect(notices[0]).toContain("Latch: the authenticator app was replaced");
    for (const secret of [...newCodes, new URL(started.json().otpauth_url).searchParams.get("secret")!]) {
      expect(notices[0]).not.toContain(secret);
    }

    // The old authenticator is gone; the new one's live code steps up.
    h.clock.advance(6 * MINUTE);
    expectStepUp(await browser.request("POST", "/api/auth/passkeys/options", {}), ["totp"]);
    const old = await browser.request("POST", "/api/auth/totp/verify", {
      code: owner.totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(old.statusCode).toBe(401);
    const live = await browser.request("POST", "/api/auth/totp/verify", {
      code: app.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(live.statusCode, live.body).toBe(200);
    const options = await browser.request("POST", "/api/auth/passkeys/options", {});
    expect(options.statusCode, options.body).toBe(200);
    const added = await browser.request("POST", "/api/auth/passkeys", {
      name: "New laptop",
      response: noneAttestationRegistration(options.json().challenge, BASE),
    });
    expect(added.statusCode, added.body).toBe(201);
  });
});

describe("a pending enrolment", () => {
  it("is read and confirmed only by the session that started it", async () => {
    const owner = await ownerWithCodes("pending");
    const other = await signInWithEmailCode(h, new Browser(h.app), owner.email);
    h.clock.advance(30_000);
    expect(
      (
        await other.request("POST", "/api/auth/totp/verify", {
          code: owner.totp.generate({ timestamp: h.clock.now.getTime() }),
        })
      ).statusCode,
    ).toBe(200);
    h.clock.advance(30_000);
    const started = await owner.browser.request("POST", "/api/auth/totp/start", {
      current_code: owner.totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(started.statusCode, started.body).toBe(200);
    const app = OTPAuth.URI.parse(started.json().otpauth_url) as OTPAuth.TOTP;

    // Another ready session of the same account: as if none were pending.
    const read = await other.request("GET", "/api/auth/totp/pending");
    expect(read.statusCode, read.body).toBe(404);
    expect(read.json().error.code).toBe("no_pending_enrollment");
    const confirm = await other.request("POST", "/api/auth/totp/confirm", {
      code: app.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(confirm.statusCode, confirm.body).toBe(404);
    expect(confirm.json().error.code).toBe("no_pending_enrollment");

    // The session that started it reads and confirms it.
    const own = await owner.browser.request("GET", "/api/auth/totp/pending");
    expect(own.statusCode).toBe(200);
    expect(own.json().otpauth_url).toBe(started.json().otpauth_url);
    const mailed = mailsTo(owner.email).length;
    const confirmed = await owner.browser.request("POST", "/api/auth/totp/confirm", {
      code: app.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    expect(mailsTo(owner.email).slice(mailed).join("\n")).toContain("the authenticator app was replaced");
  });

  it("of a new account is not another sign-in's either", async () => {
    const email = `pending-new-${randomBytes(4).toString("hex")}@example.test`;
    const first = await signInWithEmailCode(h, new Browser(h.app), email);
    const started = await first.request("POST", "/api/auth/totp/start", {});
    expect(started.statusCode, started.body).toBe(200);
    const second = await signInWithEmailCode(h, new Browser(h.app), email);
    const read = await second.request("GET", "/api/auth/totp/pending");
    expect(read.statusCode).toBe(404);
    expect(read.json().error.code).toBe("no_pending_enrollment");
    const app = OTPAuth.URI.parse(started.json().otpauth_url) as OTPAuth.TOTP;
    expect(
      (
        await second.request("POST", "/api/auth/totp/confirm", {
          code: app.generate({ timestamp: h.clock.now.getTime() }),
        })
      ).statusCode,
    ).toBe(404);
    const confirmed = await first.request("POST", "/api/auth/totp/confirm", {
      code: app.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    // A sign-up's first factor is no change to mail about.
    expect(mailsTo(email).join("\n")).not.toContain("authenticator app was");
  });
});

describe("a session begun with single sign-on", () => {
  it("cannot spend the account's authenticator attempts when its step-up is a passkey", async () => {
    const owner = await ownerWithCodes("sso-verify");
    const me = (await owner.browser.request("GET", "/api/auth/me")).json();
    const db = h.plane.database.db;
    const { id: operatorId } = await db
      .selectFrom("operators")
      .select("id")
      .where("email", "=", owner.email)
      .executeTakeFirstOrThrow();
    await createPasskeysRepo(db).insertPasskey({
      id: newId("pky"),
      operatorId,
      credentialId: randomBytes(32).toString("base64url"),
      publicKey: randomBytes(77),
      signCount: 0,
      transports: ["internal"],
      deviceType: "singleDevice",
      backedUp: false,
      aaguid: null,
      name: "Laptop",
      createdAt: h.clock.now,
    });
    // A session as the SSO callback makes it (sso.routes.ts): whole, acting in its organisation.
    const created = await createSessionsRepo(db).insertSession(
      operatorId,
      me.organisation.id,
      "test",
      h.clock.now,
      { method: "sso", at: h.clock.now },
      me.organisation.id,
    );
    const sso = new Browser(h.app);
    sso.cookies.set("latch_session", created.token);
    sso.cookies.set("latch_csrf", created.csrfToken);
    expect((await sso.request("GET", "/api/auth/me")).json().signed_in_with_sso).toBe(true);
    for (let i = 0; i < 12; i++) {
      const refused = await sso.request("POST", "/api/auth/totp/verify", { code: "000000" });
      expect(refused.statusCode, refused.body).toBe(403);
      expect(refused.json().error.code).toBe("sso_session");
    }
    const operator = await db
      .selectFrom("operators")
      .select(["totp_failures", "totp_locked_until"])
      .where("id", "=", operatorId)
      .executeTakeFirstOrThrow();
    expect(operator).toMatchObject({ totp_failures: 0, totp_locked_until: null });
    // The owner's own sign-in elsewhere is not locked.
    h.clock.advance(30_000);
    const elsewhere = await signInWithEmailCode(h, new Browser(h.app), owner.email);
    const verified = await elsewhere.request("POST", "/api/auth/totp/verify", {
      code: owner.totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(verified.statusCode, verified.body).toBe(200);
  });
});

describe("notices", () => {
  it("mail new backup codes, without the codes", async () => {
    const owner = await ownerWithCodes("notice");
    const notices = mailsTo(owner.email).filter((m) => m.includes("new backup codes were made"));
    expect(notices).toHaveLength(1);
    expect(notices[0]).toContain("Latch: new backup codes were made");
    for (const code of owner.backupCodes) expect(notices[0]).not.toContain(code);
  });
});
