// "Require SSO" reaches the agents a member connected (DECISIONS "Passkeys and single sign-on": an
// organisation may require SSO for members whose address is in its domains). A grant keeps how its
// consenting session signed in; once the organisation requires its single sign-on of the member's
// address, a grant given in an email-code session refreshes no more (invalid_grant, the grant ended
// and recorded) and its access tokens stop at /mcp, while a grant given in a session begun with that
// sign-on keeps refreshing, and one in an organisation that does not require it is unaffected. A
// grant that recorded no sign-in (given before it was recorded) counts as not signed in with SSO.
import * as OTPAuth from "otpauth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Browser, type HostedHarness, signInWithEmailCode } from "../hosted.ts";
import { IDP_HOST, IDP_ISSUER, IdpBrowser, type TestIdp } from "../oidc-idp.ts";
import { type SsoRig, startSsoRig } from "../sso-rig.ts";
import { lastInviteTokenFor } from "../teams.ts";
import { approveAndExchange, BASE, mcpWith, RESOURCE, register, token } from "./oauth-flow.ts";

/** A domain of this run's own: the database may hold other runs' connections. */
const DOMAIN = `corp-${Math.random().toString(16).slice(2, 8)}.latch.test`;
const REDIRECT = "http://127.0.0.1:33418/callback";

let rig: SsoRig | undefined;
let h: HostedHarness;
let idp: TestIdp;
let owner: Browser;
let organisationId: string;

beforeAll(async () => {
  rig = await startSsoRig({ baseUrl: BASE, label: "sso-grants-owner", domain: DOMAIN });
  ({ h, idp, owner, organisationId } = rig);
}, 120_000);

afterAll(async () => {
  await rig?.close();
});

const corpEmail = (label: string) => `${label}-${Math.random().toString(16).slice(2, 10)}@${DOMAIN}`;

const refresh = (clientId: string, refreshToken: string) =>
  token(h.app, {
    grant_type: "refresh_token",
    refresh_token: refreshToken,
    client_id: clientId,
    resource: RESOURCE,
  });

/** The owner turns "Require SSO" on or off (a step-up first: the SSO connection asks for one). */
async function requireSso(on: boolean) {
  h.clock.advance(30_000);
  const verified = await owner.request("POST", "/api/auth/totp/verify", {
    code: rig!.ownerTotp.generate({ timestamp: h.clock.now.getTime() }),
  });
  expect(verified.statusCode, verified.body).toBe(200);
  const changed = await owner.request("PUT", "/api/orgs/sso", {
    issuer: IDP_ISSUER,
    client_id: idp.clientId,
    email_domains: [DOMAIN],
    require_sso: on,
  });
  expect(changed.statusCode, changed.body).toBe(200);
}

/** A member of the domain, invited as admin (who may connect agents), in with the email code. */
async function emailCodeMember() {
  const email = corpEmail("member");
  const invited = await owner.request("POST", "/api/orgs/members/invite", { email, role: "admin" });
  expect(invited.statusCode, invited.body).toBe(201);
  const inviteToken = lastInviteTokenFor(h.inbox, email);
  const browser = await signInWithEmailCode(h, new Browser(h.app, BASE), email);
  const started = (await browser.request("POST", "/api/auth/totp/start", {})).json();
  const totp = OTPAuth.URI.parse(started.otpauth_url) as OTPAuth.TOTP;
  const confirmed = await browser.request("POST", "/api/auth/totp/confirm", {
    code: totp.generate({ timestamp: h.clock.now.getTime() }),
  });
  expect(confirmed.statusCode, confirmed.body).toBe(200);
  const joined = await browser.request("POST", "/invite", { token: inviteToken });
  expect(joined.statusCode, joined.body).toBe(200);
  return { email, browser };
}

/** A new browser signed in as `email` through the organisation's provider. */
async function ssoSession(email: string): Promise<Browser> {
  const browser = new Browser(h.app, BASE);
  const started = await browser.request("GET", `/sso/${rig!.slug}`);
  expect(started.statusCode, started.body).toBe(302);
  const authorize = new URL(String(started.headers.location));
  expect(authorize.host).toBe(IDP_HOST);
  idp.signInAs({ sub: `sub-${email}`, email, email_verified: true });
  const callback = await new IdpBrowser(idp).walk(authorize.href);
  const answer = await browser.request("GET", `${callback.pathname}${callback.search}`);
  expect(answer.statusCode, answer.body).toBe(303);
  expect((await browser.request("GET", "/api/auth/me")).json().signed_in_with_sso).toBe(true);
  return browser;
}

async function registerClient(name: string): Promise<string> {
  const registered = await register(h.app, { client_name: name, redirect_uris: [REDIRECT] });
  expect(registered.statusCode, registered.body).toBe(201);
  return registered.json().client_id as string;
}

