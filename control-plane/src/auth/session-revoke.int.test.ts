// Ending one's own other sessions one at a time (POST /api/sessions/:id/revoke) asks for the same
// fresh step-up as ending them all at once (POST /api/sessions/revoke-others): a session that only
// signed in with the mailbox and a backup code signs the owner out of neither, in any organisation.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Browser,
  type HostedHarness,
  signInWithEmailCode,
  signUpOperator,
  startHosted,
} from "../../test/hosted.ts";

let h: HostedHarness;

beforeAll(async () => {
  h = await startHosted();
}, 60_000);

afterAll(async () => {
  await h.close();
});

const MINUTE = 60_000;

type Answer = Awaited<ReturnType<Browser["request"]>>;

function expectStepUp(response: Answer) {
  expect(response.statusCode, response.body).toBe(403);
  expect(response.json().error).toMatchObject({ code: "step_up_required", methods: ["totp"] });
}

describe("revoking one's own other session", () => {
  it("needs a fresh step-up, which a backup-code sign-in is not", async () => {
    const { browser: owner, email, totp } = await signUpOperator(h, { label: "revoke-one" });
    h.clock.advance(30_000);
    const made = await owner.request("POST", "/api/auth/backup-codes/regenerate", {
      code: totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(made.statusCode, made.body).toBe(200);
    const backupCodes = made.json().backup_codes as string[];
    // The owner also works in a second organisation, where this session now acts.
    expect((await owner.request("POST", "/api/orgs", { name: "Second" })).statusCode).toBe(201);
    h.clock.advance(10 * MINUTE);

    // Someone with the mailbox and one backup code: signed in, in the default organisation.
    const attacker = await signInWithEmailCode(h, new Browser(h.app), email);
    const signedIn = await attacker.request("POST", "/api/auth/totp/verify", { code: backupCodes[0] });
    expect(signedIn.json()).toMatchObject({ used_backup_code: true });
    expectStepUp(await attacker.request("POST", "/api/sessions/revoke-others"));

    // The owner's session, reached one at a time from its organisation: refused alike.
    const me = (await owner.request("GET", "/api/auth/me")).json();
    const second = me.organisation.id as string;
    expect((await attacker.request("POST", "/api/orgs/switch", { organisation_id: second })).statusCode).toBe(
      200,
    );
    const listed = (await attacker.request("GET", "/api/access")).json().sessions as {
      session_id: string;
      current: boolean;
    }[];
    const ownersSession = listed.find((s) => !s.current)!;
    expect(ownersSession).toBeDefined();
    expectStepUp(await attacker.request("POST", `/api/sessions/${ownersSession.session_id}/revoke`));
    expect((await owner.request("GET", "/api/auth/me")).statusCode).toBe(200);

    // The owner, stepped up with a live code, ends the other session; the current one stays 400.
    h.clock.advance(30_000);
    const stepped = await owner.request("POST", "/api/auth/totp/verify", {
      code: totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(stepped.statusCode, stepped.body).toBe(200);
    const ownerListed = (await owner.request("GET", "/api/access")).json().sessions as {
      session_id: string;
      current: boolean;
    }[];
    const current = ownerListed.find((s) => s.current)!;
    const self = await owner.request("POST", `/api/sessions/${current.session_id}/revoke`);
    expect(self.json().error.code).toBe("cannot_revoke_current");
    const attackers = ownerListed.find((s) => !s.current)!;
    const ended = await owner.request("POST", `/api/sessions/${attackers.session_id}/revoke`);
    expect(ended.statusCode, ended.body).toBe(200);
    expect((await attacker.request("GET", "/api/auth/me")).statusCode).toBe(401);
    // An unknown id is still 404, asking for nothing.
    h.clock.advance(10 * MINUTE);
    expect((await owner.request("POST", "/api/sessions/ses_notmine/revoke")).statusCode).toBe(404);
  });
});
