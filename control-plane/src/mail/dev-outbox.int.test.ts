// Development mail (no SMTP_URL): each mail is a file in DATA_DIR/outbox, and the log only says
// where to look. Sign-in codes, approval codes and single-use approve links are bearer secrets: a
// log is shipped, kept and read far more widely than a file in the operator's own data directory.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as OTPAuth from "otpauth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Browser, type HostedHarness, startHosted, uniqueEmail } from "../../test/hosted.ts";

let h: HostedHarness;
let outbox: string;

beforeAll(async () => {
  h = await startHosted({ isDevOutbox: true });
  outbox = join(h.egress.dataDir, "outbox");
}, 60_000);

afterAll(async () => {
  await h?.close();
});

/** The newest outbox mail addressed to `email`, with the file's name. */
function lastOutboxMail(email: string): { file: string; text: string } {
  const mails = readdirSync(outbox)
    .sort()
    .map((file) => ({ file, text: readFileSync(join(outbox, file), "utf8") }))
    .filter((m) => m.text.includes(`\nTo: ${email}\n`));
  const last = mails.at(-1);
  if (!last) throw new Error(`no outbox mail to ${email}`);
  return last;
}

describe("the dev outbox", () => {
  it("keeps sign-in codes, approval codes and approve links out of the log, in the outbox file", async () => {
    const email = uniqueEmail("outbox");
    const browser = new Browser(h.app);
    expect((await browser.request("POST", "/api/auth/otp/send", { email })).statusCode).toBe(200);
    const signInMail = lastOutboxMail(email);
    const code = /sign-(?:in|up) code is (\d{8})/.exec(signInMail.text)?.[1];
    expect(code, signInMail.text).toBeDefined();
    // The log names the file to open, not what is in it.
    expect(h.logs.text()).not.toContain(code!);
    expect(h.logs.text()).toContain(join(outbox, signInMail.file));

    // Sign in with the code from the file, enrol, store a credential and ask for an approval.
    const verified = await browser.request("POST", "/api/auth/otp/verify", { email, otp: code });
    expect(verified.statusCode, verified.body).toBe(200);
    const started = (await browser.request("POST", "/api/auth/totp/start", {})).json();
    const totp = OTPAuth.URI.parse(started.otpauth_url) as OTPAuth.TOTP;
    const confirmed = await browser.request("POST", "/api/auth/totp/confirm", {
      code: totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    const stored = await browser.request("POST", "/api/items", {
      name: "OUTBOX_TOKEN",
      value: "outbox_secret_0123456789abcdef",
      environment: "staging",
      allowed_hosts: ["api.latch.test"],
    });
    expect(stored.statusCode, stored.body).toBe(201);
    const asked = await browser.request("POST", "/api/grants/request", { item_name: "OUTBOX_TOKEN" });
    expect(asked.statusCode, asked.body).toBe(201);
    const approvalCode = asked.json().approval_code as string;
    expect(approvalCode).toMatch(/^\d{8}$/);

    const approvalMail = lastOutboxMail(email);
    expect(approvalMail.text).toContain(approvalCode);
    const linkToken = /\/approve\?token=([A-Za-z0-9_-]+)/.exec(approvalMail.text)?.[1];
    expect(linkToken, approvalMail.text).toBeDefined();

    const log = h.logs.text();
    expect(log).toContain(join(outbox, approvalMail.file));
    expect(log).not.toContain(approvalCode);
    expect(log).not.toContain(linkToken!);
    expect(log).not.toContain("/approve?token=");
  });

  it("a code for a new address says sign-up; for an existing account, sign-in", async () => {
    const email = uniqueEmail("words");
    const browser = new Browser(h.app);
    expect((await browser.request("POST", "/api/auth/otp/send", { email })).statusCode).toBe(200);
    const signUp = lastOutboxMail(email).text;
    expect(signUp).toMatch(/^Subject: Your Latch sign-up code: \d{8}$/m);
    expect(signUp).toContain("create your Latch account");
    expect(signUp).not.toMatch(/sign-in/i);
    const code = /sign-up code is (\d{8})/.exec(signUp)?.[1];
    expect((await browser.request("POST", "/api/auth/otp/verify", { email, otp: code })).statusCode).toBe(
      200,
    );

    // The account exists now: the next code signs in.
    expect((await new Browser(h.app).request("POST", "/api/auth/otp/send", { email })).statusCode).toBe(200);
    const signIn = lastOutboxMail(email).text;
    expect(signIn).toMatch(/^Subject: Your Latch sign-in code: \d{8}$/m);
    expect(signIn).not.toMatch(/sign-up|create your/i);
  });
});
