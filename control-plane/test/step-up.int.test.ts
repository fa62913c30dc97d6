// Step-up (DECISIONS "Passkeys and single sign-on") through the API, for an operator whose second
// factor is the authenticator: a standing approval by any path (the Inbox's approve, the approval
// code, a collect request's always_allow, connect's standing approval for an agent named or whose
// request it answers) needs a
// verification of the last 5 minutes by the plane's own clock; a one-call approval does not; the
// organisation's standing_approvals_need_passkey makes it a passkey, which no code stands in for.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Browser, type HostedHarness, signInWithEmailCode, signUpOperator, startHosted } from "./hosted.ts";

let h: HostedHarness;

beforeAll(async () => {
  h = await startHosted();
}, 60_000);

afterAll(async () => {
  await h.close();
});

const MINUTE = 60_000;

/** A signed-up operator with one credential stored, and a way to ask for approvals of it. */
async function operatorWithItem() {
  const { browser, totp } = await signUpOperator(h);
  const stored = await browser.request("POST", "/api/items", {
    name: "STEP_KEY",
    value: "sk_step_up_value_0001",
    environment: "staging",
    allowed_hosts: ["api.latch.test"],
  });
  expect(stored.statusCode).toBe(201);
  let asks = 0;
  // Each request from another agent: a standing approval of one would cover the next.
  const ask = async () => {
    asks += 1;
    const asked = await browser.request("POST", "/api/grants/request", {
      item_name: "STEP_KEY",
      agent_id: `agent-${asks}`,
    });
    expect(asked.statusCode, asked.body).toBe(201);
    return asked.json() as { grant: { grant_id: string }; approval_code: string };
  };
  // Each code from a later 30-second step: an accepted step is never accepted again (RFC 6238 5.2).
  const code = () => {
    h.clock.advance(30_000);
    return totp.generate({ timestamp: h.clock.now.getTime() });
  };
  return { browser, ask, code, totp };
}

function expectStepUp(response: Awaited<ReturnType<Browser["request"]>>, methods: string[]) {
  expect(response.statusCode, response.body).toBe(403);
  expect(response.json().error).toMatchObject({ code: "step_up_required", methods });
}