/** Refreshes `tokens` and checks the new access token acts at /mcp; answers the new tokens. */
async function refreshesAndActs(clientId: string, tokens: { refresh_token: string }) {
  const refreshed = await refresh(clientId, tokens.refresh_token);
  expect(refreshed.statusCode, refreshed.body).toBe(200);
  const next = refreshed.json() as { access_token: string; refresh_token: string };
  expect((await mcpWith(h.app, next.access_token)).statusCode).toBe(200);
  return next;
}

describe("an OAuth grant when the organisation comes to require its single sign-on", () => {
  it("ends the email-code consent's, keeps the SSO consent's and those of organisations that do not require it", async () => {
    await requireSso(false);
    const member = await emailCodeMember();
    const clientId = await registerClient("Member's agent");
    const byEmailCode = await approveAndExchange(member.browser, h.app, {
      clientId,
      redirectUri: REDIRECT,
      organisationId,
    });
    const bySso = await approveAndExchange(await ssoSession(member.email), h.app, {
      clientId,
      redirectUri: REDIRECT,
      organisationId,
    });
    // The member's own organisation, which has no single sign-on, from the email-code session.
    const created = await member.browser.request("POST", "/api/orgs", { name: "Member's own" });
    expect(created.statusCode, created.body).toBe(201);
    const elsewhere = await approveAndExchange(member.browser, h.app, {
      clientId,
      redirectUri: REDIRECT,
      organisationId: created.json().organisation.id as string,
    });
    // The owner's address is not of the domain: Require SSO asks nothing of them.
    const ownerClientId = await registerClient("Owner's agent");
    const byOwner = await approveAndExchange(owner, h.app, {
      clientId: ownerClientId,
      redirectUri: REDIRECT,
      organisationId,
    });
    // Before Require SSO, the email-code consent refreshes like any other.
    const emailTokens = await refreshesAndActs(clientId, byEmailCode.tokens);
    const issued = await refresh(clientId, emailTokens.refresh_token);
    expect(issued.statusCode, issued.body).toBe(200);
    const live = issued.json() as { access_token: string; refresh_token: string };

    await requireSso(true);

    // The email-code consent: its access token stops at /mcp, its refresh is invalid_grant.
    expect((await mcpWith(h.app, live.access_token)).statusCode).toBe(401);
    const refused = await refresh(clientId, live.refresh_token);
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json().error).toBe("invalid_grant");
    const grantId = JSON.parse(Buffer.from(live.access_token.split(".")[1]!, "base64url").toString())
      .grant_id as string;
    const { db } = h.plane.database;
    const consent = await db
      .selectFrom("oauth_consents")
      .select("revoked_at")
      .where("grant_id", "=", grantId)
      .executeTakeFirstOrThrow();
    expect(consent.revoked_at).not.toBeNull();
    expect(
      await db.selectFrom("oauth_artifacts").select("model").where("grant_id", "=", grantId).execute(),
    ).toEqual([]);
    const events = (await owner.request("GET", "/api/audit?action=oauth_grant_revoked")).json().events as {
      detail?: { reason?: string };
    }[];
    expect(events.some((e) => e.detail?.reason === "sso_required")).toBe(true);

    // The consent given in the session begun with the organisation's sign-on keeps refreshing.
    const ssoTokens = await refreshesAndActs(clientId, bySso.tokens);
    await refreshesAndActs(clientId, ssoTokens);
    // The organisation that does not require it, and the owner whose address it does not cover.
    await refreshesAndActs(clientId, elsewhere.tokens);
    await refreshesAndActs(ownerClientId, byOwner.tokens);
  }, 60_000);

  it("counts a grant that recorded no sign-in as not signed in with it", async () => {
    await requireSso(false);
    const member = await emailCodeMember();
    const clientId = await registerClient("Older agent");
    const bySso = await approveAndExchange(await ssoSession(member.email), h.app, {
      clientId,
      redirectUri: REDIRECT,
      organisationId,
    });
    const grantId = JSON.parse(Buffer.from(bySso.tokens.access_token.split(".")[1]!, "base64url").toString())
      .grant_id as string;
    // As a grant given before the sign-in was recorded with it.
    const { db } = h.plane.database;
    await db
      .deleteFrom("oauth_artifacts")
      .where("model", "=", "GrantSignIn")
      .where("grant_id", "=", grantId)
      .execute();
    const tokens = await refreshesAndActs(clientId, bySso.tokens);

    await requireSso(true);
    expect((await mcpWith(h.app, tokens.access_token)).statusCode).toBe(401);
    const refused = await refresh(clientId, tokens.refresh_token);
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json().error).toBe("invalid_grant");
  }, 60_000);
});
