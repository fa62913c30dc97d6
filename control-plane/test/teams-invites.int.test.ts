// Invitations (DECISIONS "Teams"): mailed from the approval mail's sender, single use, 7 days,
// stored hashed, 50 a day per organisation; the link works for a new address (sign-up) and an
// existing account (sign-in), lands in the organisation, and refuses another address.
import * as OTPAuth from "otpauth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAIL_FROM } from "../src/mail/mailer.ts";
import { testDatabase } from "./database.ts";
import {
  Browser,
  type HostedHarness,
  lastCodeFor,
  readyOperator,
  signUpOperator,
  startHosted,
  uniqueEmail,
} from "./hosted.ts";
import { joinAs, lastInviteTokenFor } from "./teams.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

/** An owner in an organisation of their own, with its id. */
async function owner() {
  const { browser, totp } = await signUpOperator(h, { label: "owner" });
  const organisation = (await browser.request("GET", "/api/auth/me")).json().organisation;
  return { browser, organisation, totp };
}

async function invite(from: Browser, email: string, role = "approver") {
  const answer = await from.request("POST", "/api/orgs/members/invite", { email, role });
  expect(answer.statusCode, answer.body).toBe(201);
  return { invite: answer.json().invite, token: lastInviteTokenFor(h.inbox, email) };
}

/** A received mail's headers and text (quoted-printable undone). */
function mailTo(email: string) {
  const raw = h.inbox.mails.filter((m) => m.to === email).at(-1)?.raw ?? "";
  // Headers unfolded, quoted-printable soft breaks and escapes undone.
  const text = raw
    .replace(/\r?\n[ \t]+/g, " ")
    .replace(/=\r?\n/g, "")
    .replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
  return { raw, text };
}