describe("a standing approval", () => {
  it("goes through within 5 minutes of the sign-in's verification, and needs a fresh code after", async () => {
    const { browser, ask, code } = await operatorWithItem();
    const first = await ask();
    h.clock.advance(4 * MINUTE + 59_000);
    const fresh = await browser.request("POST", `/api/grants/${first.grant.grant_id}/approve`, {
      policy: "item_standing",
    });
    expect(fresh.statusCode, fresh.body).toBe(200);

    const second = await ask();
    h.clock.advance(2_000);
    const stale = await browser.request("POST", `/api/grants/${second.grant.grant_id}/approve`, {
      policy: "item_standing",
    });
    expectStepUp(stale, ["totp"]);
    expect(stale.json().error.message).toBe(
      "approving a standing approval needs a verification of the last 5 minutes: enter a code from your authenticator app",
    );
    // Nothing was decided: the request still waits.
    const inbox = (await browser.request("GET", "/api/inbox")).json();
    expect(inbox.approvals.map((g: { grant_id: string }) => g.grant_id)).toContain(second.grant.grant_id);

    // A one-call approval is not what step-up guards.
    const once = await ask();
    expect(
      (await browser.request("POST", `/api/grants/${once.grant.grant_id}/approve`, { policy: "prompt" }))
        .statusCode,
    ).toBe(200);

    // A fresh authenticator code on the ready session is the verification; the retry goes through.
    expect((await browser.request("POST", "/api/auth/totp/verify", { code: code() })).statusCode).toBe(200);
    const retried = await browser.request("POST", `/api/grants/${second.grant.grant_id}/approve`, {
      policy: "item_standing",
    });
    expect(retried.statusCode, retried.body).toBe(200);
    expect(retried.json().grant.status).toBe("active");
  });

  it("needs the step-up by approval code too, and for a collect request's always_allow", async () => {
    const { browser, ask } = await operatorWithItem();
    h.clock.advance(6 * MINUTE);
    const pending = await ask();
    const byCode = await browser.request("POST", "/api/grants/approve-by-code", {
      code: pending.approval_code,
      policy: "item_standing",
    });
    expectStepUp(byCode, ["totp"]);
    // The code was not spent by the refusal: a one-call approval with it still works.
    const once = await browser.request("POST", "/api/grants/approve-by-code", {
      code: pending.approval_code,
    });
    expect(once.statusCode, once.body).toBe(200);

    const me = (await browser.request("GET", "/api/auth/me")).json();
    const need = await h.plane.services.needs.requestNeed({
      organisationId: me.organisation.id,
      environment: "staging",
      host: "api.collect.test",
      suggestedName: "COLLECTED_KEY",
      agentId: "agent-x",
    });
    const always = await browser.request("POST", `/api/need-items/${need.need_id}/fulfill`, {
      value: "sk_collected_0001",
      always_allow: true,
    });
    expectStepUp(always, ["totp"]);
    expect((await browser.request("GET", `/api/need-items/${need.need_id}`)).json().need.status).toBe(
      "pending",
    );
    const connect = await browser.request("POST", "/api/integrations/github/start", {
      item_name: "STEP_KEY",
      agent_client_id: "cli_anyagent",
    });
    expectStepUp(connect, ["totp"]);
    // The Inbox's connect card names only the request: its agent gets the standing approval.
    const connectNeed = await h.plane.services.needs.requestNeed({
      organisationId: me.organisation.id,
      environment: "staging",
      host: "api.github.com",
      suggestedName: "STEP_KEY_REFRESH",
      agentId: "agent-connect",
      kind: "connect",
    });
    const byNeed = await browser.request("POST", "/api/integrations/github/start", {
      item_name: "STEP_KEY",
      need_id: connectNeed.need_id,
    });
    expectStepUp(byNeed, ["totp"]);
    // Connecting with nobody to allow is no approval, and needs none.
    const plain = await browser.request("POST", "/api/integrations/github/start", { item_name: "STEP_KEY" });
    expect(plain.statusCode, plain.body).not.toBe(403);
  });

  it("measures the 5 minutes with the plane's clock, and trusts no verification from its future", async () => {
    const { browser, ask } = await operatorWithItem();
    const me = (await browser.request("GET", "/api/auth/me")).json();
    // The database's now() says nothing here: the row says "just now" by the database, 6 minutes
    // ago by the plane.
    h.clock.advance(6 * MINUTE);
    const pending = await ask();
    const refused = await browser.request("POST", `/api/grants/${pending.grant.grant_id}/approve`, {
      policy: "item_standing",
    });
    expectStepUp(refused, ["totp"]);
    // A verification stamped 10 minutes ahead (a clock stepped back since) does not count either.
    await h.plane.database.db
      .updateTable("operator_sessions")
      .set({ verified_at: new Date(h.clock.now.getTime() + 10 * MINUTE) })
      .where("operator_id", "=", (await operatorIdOf(me.email))!)
      .execute();
    expectStepUp(
      await browser.request("POST", `/api/grants/${pending.grant.grant_id}/approve`, {
        policy: "item_standing",
      }),
      ["totp"],
    );
  });
});

async function operatorIdOf(email: string): Promise<string | undefined> {
  const row = await h.plane.database.db
    .selectFrom("operators")
    .select("id")
    .where("email", "=", email)
    .executeTakeFirst();
  return row?.id;
}

describe("members, roles and the organisation's guards", () => {
  it("need the step-up: inviting, changing a role, removing, handing over, the two-person and passkey settings", async () => {
    const { browser, code } = await operatorWithItem();
    const invited = await browser.request("POST", "/api/orgs/members/invite", {
      email: "stepup-invitee@example.test",
      role: "approver",
    });
    expect(invited.statusCode, invited.body).toBe(201);
    h.clock.advance(6 * MINUTE);
    const patch = (body: unknown) => browser.request("PATCH", "/api/orgs/settings", body);
    expectStepUp(
      await browser.request("POST", "/api/orgs/members/invite", {
        email: "later@example.test",
        role: "admin",
      }),
      ["totp"],
    );
    expectStepUp(await browser.request("POST", "/api/orgs/members/opr_x/role", { role: "admin" }), ["totp"]);
    expectStepUp(await browser.request("DELETE", "/api/orgs/members/opr_x"), ["totp"]);
    expectStepUp(await browser.request("POST", "/api/orgs/transfer", { operator_id: "opr_x" }), ["totp"]);
    expectStepUp(await patch({ standing_approvals_need: 2 }), ["totp"]);
    expectStepUp(await patch({ standing_approvals_need_passkey: true }), ["totp"]);
    // A new name guards nothing: no step-up.
    const renamed = await patch({ name: "Step-up org" });
    expect(renamed.statusCode, renamed.body).toBe(200);
    // Withdrawing an invitation only takes access away.
    const withdrawn = await browser.request("DELETE", `/api/orgs/invites/${invited.json().invite.id}`);
    expect(withdrawn.statusCode, withdrawn.body).toBe(200);

    expect((await browser.request("POST", "/api/auth/totp/verify", { code: code() })).statusCode).toBe(200);
    expect((await patch({ standing_approvals_need_passkey: "yes" })).statusCode).toBe(400);
    const guarded = await patch({ standing_approvals_need_passkey: true });
    expect(guarded.statusCode, guarded.body).toBe(200);
    expect(guarded.json().organisation.standing_approvals_need_passkey).toBe(true);
    // Once on, turning it off is itself guarded by a passkey: a phished code cannot undo it.
    expectStepUp(await patch({ standing_approvals_need_passkey: false }), ["passkey"]);
  });
});

