// The invitation page (GET /invite) shows an organisation's name, written by whoever owns it, as the
// invitation mail does (mail/mail-text.ts oneLine): the direction overrides, isolates and
// zero-width characters that would make it read as another name are shown as U+FFFD, so the page
// and the mail say the same words.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, signUpOperator, startHosted } from "./hosted.ts";
import { lastInviteTokenFor } from "./teams.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

/** "Pay" + RIGHT-TO-LEFT OVERRIDE + "lapyap" reads "Paypaypal"; a zero-width space after "Inc". */
const SPOOFING = "Pay\u202Elapyap Inc\u200B";
const INVISIBLE = /[\u202A-\u202E\u2066-\u2069\u200B-\u200F\uFEFF]/;

describe("the invitation page", () => {
  it("shows the organisation's name with its invisible characters as U+FFFD, signed out and signed in", async () => {
    const { browser: owner } = await signUpOperator(h, { label: "owner" });
    const renamed = await owner.request("PATCH", "/api/orgs/settings", { name: SPOOFING });
    expect(renamed.statusCode, renamed.body).toBe(200);
    const invitee = await signUpOperator(h, { label: "invitee" });
    const sent = await owner.request("POST", "/api/orgs/members/invite", {
      email: invitee.email,
      role: "approver",
    });
    expect(sent.statusCode, sent.body).toBe(201);
    const token = lastInviteTokenFor(h.inbox, invitee.email);

    const signedOut = await h.app.inject({ method: "GET", url: `/invite?token=${token}` });
    expect(signedOut.statusCode).toBe(200);
    expect(signedOut.body).not.toMatch(INVISIBLE);
    expect(signedOut.body).toContain("Pay\uFFFDlapyap Inc\uFFFD");

    const signedIn = await invitee.browser.request("GET", `/invite?token=${token}`);
    expect(signedIn.statusCode).toBe(200);
    expect(signedIn.body).toContain("Join");
    expect(signedIn.body).not.toMatch(INVISIBLE);
    expect(signedIn.body).toContain("Pay\uFFFDlapyap Inc\uFFFD");

    // Joining still works, and names the organisation as it is stored.
    const joined = await invitee.browser.request("POST", "/invite", { token });
    expect(joined.statusCode, joined.body).toBe(200);
    expect(joined.json().organisation.name).toBe(SPOOFING);
  });
});
