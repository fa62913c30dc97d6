// A member removed from the organisation (or leaving it) loses the trusted clients (avt_) whose
// bearer they were shown, issued or last rotated: each is revoked, audited `client_revoked` with
// reason `member_removed` and the remover as actor. A trusted client another member rotated since
// is theirs now and stays; model clients (avm_) stay too, since each of their calls still needs an
// approval and revoking them would stop the organisation's agents.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, startHosted } from "./hosted.ts";
import { type Member, startTeam } from "./teams.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

const SECRET = "team-member-removed-0001";

/** A fresh authenticator code on the member's session: the step-up of what follows. */
async function stepUp(member: Member) {
  h.clock.advance(30_000);
  const code = member.totp.generate({ timestamp: h.clock.now.getTime() });
  const verified = await member.browser.request("POST", "/api/auth/totp/verify", { code });
  expect(verified.statusCode, verified.body).toBe(200);
}

async function issue(member: Member, kind: "model" | "trusted", name: string) {
  const issued = await member.browser.request("POST", `/api/clients/${kind}`, { name });
  expect(issued.statusCode, issued.body).toBe(201);
  return issued.json() as { client_id: string; token: string };
}

async function resolve(token: string) {
  return h.app.inject({
    method: "POST",
    url: "/runtime/resolve",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    payload: JSON.stringify({ item_name: "API_KEY" }),
  });
}

/** The organisation's client_revoked rows: actor and detail. */
async function revokedRows(organisationId: string) {
  return h.plane.database.db
    .selectFrom("audit_events")
    .select(["actor", "detail"])
    .where("organisation_id", "=", organisationId)
    .where("action", "=", "client_revoked")
    .orderBy("seq")
    .execute();
}

describe("removing a member", () => {
  it("revokes the trusted clients they hold, audited with the remover; model clients and others' stay", async () => {
    const team = await startTeam(h, SECRET);
    await stepUp(team.admin);
    const held = await issue(team.admin, "trusted", "admin's runtime");
    const handedOver = await issue(team.admin, "trusted", "runtime rotated by the owner");
    const model = await issue(team.admin, "model", "admin's agent");
    await stepUp(team.owner);
    const owners = await issue(team.owner, "trusted", "owner's runtime");
    const rotated = await team.owner.browser.request("POST", `/api/clients/${handedOver.client_id}/rotate`);
    expect(rotated.statusCode, rotated.body).toBe(200);
    const handedOverToken = rotated.json().token as string;
    expect((await resolve(held.token)).json().value).toBe(SECRET);

    const removed = await team.owner.browser.request("DELETE", `/api/orgs/members/${team.admin.operatorId}`);
    expect(removed.statusCode, removed.body).toBe(200);

    const refused = await resolve(held.token);
    expect(refused.statusCode, refused.body).toBe(401);
    expect((await resolve(handedOverToken)).statusCode).toBe(200);
    expect((await resolve(owners.token)).statusCode).toBe(200);
    expect((await h.plane.services.clients.authenticate(model.token))?.id).toBe(model.client_id);

    expect(await revokedRows(team.organisationId)).toEqual([
      {
        actor: `operator:${team.owner.operatorId}`,
        detail: { client_id: held.client_id, reason: "member_removed" },
      },
    ]);
  });

  it("revokes those of a member who leaves, with themselves as actor", async () => {
    const team = await startTeam(h, SECRET);
    await stepUp(team.admin);
    const held = await issue(team.admin, "trusted", "admin's runtime");
    const left = await team.admin.browser.request("POST", "/api/orgs/leave");
    expect(left.statusCode, left.body).toBe(200);
    expect((await resolve(held.token)).statusCode).toBe(401);
    expect(await revokedRows(team.organisationId)).toEqual([
      {
        actor: `operator:${team.admin.operatorId}`,
        detail: { client_id: held.client_id, reason: "member_removed" },
      },
    ]);
  });
});