describe("the organisation's policies", () => {
  it("need the step-up to be saved; reading and previewing them do not", async () => {
    const { browser, code } = await operatorWithItem();
    const rules = [{ id: "no-admin", name: "No admin", effect: "deny", match: { paths: ["/admin/**"] } }];
    const put = () => browser.request("PUT", "/api/policies", { rules }, { "if-match": "*" });
    expect((await put()).statusCode).toBe(200);
    h.clock.advance(6 * MINUTE);
    expectStepUp(await put(), ["totp"]);
    // Nothing was saved by the refused write.
    const read = await browser.request("GET", "/api/policies");
    expect(read.statusCode).toBe(200);
    expect(read.json().version).toBe(1);
    const preview = await browser.request("POST", "/api/policies/preview", { rules: [] });
    expect(preview.statusCode, preview.body).toBe(200);
    expect((await browser.request("POST", "/api/auth/totp/verify", { code: code() })).statusCode).toBe(200);
    const saved = await put();
    expect(saved.statusCode, saved.body).toBe(200);
    expect(saved.json().version).toBe(2);
  });
});

describe("standing_approvals_need_passkey", () => {
  it("makes the step-up a passkey: a fresh authenticator code no longer stands in for one", async () => {
    const { browser, ask, code } = await operatorWithItem();
    const turnedOn = await browser.request("PATCH", "/api/orgs/settings", {
      standing_approvals_need_passkey: true,
    });
    expect(turnedOn.statusCode, turnedOn.body).toBe(200);
    expect((await browser.request("POST", "/api/auth/totp/verify", { code: code() })).statusCode).toBe(200);
    const pending = await ask();
    const refused = await browser.request("POST", `/api/grants/${pending.grant.grant_id}/approve`, {
      policy: "item_standing",
    });
    expectStepUp(refused, ["passkey"]);
    expect(refused.json().error.message).toBe(
      "approving a standing approval needs a passkey in this organisation; add one under Access, then confirm with it",
    );
    // Adding the passkey is the operator's own account: the organisation's setting has no say, and
    // the fresh code is enough to start it.
    const options = await browser.request("POST", "/api/auth/passkeys/options", {});
    expect(options.statusCode, options.body).toBe(200);
    expect(options.json()).toMatchObject({
      rp: { id: "localhost", name: "Latch" },
      authenticatorSelection: { residentKey: "required", userVerification: "required" },
    });
  });
});