describe("an invitation to a new address", () => {
  it("is mailed from Latch's sender; the address signs up from the link and lands in the organisation", async () => {
    const { browser: inviter, organisation } = await owner();
    const email = uniqueEmail("newcomer");
    const { token } = await invite(inviter, email, "approver");
    const mail = mailTo(email);
    expect(mail.raw).toMatch(new RegExp(`^From: ${MAIL_FROM.replace(/[<>.]/g, "\\$&")}`, "m"));
    expect(mail.text).toMatch(/^Subject: Latch: \S+ invites you to .* as approver/m);
    expect(mail.text).toContain(`http://localhost:8787/invite?token=${token}`);
    expect(mail.text).toContain("as an approver");

    // Signed out, the page shows the invitation and offers sign-in and sign-up that come back.
    const newcomer = new Browser(h.app);
    const page = await newcomer.request("GET", `/invite?token=${token}`);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain(`Join ${organisation.name.replace("'", "&#39;")}`);
    expect(page.body).toContain('data-state="signed_out"');
    expect(page.body).toContain(`/sign-up?return_to=${encodeURIComponent(`/invite?token=${token}`)}`);
    expect(page.headers["referrer-policy"]).toBe("no-referrer");

    await newcomer.request("POST", "/api/auth/otp/send", { email });
    await newcomer.request("POST", "/api/auth/otp/verify", { email, otp: lastCodeFor(h.inbox, email) });
    // Part-way through sign-in (no authenticator yet): the page sends it to finish first.
    const early = await newcomer.request("GET", `/invite?token=${token}`);
    expect(early.statusCode).toBe(302);
    expect(early.headers.location).toBe(
      `/enroll-totp?return_to=${encodeURIComponent(`/invite?token=${token}`)}`,
    );
    const started = (await newcomer.request("POST", "/api/auth/totp/start", {})).json();
    const totp = OTPAuth.URI.parse(started.otpauth_url) as OTPAuth.TOTP;
    await newcomer.request("POST", "/api/auth/totp/confirm", {
      code: totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect((await newcomer.request("GET", `/invite?token=${token}`)).body).toContain('data-state="accept"');
    const joined = await newcomer.request("POST", "/invite", { token });
    expect(joined.statusCode, joined.body).toBe(200);
    expect((await newcomer.request("GET", "/api/auth/me")).json().organisation.id).toBe(organisation.id);
  });

  it("joins with POST /invite: the session switches to the organisation, with the role invited", async () => {
    const { browser: inviter, organisation } = await owner();
    const { browser: newcomer, email } = await signUpOperator(h, { label: "new" });
    const { token } = await invite(inviter, email, "approver");
    const shown = await newcomer.request("GET", `/invite?token=${token}`);
    expect(shown.body).toContain('data-state="accept"');
    const accepted = await newcomer.request("POST", "/invite", { token });
    expect(accepted.statusCode, accepted.body).toBe(200);
    expect(accepted.json().organisation).toMatchObject({ id: organisation.id, role: "approver" });
    const me = (await newcomer.request("GET", "/api/auth/me")).json();
    expect(me.organisation).toMatchObject({ id: organisation.id, role: "approver", slug: organisation.slug });
    expect(me.permissions).toEqual(["org.read", "approvals.decide"]);
    // Their own organisation (made at sign-up) stays theirs, as owner.
    expect(me.organisations.map((o: { role: string }) => o.role).sort()).toEqual(["approver", "owner"]);
    const events = (await inviter.request("GET", "/api/audit?action=member_joined")).json().events;
    expect(events[0]).toMatchObject({ actor_name: email, detail: { email, role: "approver" } });
    const invited = (await inviter.request("GET", "/api/audit?action=member_invited")).json().events;
    expect(invited[0].detail).toMatchObject({ email, role: "approver" });
    expect(JSON.stringify(invited)).not.toContain(token);
  });
});

describe("an invitation to an existing account", () => {
  it("works once it signs in: the account joins and keeps its own organisation", async () => {
    const { browser: inviter, organisation } = await owner();
    const existing = await signUpOperator(h, { label: "existing" });
    const theirs = (await existing.browser.request("GET", "/api/auth/me")).json().organisation;
    // Addresses are compared as the sign-in step keeps them: lowercase.
    const sent = await inviter.request("POST", "/api/orgs/members/invite", {
      email: existing.email.toUpperCase(),
      role: "auditor",
    });
    expect(sent.json().invite.email).toBe(existing.email);
    const token = lastInviteTokenFor(h.inbox, existing.email);
    // Signs in again in a new browser (the mail was opened elsewhere).
    const browser = new Browser(h.app);
    await browser.request("POST", "/api/auth/otp/send", { email: existing.email });
    await browser.request("POST", "/api/auth/otp/verify", {
      email: existing.email,
      otp: lastCodeFor(h.inbox, existing.email),
    });
    const notYet = await browser.request("GET", `/invite?token=${token}`);
    expect(notYet.headers.location).toBe(
      `/verify-totp?return_to=${encodeURIComponent(`/invite?token=${token}`)}`,
    );
    h.clock.advance(30_000);
    await browser.request("POST", "/api/auth/totp/verify", {
      code: existing.totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    const joined = await browser.request("POST", "/invite", { token });
    expect(joined.statusCode, joined.body).toBe(200);
    const me = (await browser.request("GET", "/api/auth/me")).json();
    expect(me.organisation).toMatchObject({ id: organisation.id, role: "auditor" });
    expect(me.organisations.map((o: { id: string }) => o.id).sort()).toEqual(
      [organisation.id, theirs.id].sort(),
    );
  });

  it("a member's address already in the organisation is 409 already_member", async () => {
    const { browser: inviter } = await owner();
    const member = await joinAs(h, inviter, "approver");
    const again = await inviter.request("POST", "/api/orgs/members/invite", {
      email: member.email,
      role: "admin",
    });
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toMatchObject({ code: "already_member" });
  });
});

describe("an invitation that cannot be used", () => {
  it("another address is refused with a sentence, and the invitation still works for its own", async () => {
    const { browser: inviter } = await owner();
    const invited = await signUpOperator(h, { label: "invited" });
    const other = await signUpOperator(h, { label: "other" });
    const { token } = await invite(inviter, invited.email);
    const refused = await other.browser.request("POST", "/invite", { token });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.code).toBe("invite_wrong_account");
    expect(refused.json().error.message).toMatch(
      /^this invitation was sent to i…@example\.test, and you are signed in as other-/,
    );
    expect(refused.json().error.message).toContain(
      "sign out, then sign in or sign up with the invited address",
    );
    const page = await other.browser.request("GET", `/invite?token=${token}`);
    expect(page.statusCode).toBe(403);
    expect(page.body).toContain("This invitation was sent to i…@example.test");
    expect(page.body).not.toContain(invited.email);
    expect((await invited.browser.request("POST", "/invite", { token })).statusCode).toBe(200);
  });

  it("expires after 7 days (410 invite_expired)", async () => {
    const { browser: inviter } = await owner();
    const invited = await signUpOperator(h, { label: "late" });
    const { token } = await invite(inviter, invited.email);
    h.clock.advance(7 * 24 * 60 * 60 * 1000 + 1000);
    const late = await invited.browser.request("POST", "/invite", { token });
    expect(late.statusCode).toBe(410);
    expect(late.json().error).toMatchObject({ code: "invite_expired" });
    expect(late.json().error.message).toContain("expired");
    expect((await invited.browser.request("GET", `/invite?token=${token}`)).statusCode).toBe(410);
  });

  it("is single use (409 invite_used), even when the same account opens it again", async () => {
    const { browser: inviter } = await owner();
    const invited = await signUpOperator(h, { label: "twice" });
    const { token } = await invite(inviter, invited.email);
    expect((await invited.browser.request("POST", "/invite", { token })).statusCode).toBe(200);
    const again = await invited.browser.request("POST", "/invite", { token });
    expect(again.statusCode).toBe(409);
    expect(again.json().error.code).toBe("invite_used");
  });

  it("once withdrawn, its link answers 410 invite_withdrawn and the listing no longer has it", async () => {
    const { browser: inviter } = await owner();
    const invited = await signUpOperator(h, { label: "withdrawn" });
    const { invite: sent, token } = await invite(inviter, invited.email);
    expect(
      (await inviter.request("GET", "/api/orgs/members")).json().invites.map((i: { id: string }) => i.id),
    ).toContain(sent.id);
    expect((await inviter.request("DELETE", `/api/orgs/invites/${sent.id}`)).statusCode).toBe(200);
    expect((await inviter.request("GET", "/api/orgs/members")).json().invites).toEqual([]);
    const used = await invited.browser.request("POST", "/invite", { token });
    expect(used.statusCode).toBe(410);
    expect(used.json().error.code).toBe("invite_withdrawn");
    expect((await inviter.request("DELETE", `/api/orgs/invites/${sent.id}`)).statusCode).toBe(410);
    const events = (await inviter.request("GET", "/api/audit?action=invite_withdrawn")).json().events;
    expect(events[0].detail).toMatchObject({ email: invited.email, invite_id: sent.id });
  });

  it("a second invitation to the same address replaces the first: the old link stops working", async () => {
    const { browser: inviter } = await owner();
    const invited = await signUpOperator(h, { label: "resent" });
    const first = await invite(inviter, invited.email, "auditor");
    const second = await invite(inviter, invited.email, "approver");
    expect((await invited.browser.request("POST", "/invite", { token: first.token })).statusCode).toBe(410);
    const joined = await invited.browser.request("POST", "/invite", { token: second.token });
    expect(joined.json().organisation.role).toBe("approver");
    // The replaced invitation's end is in the audit, naming the one that replaced it.
    const events = (await inviter.request("GET", "/api/audit?action=invite_withdrawn")).json().events;
    expect(events.map((e: { detail: unknown }) => e.detail)).toContainEqual(
      expect.objectContaining({ invite_id: first.invite.id, replaced_by: second.invite.id }),
    );
  });

  it("an admin may not replace an owner's invitation: inviting the same address again is refused and the owner's link still works", async () => {
    const { browser: inviter } = await owner();
    const admin = await joinAs(h, inviter, "admin");
    const invited = await signUpOperator(h, { label: "owner-to-be" });
    const asOwner = await invite(inviter, invited.email, "owner");
    const replacing = await admin.browser.request("POST", "/api/orgs/members/invite", {
      email: invited.email,
      role: "auditor",
    });
    expect(replacing.statusCode, replacing.body).toBe(403);
    expect(replacing.json().error.code).toBe("forbidden_role");
    // Nothing was withdrawn, and nothing sent in its place.
    const events = (await inviter.request("GET", "/api/audit?action=invite_withdrawn")).json().events;
    expect(events.map((e: { detail: { invite_id?: string } }) => e.detail.invite_id)).not.toContain(
      asOwner.invite.id,
    );
    const joined = await invited.browser.request("POST", "/invite", { token: asOwner.token });
    expect(joined.statusCode, joined.body).toBe(200);
    expect(joined.json().organisation.role).toBe("owner");
  });

  it("speaks for its sender: a removed admin's invitation is withdrawn, a demoted one's no longer works", async () => {
    const { browser: inviter } = await owner();
    const admin = await joinAs(h, inviter, "admin");
    const otherSelf = await signUpOperator(h, { label: "other-self" });
    const later = await signUpOperator(h, { label: "later" });
    const sent = await invite(admin.browser, otherSelf.email, "admin");
    const second = await invite(admin.browser, later.email, "admin");
    // Demoted to approver: an approver may invite nobody, so the invitation is void.
    await inviter.request("POST", `/api/orgs/members/${admin.operatorId}/role`, { role: "approver" });
    const void1 = await later.browser.request("POST", "/invite", { token: second.token });
    expect(void1.statusCode).toBe(410);
    expect(void1.json().error.message).toContain("can no longer invite as admin");
    // Void for good: the listing no longer has it, and promoting the sender again does not bring it back.
    const listed = (await inviter.request("GET", "/api/orgs/members")).json().invites as { email: string }[];
    expect(listed.map((i) => i.email)).toEqual([otherSelf.email]);
    await inviter.request("POST", `/api/orgs/members/${admin.operatorId}/role`, { role: "admin" });
    const stillVoid = await later.browser.request("POST", "/invite", { token: second.token });
    expect(stillVoid.statusCode, stillVoid.body).toBe(410);
    expect(stillVoid.json().error.code).toBe("invite_withdrawn");
    // Removed: what they sent is withdrawn with them (each with its row), and the listing no longer has it.
    await inviter.request("DELETE", `/api/orgs/members/${admin.operatorId}`);
    expect((await inviter.request("GET", "/api/orgs/members")).json().invites).toEqual([]);
    const withdrawn = (await inviter.request("GET", "/api/audit?action=invite_withdrawn")).json().events;
    expect(withdrawn.map((e: { detail: unknown }) => e.detail)).toContainEqual(
      expect.objectContaining({ invite_id: sent.invite.id, reason: "sender_removed" }),
    );
    const void2 = await otherSelf.browser.request("POST", "/invite", { token: sent.token });
    expect(void2.statusCode).toBe(410);
    expect(void2.json().error.code).toBe("invite_withdrawn");
  });

  it("as owner, to an account that owns ten organisations already, is 402 plan_limit, as a role change and a transfer are", async () => {
    const { browser: inviter } = await owner();
    const full = await signUpOperator(h, { label: "full" });
    for (let n = 2; n <= 10; n++) {
      const created = await full.browser.request("POST", "/api/orgs", { name: `Owned ${n}` });
      expect(created.statusCode, created.body).toBe(201);
    }
    expect((await full.browser.request("POST", "/api/orgs", { name: "Eleventh" })).statusCode).toBe(402);
    const asOwner = await invite(inviter, full.email, "owner");
    const refused = await full.browser.request("POST", "/invite", { token: asOwner.token });
    expect(refused.statusCode, refused.body).toBe(402);
    expect(refused.json().error.code).toBe("plan_limit");
    // Joined as an approver, it may not be made an owner or handed the ownership either.
    const asApprover = await invite(inviter, full.email, "approver");
    expect((await full.browser.request("POST", "/invite", { token: asApprover.token })).statusCode).toBe(200);
    const members = (await inviter.request("GET", "/api/orgs/members")).json().members as {
      operator_id: string;
      email: string;
    }[];
    const fullId = members.find((m) => m.email === full.email)!.operator_id;
    const promoted = await inviter.request("POST", `/api/orgs/members/${fullId}/role`, { role: "owner" });
    expect(promoted.statusCode, promoted.body).toBe(402);
    const transferred = await inviter.request("POST", "/api/orgs/transfer", { operator_id: fullId });
    expect(transferred.statusCode, transferred.body).toBe(402);
    const roles = (await inviter.request("GET", "/api/orgs/members")).json().members as {
      email: string;
      role: string;
    }[];
    expect(roles.find((m) => m.email === full.email)?.role).toBe("approver");
  });

  it("an unknown or malformed token is 404 with a sentence, never a 500", async () => {
    const someone = await readyOperator(h);
    for (const token of ["x", "A".repeat(43), "<script>", "a\u0000b"]) {
      const answer = await someone.request("POST", "/invite", { token });
      expect([400, 404], `${token}: ${answer.body}`).toContain(answer.statusCode);
    }
    const page = await someone.request("GET", `/invite?token=${"B".repeat(43)}`);
    expect(page.statusCode).toBe(404);
    expect(page.body).toContain("This invitation link is not valid");
  });
});

describe("the token and the limit", () => {
  it("stores only the token's SHA-256", async () => {
    const { browser: inviter, organisation } = await owner();
    const { token } = await invite(inviter, uniqueEmail("hashed"));
    const { db } = await testDatabase();
    const rows = await db
      .selectFrom("org_invites")
      .selectAll()
      .where("organisation_id", "=", organisation.id)
      .execute();
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain(token);
    expect(rows[0]!.token_hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it("sends 50 a day per organisation: the 51st is 429 with retry_after, and a day later it goes", async () => {
    const { browser: inviter, totp } = await owner();
    for (let i = 0; i < 50; i++) {
      const sent = await inviter.request("POST", "/api/orgs/members/invite", {
        email: uniqueEmail(`bulk${i}`),
        role: "auditor",
      });
      expect(sent.statusCode, `invitation ${i + 1}: ${sent.body}`).toBe(201);
    }
    const over = await inviter.request("POST", "/api/orgs/members/invite", {
      email: uniqueEmail("bulk50"),
      role: "auditor",
    });
    expect(over.statusCode).toBe(429);
    expect(over.json().error).toMatchObject({ code: "rate_limited" });
    expect(over.json().error.message).toContain("at most 50 invitations a day");
    expect(over.json().error.retry_after).toBeGreaterThan(24 * 60 * 60 - 120);
    expect(over.headers["retry-after"]).toBe(String(over.json().error.retry_after));
    h.clock.advance(24 * 60 * 60 * 1000 + 1000);
    // A day on, changing members needs a fresh verification first (a step-up).
    const verified = await inviter.request("POST", "/api/auth/totp/verify", {
      code: totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(verified.statusCode).toBe(200);
    const next = await inviter.request("POST", "/api/orgs/members/invite", {
      email: uniqueEmail("nextday"),
      role: "auditor",
    });
    expect(next.statusCode).toBe(201);
  }, 120_000);

  it("refuses a role that does not exist and an address that is not one", async () => {
    const { browser: inviter } = await owner();
    const role = await inviter.request("POST", "/api/orgs/members/invite", {
      email: uniqueEmail(),
      role: "member",
    });
    expect(role.statusCode).toBe(400);
    expect(role.json().error.message).toContain("owner, admin, approver, auditor");
    const email = await inviter.request("POST", "/api/orgs/members/invite", {
      email: "nobody",
      role: "auditor",
    });
    expect(email.json().error.code).toBe("invalid_email");
  });
});
