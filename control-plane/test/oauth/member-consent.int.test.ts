// A removed member's OAuth consent never mints another token (DECISIONS "Teams": removing a member
// destroys the OAuth grants they gave there). The removal's own clean-up ends them; these tests take
// the membership away without it (as a consent recorded while the removal committed, or a clean-up
// that failed, would leave things) and check that the token endpoint judges the membership itself:
// the code and the refresh are invalid_grant, the grant ends, and being invited back does not bring
// it back, while a consent given in the new membership works.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabase } from "../database.ts";
import { type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import { joinAs, type Member } from "../teams.ts";
import {
  approveAndExchange,
  authorizeAndConsent,
  mcpWith,
  pkcePair,
  RESOURCE,
  register,
  token,
} from "./oauth-flow.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

const REDIRECT = "http://127.0.0.1:33418/callback";

const mcp = (accessToken: string, method?: string) => mcpWith(h.app, accessToken, method);

/** An owner's organisation with an admin in it, and an OAuth client registered. */
async function adminWithClient() {
  const owner = await readyOperator(h, "owner");
  const organisationId = (await owner.request("GET", "/api/auth/me")).json().organisation.id as string;
  const admin = await joinAs(h, owner, "admin");
  const registered = await register(h.app, { client_name: "Admin's agent", redirect_uris: [REDIRECT] });
  return { owner, admin, organisationId, clientId: registered.json().client_id as string };
}

/** The membership gone without the removal's clean-up (the race, or a clean-up that failed). */
async function dropMembership(organisationId: string, member: Member) {
  const { db } = await testDatabase();
  await db
    .deleteFrom("memberships")
    .where("organisation_id", "=", organisationId)
    .where("operator_id", "=", member.operatorId)
    .execute();
}

const refresh = (clientId: string, refreshToken: string) =>
  token(h.app, {
    grant_type: "refresh_token",
    refresh_token: refreshToken,
    client_id: clientId,
    resource: RESOURCE,
  });

describe("a consent whose member is gone", () => {
  it("refreshes no more: invalid_grant, and the grant ended and recorded", async () => {
    const { owner, admin, organisationId, clientId } = await adminWithClient();
    const { tokens } = await approveAndExchange(admin.browser, h.app, {
      clientId,
      redirectUri: REDIRECT,
      organisationId,
    });
    expect((await mcp(tokens.access_token)).statusCode).toBe(200);

    await dropMembership(organisationId, admin);
    const refused = await refresh(clientId, tokens.refresh_token);
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json().error).toBe("invalid_grant");
    const { db } = await testDatabase();
    const consents = await db
      .selectFrom("oauth_consents")
      .select(["grant_id", "revoked_at"])
      .where("operator_id", "=", admin.operatorId)
      .execute();
    expect(consents).toHaveLength(1);
    expect(consents[0]!.revoked_at).not.toBeNull();
    const artifacts = await db
      .selectFrom("oauth_artifacts")
      .select("model")
      .where("grant_id", "=", consents[0]!.grant_id)
      .execute();
    expect(artifacts).toEqual([]);
    const events = (await owner.request("GET", "/api/audit?action=oauth_grant_revoked")).json().events as {
      detail?: { reason?: string; operator_id?: string };
    }[];
    expect(
      events.some((e) => e.detail?.reason === "member_removed" && e.detail.operator_id === admin.operatorId),
    ).toBe(true);

    // The member's refresh tokens are gone with the grant.
    expect((await refresh(clientId, tokens.refresh_token)).json().error).toBe("invalid_grant");
  });

  it("invited back before any refresh, the old consent is not the new membership's", async () => {
    const { admin, organisationId, clientId } = await adminWithClient();
    const old = await approveAndExchange(admin.browser, h.app, {
      clientId,
      redirectUri: REDIRECT,
      organisationId,
    });
    await dropMembership(organisationId, admin);
    // Back in the organisation a minute later (as an invitation accepted again would make it).
    h.clock.advance(60_000);
    const { db } = await testDatabase();
    await db
      .insertInto("memberships")
      .values({
        organisation_id: organisationId,
        operator_id: admin.operatorId,
        role: "admin",
        created_at: h.clock.now,
      })
      .execute();
    expect((await mcp(old.tokens.access_token)).statusCode).toBe(401);
    const refused = await refresh(clientId, old.tokens.refresh_token);
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json().error).toBe("invalid_grant");

    // A consent given in the new membership mints and refreshes.
    const fresh = await approveAndExchange(admin.browser, h.app, {
      clientId,
      redirectUri: REDIRECT,
      organisationId,
    });
    expect((await mcp(fresh.tokens.access_token)).statusCode).toBe(200);
    const refreshed = await refresh(clientId, fresh.tokens.refresh_token);
    expect(refreshed.statusCode, refreshed.body).toBe(200);
  });

  it("exchanges no code given just before the removal", async () => {
    const { admin, organisationId, clientId } = await adminWithClient();
    const pkce = pkcePair();
    const { code } = await authorizeAndConsent(admin.browser, {
      clientId,
      redirectUri: REDIRECT,
      challenge: pkce.challenge,
      organisationId,
    });
    await dropMembership(organisationId, admin);
    const exchanged = await token(h.app, {
      grant_type: "authorization_code",
      code: code!,
      redirect_uri: REDIRECT,
      client_id: clientId,
      code_verifier: pkce.verifier,
      resource: RESOURCE,
    });
    expect(exchanged.statusCode, exchanged.body).toBe(400);
    expect(exchanged.json().error).toBe("invalid_grant");
  });

  it("removed through the members route, refreshes no more", async () => {
    const { owner, admin, organisationId, clientId } = await adminWithClient();
    const { tokens } = await approveAndExchange(admin.browser, h.app, {
      clientId,
      redirectUri: REDIRECT,
      organisationId,
    });
    const removed = await owner.request("DELETE", `/api/orgs/members/${admin.operatorId}`);
    expect(removed.statusCode, removed.body).toBe(200);
    expect((await refresh(clientId, tokens.refresh_token)).json().error).toBe("invalid_grant");
  });
});