describe("changing how the account signs in", () => {
  it("needs a fresh verification, and never removes the last factor", async () => {
    const { browser, code } = await operatorWithItem();
    h.clock.advance(6 * MINUTE);
    expectStepUp(await browser.request("POST", "/api/auth/passkeys/options", {}), ["totp"]);
    expectStepUp(await browser.request("DELETE", "/api/auth/totp"), ["totp"]);
    // New backup codes too: one phished authenticator code must not mint them.
    expectStepUp(await browser.request("POST", "/api/auth/backup-codes/regenerate", { code: code() }), [
      "totp",
    ]);
    expect((await browser.request("POST", "/api/auth/totp/verify", { code: code() })).statusCode).toBe(200);
    const regenerated = await browser.request("POST", "/api/auth/backup-codes/regenerate", { code: code() });
    expect(regenerated.statusCode, regenerated.body).toBe(200);
    expect(regenerated.json().backup_codes).toHaveLength(10);
    // The authenticator is the only factor: it stays.
    const last = await browser.request("DELETE", "/api/auth/totp");
    expect(last.statusCode).toBe(409);
    expect(last.json().error.code).toBe("last_factor");
    expect((await browser.request("DELETE", "/api/auth/passkeys/pky_unknown")).statusCode).toBe(404);
    // No passkey yet: the second step has nothing to offer but the code.
    expect((await browser.request("POST", "/api/auth/passkey/options", {})).statusCode).toBe(404);
  });

  it("takes, for new backup codes, the code this session's step-up spent a moment ago, and no other spent code", async () => {
    const { browser, code, totp } = await operatorWithItem();
    const regenerate = (typed: string) =>
      browser.request("POST", "/api/auth/backup-codes/regenerate", { code: typed });
    h.clock.advance(6 * MINUTE);
    // The console's order: the form's code is refused for the step-up first, the operator steps
    // up with the code on the screen, and the form is sent again with the code it holds: the same.
    const typed = code();
    expectStepUp(await regenerate(typed), ["totp"]);
    expect((await browser.request("POST", "/api/auth/totp/verify", { code: typed })).statusCode).toBe(200);
    const regenerated = await regenerate(typed);
    expect(regenerated.statusCode, regenerated.body).toBe(200);
    expect(regenerated.json().backup_codes).toHaveLength(10);

    // A code spent before the step-up's (an earlier step) is not the step-up's: refused.
    const earlier = totp.generate({ timestamp: h.clock.now.getTime() - 30_000 });
    const refused = await regenerate(earlier);
    expect(refused.statusCode).toBe(401);
    expect(refused.json().error.code).toBe("totp_invalid");

    // A minute on, the step-up's code is past: a fresh one works, the old one does not.
    h.clock.advance(61_000);
    expect((await regenerate(typed)).json().error?.code).toBe("totp_invalid");
    expect((await regenerate(code())).statusCode).toBe(200);
  });

  it("does not take, for new backup codes, a code another session spent, nor after a step-up made with a backup code", async () => {
    const { browser, email, totp } = await signUpOperator(h);
    const code = () => {
      h.clock.advance(30_000);
      return totp.generate({ timestamp: h.clock.now.getTime() });
    };
    h.clock.advance(6 * MINUTE);
    expect((await browser.request("POST", "/api/auth/totp/verify", { code: code() })).statusCode).toBe(200);
    const fresh = await browser.request("POST", "/api/auth/backup-codes/regenerate", { code: code() });
    expect(fresh.statusCode, fresh.body).toBe(200);
    const backupCode = fresh.json().backup_codes[0] as string;

    // An attacker holding the address and one backup code: signed in, stepped up with it.
    const attacker = await signInWithEmailCode(h, new Browser(h.app), email);
    const stepped = await attacker.request("POST", "/api/auth/totp/verify", { code: backupCode });
    expect(stepped.json()).toMatchObject({ used_backup_code: true });
    // The owner verifies elsewhere with the code on their phone; the attacker sees it and sends it.
    const seen = code();
    expect((await browser.request("POST", "/api/auth/totp/verify", { code: seen })).statusCode).toBe(200);
    // A backup code is no step-up (step-up.ts): refused before the code is read.
    const refused = await attacker.request("POST", "/api/auth/backup-codes/regenerate", { code: seen });
    expectStepUp(refused, ["totp"]);
    // The session that spent it may: the form behind its own step-up.
    expect(
      (await browser.request("POST", "/api/auth/backup-codes/regenerate", { code: seen })).statusCode,
    ).toBe(200);
  });

  it("starts at most 30 passkey sign-ins from one address in 15 minutes", async () => {
    const address = `10.${[1, 2, 3].map(() => Math.floor(Math.random() * 250) + 1).join(".")}`;
    const browser = new Browser(h.app, "http://localhost:8787", address);
    for (let i = 0; i < 30; i++) {
      expect((await browser.request("POST", "/api/auth/passkey/sign-in/options", {})).statusCode).toBe(200);
    }
    const over = await browser.request("POST", "/api/auth/passkey/sign-in/options", {});
    expect(over.statusCode).toBe(429);
    expect(over.json().error.code).toBe("rate_limited");
    expect(Number(over.headers["retry-after"])).toBeGreaterThan(0);
  });

  it("refuses a passkey sign-in answer without this browser's ceremony cookie, or not shaped as one", async () => {
    const { browser } = await operatorWithItem();
    const answer = await browser.request("POST", "/api/auth/passkey/sign-in", {
      response: { id: "x".repeat(20) },
    });
    expect(answer.statusCode).toBe(401);
    expect(answer.json().error.code).toBe("passkey_invalid");
    await browser.request("POST", "/api/auth/passkey/sign-in/options", {});
    const shapeless = await browser.request("POST", "/api/auth/passkey/sign-in", { response: { id: 5 } });
    expect(shapeless.statusCode).toBe(400);
    const notObject = await browser.request("POST", "/api/auth/passkey/sign-in", { response: "abc" });
    expect(notObject.statusCode).toBe(400);
  });
});
