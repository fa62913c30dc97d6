// Single sign-on against a real OpenID provider (oidc-provider, oidc-idp.ts) on a loopback TLS
// origin, reached only through the egress proxy (EGRESS_CONNECT_TO): an owner connects it, a new
// address of a listed domain joins as auditor and lands in the organisation, the token request
// arrives from the proxy with the client secret the control plane never held, and every spoiled
// ID token (nonce, audience, issuer, expiry, no signature, a key the provider never published, HMAC
// keyed by the client secret), an unverified, foreign or lookalike address, a state from another
// browser, made up or used twice (login CSRF included), a provider that hangs, and an account the
// provider did not make are refused; sign-ins started and look-ups are limited per address. With SSO required, the email-code sign-in of a member of those
// domains is refused with a sentence naming the SSO address.
import { randomBytes } from "node:crypto";
import * as OTPAuth from "otpauth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSsoRepo } from "../src/sso/sso.repo.ts";
import { refuseAuditRows } from "./database.ts";
import {
  Browser,
  type HostedHarness,
  lastCodeFor,
  signInWithEmailCode,
  signUpOperator,
  uniqueEmail,
} from "./hosted.ts";
import { consentUid, openAuthorize, register } from "./oauth/oauth-flow.ts";
import { IDP_HOST, IDP_ISSUER, IdpBrowser, type IdTokenTamper, type TestIdp } from "./oidc-idp.ts";
import { openEventStream } from "./sse.ts";
import { type SsoRig, startSsoRig } from "./sso-rig.ts";
import { lastInviteTokenFor } from "./teams.ts";

const BASE = "http://localhost:8787";
/** A domain of this run's own: the database may hold other runs' connections (an address is routed by its domain). */
const DOMAIN = `corp-${Math.random().toString(16).slice(2, 8)}.latch.test`;

let idp: TestIdp;
let h: HostedHarness;
let owner: Browser;
let ownerTotp: { generate(options: { timestamp: number }): string };
let slug: string;
let organisationId: string;
let rig: SsoRig | undefined;

beforeAll(async () => {
  rig = await startSsoRig({ baseUrl: BASE, label: "sso-owner", domain: DOMAIN });
  ({ idp, h, owner, ownerTotp, slug, organisationId } = rig);
}, 120_000);

afterAll(async () => {
  await rig?.close();
});

/**
 * A browser from this run's own address: sign-ins started are counted per address, and the
 * database (PostgreSQL) keeps other runs' counts for 15 minutes.
 */
const RUN_ADDRESS = `10.${[1, 2, 3].map(() => Math.floor(Math.random() * 250) + 1).join(".")}`;
const newBrowser = () => new Browser(h.app, BASE, RUN_ADDRESS);

const corpEmail = (label: string) => `${label}-${Math.random().toString(16).slice(2, 10)}@${DOMAIN}`;

/** A browser's sign-in through the provider as `email`; answers Latch's answer to the callback. */
async function signInWithSso(
  browser: Browser,
  email: string,
  options: {
    tamper?: IdTokenTamper;
    emailVerified?: boolean | string;
    query?: string;
    /** Another organisation's sign-in address than this file's. */
    slug?: string;
  } = {},
) {
  const started = await browser.request("GET", `/sso/${options.slug ?? slug}${options.query ?? ""}`);
  expect(started.statusCode, started.body).toBe(302);
  const authorize = new URL(String(started.headers.location));
  expect(authorize.host).toBe(IDP_HOST);
  idp.signInAs({ sub: `sub-${email}`, email, email_verified: options.emailVerified ?? true });
  if (options.tamper) idp.tamperNext(options.tamper);
  const callback = await new IdpBrowser(idp).walk(authorize.href);
  expect(callback.origin).toBe(BASE);
  return { callback, answer: await browser.request("GET", `${callback.pathname}${callback.search}`) };
}

describe("signing in with the organisation's provider", () => {
  it("makes a new address of a listed domain a member as auditor, and lands it in the organisation", async () => {
    const browser = newBrowser();
    const email = corpEmail("newcomer");
    const { answer } = await signInWithSso(browser, email);
    expect(answer.statusCode, answer.body).toBe(303);
    expect(answer.headers.location).toBe("/console");
    const me = (await browser.request("GET", "/api/auth/me")).json();
    expect(me).toMatchObject({
      email,
      session_ready: true,
      signed_in_with_sso: true,
      organisation: { id: organisationId, slug, role: "auditor" },
    });
    // An auditor reads; approving is not theirs.
    expect((await browser.request("GET", "/api/items")).statusCode).toBe(200);
    const members = (await owner.request("GET", "/api/orgs/members")).json().members;
    expect(members).toContainEqual(expect.objectContaining({ email, role: "auditor" }));
    const joined = (await owner.request("GET", "/api/audit?action=member_joined")).json().events;
    expect(joined.some((e: { detail?: { via?: string } }) => e.detail?.via === "sso")).toBe(true);

    // The same address again: the same account, no second membership.
    const again = await signInWithSso(newBrowser(), email);
    expect(again.answer.statusCode).toBe(303);
    const after = (await owner.request("GET", "/api/orgs/members")).json().members;
    expect(after.filter((m: { email: string }) => m.email === email)).toHaveLength(1);
  });

  it("sends every request to the provider through the egress proxy, the token request with a secret the control plane never held", async () => {
    const before = idp.requests.length;
    await signInWithSso(newBrowser(), corpEmail("proxy"));
    const token = idp.requests.slice(before).find((r) => r.method === "POST" && r.path === "/token");
    expect(token).toBeDefined();
    const basic = Buffer.from(
      String(token!.headers.authorization).replace(/^Basic /, ""),
      "base64",
    ).toString();
    expect(basic).toBe(`${idp.clientId}:${idp.clientSecret}`);
    const form = new URLSearchParams(token!.body);
    expect(form.get("grant_type")).toBe("authorization_code");
    expect(form.get("redirect_uri")).toBe(`${BASE}/sso/callback`);
    // PKCE: the verifier, sealed to the proxy until it sent it here.
    expect(form.get("code_verifier")).toMatch(/^[A-Za-z0-9_-]{43,128}$/);
    // The proxy logged the token call and the documents; the control plane stores the secret sealed
    // and never wrote it (nor the verifier) anywhere.
    const proxyLines = h.egress.logs.text();
    expect(proxyLines).toMatch(new RegExp(`"host":"${IDP_HOST}","method":"POST"`));
    expect(proxyLines).toMatch(new RegExp(`"host":"${IDP_HOST}","status":200,"document":true`));
    const row = await h.plane.database.db
      .selectFrom("sso_connections")
      .select(["sealed_client_secret", "client_secret_last4"])
      .where("organisation_id", "=", organisationId)
      .executeTakeFirstOrThrow();
    expect(Buffer.from(row.sealed_client_secret).toString("latin1")).not.toContain(idp.clientSecret);
    expect(row.client_secret_last4).toBe(idp.clientSecret.slice(-4));
    expect(h.logs.text()).not.toContain(idp.clientSecret);
    expect(h.logs.text()).not.toContain(form.get("code_verifier"));
    expect(JSON.stringify((await owner.request("GET", "/api/orgs/sso")).json())).not.toContain(
      idp.clientSecret,
    );
  });

  it.each<[IdTokenTamper, RegExp]>([
    ["nonce", /nonce/],
    ["aud", /aud/],
    ["iss", /iss/],
    ["expired", /exp/],
    ["unsigned", /alg|signature|none/i],
    ["foreign_key", /signature/],
    // Signed with HMAC keyed by the client secret: a forgery anyone holding the secret could make.
    ["client_secret_hmac", /alg|signature/i],
  ])("refuses an ID token with a wrong %s", async (tamper, reason) => {
    const browser = newBrowser();
    const email = corpEmail(`spoiled-${tamper}`);
    const { answer } = await signInWithSso(browser, email, { tamper });
    expect(answer.statusCode).toBe(401);
    expect(answer.headers["content-type"]).toMatch(/^text\/html/);
    expect(answer.body).toContain("Single sign-on did not finish");
    const sentence = /<p id="sentence">([^<]*)</.exec(answer.body)?.[1];
    expect(sentence).toMatch(reason);
    expect(browser.cookies.has("latch_session")).toBe(false);
    expect((await browser.request("GET", "/api/auth/me")).statusCode).toBe(401);
    const members = (await owner.request("GET", "/api/orgs/members")).json().members;
    expect(members.some((m: { email: string }) => m.email === email)).toBe(false);
  });

  it("refuses an address the provider has not verified, and one outside the connection's domains", async () => {
    const unverified = await signInWithSso(newBrowser(), corpEmail("unverified"), {
      emailVerified: false,
    });
    expect(unverified.answer.statusCode).toBe(401);
    expect(unverified.answer.body).toContain("has not verified this email address");
    const foreign = await signInWithSso(newBrowser(), `ceo-${Date.now()}@victim.example`);
    expect(foreign.answer.statusCode).toBe(401);
    expect(foreign.answer.body).toContain("an address outside this organisation&#39;s domains");
    // "Verified" said as a string that is not "true", and domains that only look like the listed one.
    const saidFalse = await signInWithSso(newBrowser(), corpEmail("said-false"), { emailVerified: "false" });
    expect(saidFalse.answer.body).toContain("has not verified this email address");
    for (const lookalike of [
      `ceo-${Date.now()}@${DOMAIN}.evil.example`,
      `ceo-${Date.now()}@sub.${DOMAIN}`,
      `ceo-${Date.now()}@x${DOMAIN}`,
    ]) {
      const refused = await signInWithSso(newBrowser(), lookalike);
      expect(refused.answer.statusCode, lookalike).toBe(401);
      expect(refused.answer.body).toContain("an address outside this organisation&#39;s domains");
    }
    const members = (await owner.request("GET", "/api/orgs/members")).json().members;
    expect(members.some((m: { email: string }) => /ceo-|said-false|unverified/.test(m.email))).toBe(false);
  });

  it("never signs in an account the provider did not make and the organisation did not admit", async () => {
    const email = corpEmail("existing");
    const personal = newBrowser();
    await personal.request("POST", "/api/auth/otp/send", { email });
    expect(
      (await personal.request("POST", "/api/auth/otp/verify", { email, otp: lastCodeFor(h.inbox, email) }))
        .statusCode,
    ).toBe(200);
    const { answer } = await signInWithSso(newBrowser(), email);
    expect(answer.statusCode).toBe(403);
    expect(answer.body).toContain("already has a Latch account that is not a member of this organisation");
    const members = (await owner.request("GET", "/api/orgs/members")).json().members;
    expect(members.some((m: { email: string }) => m.email === email)).toBe(false);
  });

  it("binds the sign-in to the browser that started it, once", async () => {
    const starter = newBrowser();
    const email = corpEmail("bound");
    const started = await starter.request("GET", `/sso/${slug}`);
    idp.signInAs({ sub: `sub-${email}`, email, email_verified: true });
    const callback = await new IdpBrowser(idp).walk(String(started.headers.location));
    const path = `${callback.pathname}${callback.search}`;
    // Another browser (an attacker who got the redirect, or lured the victim into it) gets nothing.
    const thief = newBrowser();
    const stolen = await thief.request("GET", path);
    expect(stolen.statusCode).toBe(401);
    expect(stolen.body).toContain("was not started in this browser");
    // The browser that started it still finishes it; a second use of the same answer does not.
    expect((await starter.request("GET", path)).statusCode).toBe(303);
    const replayed = await starter.request("GET", path);
    expect(replayed.statusCode).toBe(401);
  });

  it("never lets a stranger's answer sign this browser in, nor end the sign-in it has in flight", async () => {
    // Login CSRF: the attacker starts a sign-in in their own browser, signs in at the provider as
    // themselves and lures the victim to the redirect URI with their code and state.
    const attacker = newBrowser();
    const attackerEmail = corpEmail("attacker");
    const attackerStart = await attacker.request("GET", `/sso/${slug}`);
    idp.signInAs({ sub: `sub-${attackerEmail}`, email: attackerEmail, email_verified: true });
    const lure = await new IdpBrowser(idp).walk(String(attackerStart.headers.location));
    const victim = newBrowser();
    const victimEmail = corpEmail("victim");
    const victimStart = await victim.request("GET", `/sso/${slug}`);
    expect(victim.cookies.has("latch_sso")).toBe(true);
    const lured = await victim.request("GET", `${lure.pathname}${lure.search}`);
    expect(lured.statusCode).toBe(401);
    expect(lured.body).toContain("was not started in this browser");
    expect(victim.cookies.has("latch_session")).toBe(false);
    // The victim's own sign-in still finishes, as the victim; the flow's cookie then goes.
    expect(victim.cookies.has("latch_sso")).toBe(true);
    idp.signInAs({ sub: `sub-${victimEmail}`, email: victimEmail, email_verified: true });
    const own = await new IdpBrowser(idp).walk(String(victimStart.headers.location));
    expect((await victim.request("GET", `${own.pathname}${own.search}`)).statusCode).toBe(303);
    expect((await victim.request("GET", "/api/auth/me")).json().email).toBe(victimEmail);
    expect(victim.cookies.has("latch_sso")).toBe(false);
    // A state that was never issued, with this browser's cookie, is nothing either.
    const forged = newBrowser();
    await forged.request("GET", `/sso/${slug}`);
    const made = await forged.request("GET", `/sso/callback?code=x&state=${"A".repeat(43)}`);
    expect(made.statusCode).toBe(401);
    expect(made.body).toContain("was not started in this browser");
  });

  it("gives up on a provider that hangs at its token endpoint, at the egress proxy's time limit", async () => {
    const browser = newBrowser();
    const email = corpEmail("hang");
    const started = await browser.request("GET", `/sso/${slug}`);
    idp.signInAs({ sub: `sub-${email}`, email, email_verified: true });
    const callback = await new IdpBrowser(idp).walk(String(started.headers.location));
    const before = idp.requests.length;
    idp.hangNextTokenRequest();
    const answer = await browser.request("GET", `${callback.pathname}${callback.search}`);
    // The request reached the provider (through the proxy), and the proxy's own limit ended it.
    expect(idp.requests.slice(before).some((r) => r.method === "POST" && r.path === "/token")).toBe(true);
    // A provider out of reach is a bad gateway, not a refused sign-in.
    expect(answer.statusCode).toBe(502);
    expect(answer.body).toContain("Single sign-on did not finish");
    expect(/<p id="sentence">([^<]*)</.exec(answer.body)?.[1]).toMatch(
      /token endpoint could not be reached \(.*timeout.*\)/i,
    );
    expect(browser.cookies.has("latch_session")).toBe(false);
    const members = (await owner.request("GET", "/api/orgs/members")).json().members;
    expect(members.some((m: { email: string }) => m.email === email)).toBe(false);
  }, 30_000);

  it("starts at most 300 sign-ins and answers 30 look-ups from one address in 15 minutes", async () => {
    const office = `10.${[1, 2, 3].map(() => Math.floor(Math.random() * 250) + 1).join(".")}`;
    const browser = new Browser(h.app, BASE, office);
    for (let i = 0; i < 300; i++) {
      const started = await browser.request("GET", `/sso/${slug}`);
      if (started.statusCode !== 302) expect(started.statusCode, `start ${i + 1}`).toBe(302);
    }
    const refused = await browser.request("GET", `/sso/${slug}`);
    expect(refused.statusCode).toBe(429);
    expect(refused.headers["retry-after"]).toMatch(/^[1-9]\d*$/);
    expect(refused.body).toContain("Single sign-on did not finish");
    expect(refused.headers.location).toBeUndefined();
    for (let i = 0; i < 30; i++) {
      await browser.request("POST", "/api/auth/sso/discover", { email: `someone@${DOMAIN}` });
    }
    const looked = await browser.request("POST", "/api/auth/sso/discover", { email: `someone@${DOMAIN}` });
    expect(looked.statusCode).toBe(429);
    expect(looked.json().error.code).toBe("rate_limited");
    // Another address is not held back by this one.
    expect((await newBrowser().request("GET", `/sso/${slug}`)).statusCode).toBe(302);
  }, 60_000);

  it("lands only on a path of this site: a return address elsewhere is dropped", async () => {
    const evil = await signInWithSso(newBrowser(), corpEmail("open-redirect"), {
      query: `?return_to=${encodeURIComponent("https://evil.example/phish")}`,
    });
    expect(evil.answer.headers.location).toBe("/console");
    const slashes = await signInWithSso(newBrowser(), corpEmail("slashes"), {
      query: `?return_to=${encodeURIComponent("//evil.example/")}`,
    });
    expect(slashes.answer.headers.location).toBe("/console");
    const kept = await signInWithSso(newBrowser(), corpEmail("kept"), {
      query: `?return_to=${encodeURIComponent("/console#inbox")}`,
    });
    expect(kept.answer.headers.location).toBe("/console#inbox");
    // An approval link's token rides in the return path: the sign-in's row keeps it only sealed to
    // the browser's cookie, never in plaintext, and the browser lands on it.
    const linkToken = randomBytes(32).toString("base64url");
    const browser = newBrowser();
    const started = await browser.request(
      "GET",
      `/sso/${slug}?return_to=${encodeURIComponent(`/approve?token=${linkToken}`)}`,
    );
    expect(started.statusCode).toBe(302);
    const rows = await h.plane.database.db.selectFrom("sso_states").selectAll().execute();
    expect(JSON.stringify(rows)).not.toContain(linkToken);
    const email = corpEmail("link");
    idp.signInAs({ sub: `sub-${email}`, email, email_verified: true });
    const callback = await new IdpBrowser(idp).walk(String(started.headers.location));
    const landed = await browser.request("GET", `${callback.pathname}${callback.search}`);
    expect(landed.headers.location).toBe(`/approve?token=${linkToken}`);
  });

  it("says why when the provider itself declines, and knows no organisation it does not have", async () => {
    const browser = newBrowser();
    const started = await browser.request("GET", `/sso/${slug}`);
    const state = new URL(String(started.headers.location)).searchParams.get("state");
    // Named as the provider names its answers (RFC 9207): its discovery document says it always does.
    const declined = await browser.request(
      "GET",
      `/sso/callback?error=access_denied&state=${state}&iss=${encodeURIComponent(IDP_ISSUER)}`,
    );
    expect(declined.statusCode).toBe(401);
    expect(declined.body).toContain("did not sign you in (access_denied)");
    const unknown = await browser.request("GET", "/sso/no-such-organisation");
    expect(unknown.statusCode).toBe(404);
    expect(unknown.body).toContain("does not sign in with single sign-on");
  });
});

describe("a session begun with single sign-on", () => {
  it("acts in its organisation alone and leaves the account's sign-in factors as they are", async () => {
    const browser = newBrowser();
    await signInWithSso(browser, corpEmail("confined"));
    const refusedAsSso = async () => {
      const refusals = [
        await browser.request("POST", "/api/orgs", { name: "Elsewhere" }),
        await browser.request("POST", "/api/orgs/switch", { organisation_id: "org_other" }),
        await browser.request("POST", "/api/auth/passkeys/options", {}),
        await browser.request("POST", "/api/auth/totp/start", {}),
        await browser.request("GET", "/api/auth/totp/pending"),
        await browser.request("POST", "/api/sessions/revoke-others", {}),
      ];
      return refusals.map((refused) => `${refused.statusCode} ${refused.json().error?.code}`);
    };
    // The plain sign-in said nothing of when the provider checked the person (no auth_time): adding
    // a passkey asks for a step-up first, and is refused to an SSO session after it (below).
    expect(await refusedAsSso()).toEqual([
      "403 sso_session",
      "403 sso_session",
      "403 step_up_required",
      "403 sso_session",
      "403 sso_session",
      "403 sso_session",
    ]);
    // No passkey and no authenticator: its step-up is signing in with the provider again, which
    // is asked to check the person afresh (prompt=login). A plain sign-in that did not say when it
    // checked the person is no step-up.
    const me = (await browser.request("GET", "/api/auth/me")).json();
    await h.plane.database.db
      .updateTable("memberships")
      .set({ role: "approver" })
      .where("organisation_id", "=", organisationId)
      .where(
        "operator_id",
        "=",
        (
          await h.plane.database.db
            .selectFrom("operators")
            .select("id")
            .where("email", "=", me.email)
            .executeTakeFirstOrThrow()
        ).id,
      )
      .execute();
    const fresh = await browser.request("POST", "/api/grants/grt_none/approve", { policy: "item_standing" });
    expect(fresh.statusCode).toBe(403);
    expect(fresh.json().error).toMatchObject({ code: "step_up_required", methods: ["sso"] });
    h.clock.advance(6 * 60_000);
    const stale = await browser.request("POST", "/api/grants/grt_none/approve", { policy: "item_standing" });
    expect(stale.statusCode).toBe(403);
    expect(stale.json().error).toMatchObject({ code: "step_up_required", methods: ["sso"] });
    expect(stale.json().error.message).toMatch(/sign in again with your organisation's single sign-on$/);
    h.clock.advance(-6 * 60_000);

    // The step-up through the provider: it must check the person again and say when (max_age,
    // auth_time). An answer that does not say when is refused, and the session stays as it was.
    const stepUp = async (tamper?: IdTokenTamper) => {
      const again = await browser.request("GET", `/sso/${slug}?step_up=1&return_to=%2Fconsole%23inbox`);
      const authorize = new URL(String(again.headers.location));
      expect(authorize.searchParams.get("prompt")).toBe("login");
      expect(authorize.searchParams.get("max_age")).toBe("300");
      idp.signInAs({ sub: `sub-${me.email}`, email: me.email, email_verified: true });
      if (tamper) idp.tamperNext(tamper);
      const back = await new IdpBrowser(idp).walk(authorize.href);
      return browser.request("GET", `${back.pathname}${back.search}`);
    };
    const undated = await stepUp("no_auth_time");
    expect(undated.statusCode).toBe(401);
    expect(undated.body).toMatch(/auth_time/);
    expect((await browser.request("GET", "/api/auth/me")).statusCode).toBe(200);
    const dated = await stepUp();
    expect(dated.statusCode, dated.body).toBe(303);
    expect(dated.headers.location).toBe("/console#inbox");
    const passed = await browser.request("POST", "/api/grants/grt_none/approve", { policy: "item_standing" });
    expect(passed.statusCode).toBe(404);
    // Verified now, the session is still an SSO session: its account's factors are not its to change.
    expect(await refusedAsSso()).toEqual(Array(6).fill("403 sso_session"));
  });
});

// Before "require single sign-on" below, which turns it on for this organisation: the person here
// also signs in with an email code.
describe("a session begun with single sign-on, when its member leaves or is removed", () => {
  it("ends: it never moves to another organisation of the same person", async () => {
    const email = corpEmail("leaver");
    const sso = newBrowser();
    await signInWithSso(sso, email);
    expect((await sso.request("GET", "/api/auth/me")).json().organisation.id).toBe(organisationId);
    // The same person also owns an organisation of their own, signed in with an email code.
    const own = await signInWithEmailCode(h, newBrowser(), email);
    const started = (await own.request("POST", "/api/auth/totp/start", {})).json();
    const totp = OTPAuth.URI.parse(started.otpauth_url) as OTPAuth.TOTP;
    const confirmed = await own.request("POST", "/api/auth/totp/confirm", {
      code: totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    const created = await own.request("POST", "/api/orgs", { name: "Own things" });
    expect(created.statusCode, created.body).toBe(201);
    const ownId = created.json().organisation.id as string;

    // A session the provider made that was moved there by any write still acts nowhere.
    const ssoSessions = h.plane.database.db
      .updateTable("operator_sessions")
      .where("sso_organisation_id", "=", organisationId)
      .where(
        "operator_id",
        "=",
        (
          await h.plane.database.db
            .selectFrom("operators")
            .select("id")
            .where("email", "=", email)
            .executeTakeFirstOrThrow()
        ).id,
      );
    await ssoSessions.set({ organisation_id: ownId }).execute();
    const moved = await sso.request("GET", "/api/orgs/settings");
    expect(moved.statusCode, moved.body).not.toBe(200);
    expect((await sso.request("POST", "/api/clients/model", { name: "escaped" })).statusCode).not.toBe(201);
    await ssoSessions.set({ organisation_id: organisationId }).execute();

    // Leaving the organisation ends the provider's session; the email-code one still works.
    const left = await sso.request("POST", "/api/orgs/leave", {});
    expect(left.statusCode, left.body).toBe(200);
    expect(left.json().organisation).toBeNull();
    expect((await sso.request("GET", "/api/auth/me")).statusCode).toBe(401);
    expect((await sso.request("GET", "/api/orgs/settings")).statusCode).toBe(401);
    expect((await own.request("GET", "/api/orgs/settings")).json().organisation.id).toBe(ownId);
  });
});

describe("a sign-in started by another site's page (login CSRF)", () => {
  it("is not started: the page asks to continue, and Continue from it starts the flow", async () => {
    const browser = newBrowser();
    const path = `/sso/${slug}?login_hint=someone%40${DOMAIN}`;
    for (const site of ["cross-site", "same-site"]) {
      const framed = await browser.request("GET", path, undefined, { "sec-fetch-site": site });
      expect(framed.statusCode, site).toBe(200);
      expect(framed.headers["set-cookie"]).toBeUndefined();
      expect(framed.headers["content-type"]).toMatch(/^text\/html/);
      expect(framed.body).toContain("Another site sent you here");
      expect(framed.body).toContain(`href="/sso/${slug}?login_hint=someone%40${DOMAIN}"`);
    }
    // Continue is a navigation from this very site; typed or bookmarked addresses send none.
    for (const site of ["same-origin", "none", undefined]) {
      const started = await browser.request("GET", path, undefined, site ? { "sec-fetch-site": site } : {});
      expect(started.statusCode, String(site)).toBe(302);
      expect(new URL(String(started.headers.location)).host).toBe(IDP_HOST);
    }
  });
});

describe("a sign-in whose provider does not say when it checked the person", () => {
  it("is a whole sign-in, and no step-up until one through the provider", async () => {
    const browser = newBrowser();
    const email = corpEmail("undated");
    const { answer } = await signInWithSso(browser, email, { tamper: "no_auth_time" });
    expect(answer.statusCode, answer.body).toBe(303);
    expect((await browser.request("GET", "/api/auth/me")).statusCode).toBe(200);
    const { id } = await h.plane.database.db
      .selectFrom("operators")
      .select("id")
      .where("email", "=", email)
      .executeTakeFirstOrThrow();
    await h.plane.database.db
      .updateTable("memberships")
      .set({ role: "approver" })
      .where("organisation_id", "=", organisationId)
      .where("operator_id", "=", id)
      .execute();
    // Right after the sign-in: the provider may have reused a session of its own, so this is no
    // fresh verification.
    const standing = await browser.request("POST", "/api/grants/grt_none/approve", {
      policy: "item_standing",
    });
    expect(standing.statusCode).toBe(403);
    expect(standing.json().error).toMatchObject({ code: "step_up_required", methods: ["sso"] });
  });
});

describe("the connection", () => {
  it("is an owner's to change, after a step-up, and refuses what it cannot use", async () => {
    const auditor = newBrowser();
    await signInWithSso(auditor, corpEmail("reader"));
    expect((await auditor.request("GET", "/api/orgs/sso")).json().connection).toMatchObject({
      issuer: IDP_ISSUER,
      email_domains: [DOMAIN],
      default_role: "auditor",
      redirect_uri: `${BASE}/sso/callback`,
      sign_in_url: `${BASE}/sso/${slug}`,
    });
    const forbidden = await auditor.request("PUT", "/api/orgs/sso", { issuer: IDP_ISSUER });
    expect(forbidden.statusCode).toBe(403);
    expect(forbidden.json().error.code).toBe("forbidden_role");

    const put = (body: Record<string, unknown>) =>
      owner.request("PUT", "/api/orgs/sso", {
        issuer: IDP_ISSUER,
        client_id: idp.clientId,
        email_domains: [DOMAIN],
        ...body,
      });
    expect((await put({ default_role: "owner" })).statusCode).toBe(400);
    expect((await put({ email_domains: ["not a domain"] })).statusCode).toBe(400);
    expect((await put({ issuer: "http://idp.latch.test" })).statusCode).toBe(400);
    const unreachable = await put({ issuer: "https://nowhere.latch.test", client_secret: "s".repeat(24) });
    expect(unreachable.statusCode).toBe(400);
    expect(unreachable.json().error.message).toMatch(/^the issuer's discovery document was refused/);

    h.clock.advance(6 * 60_000);
    const stale = await put({});
    expect(stale.statusCode).toBe(403);
    expect(stale.json().error.code).toBe("step_up_required");
    h.clock.advance(30_000);
    const code = ownerTotp.generate({ timestamp: h.clock.now.getTime() });
    expect((await owner.request("POST", "/api/auth/totp/verify", { code })).statusCode).toBe(200);
    // Without a new secret the stored one stays.
    const kept = await put({ default_role: "approver" });
    expect(kept.statusCode, kept.body).toBe(200);
    expect(kept.json().connection).toMatchObject({
      default_role: "approver",
      client_secret_last4: idp.clientSecret.slice(-4),
    });
    expect((await put({ default_role: "auditor" })).statusCode).toBe(200);
    // The kept secret never goes to another issuer (whose token endpoint would receive it) nor
    // under another client id: either change needs the new provider's secret.
    for (const moved of [{ issuer: "https://nowhere.latch.test" }, { client_id: "another-client" }]) {
      const refused = await put(moved);
      expect(refused.statusCode, JSON.stringify(moved)).toBe(400);
      expect(refused.json().error.message).toMatch(
        /^client_secret is needed when the issuer or client_id changes/,
      );
    }
    expect((await owner.request("GET", "/api/orgs/sso")).json().connection).toMatchObject({
      issuer: IDP_ISSUER,
      client_id: idp.clientId,
    });
  });

  it("changes nothing, and makes no account, when its audit row cannot be written", async () => {
    h.clock.advance(30_000);
    const code = ownerTotp.generate({ timestamp: h.clock.now.getTime() });
    expect((await owner.request("POST", "/api/auth/totp/verify", { code })).statusCode).toBe(200);
    const before = (await owner.request("GET", "/api/orgs/sso")).json().connection;
    const refuseChange = await refuseAuditRows(h.plane.database, organisationId, "sso_connection_changed");
    try {
      const refused = await owner.request("PUT", "/api/orgs/sso", {
        issuer: IDP_ISSUER,
        client_id: idp.clientId,
        email_domains: [DOMAIN],
        default_role: before.default_role === "approver" ? "auditor" : "approver",
        require_sso: !before.require_sso,
      });
      expect(refused.statusCode, refused.body).toBe(500);
    } finally {
      await refuseChange();
    }
    expect((await owner.request("GET", "/api/orgs/sso")).json().connection).toEqual(before);

    // A new address whose joining cannot be recorded is not made, and can join once it can be.
    const email = corpEmail("unrecorded");
    const refuseJoin = await refuseAuditRows(h.plane.database, organisationId, "member_joined");
    try {
      const { answer } = await signInWithSso(newBrowser(), email);
      expect(answer.statusCode, answer.body).toBe(500);
    } finally {
      await refuseJoin();
    }
    const listed = async () =>
      (await owner.request("GET", "/api/orgs/members")).json().members.map((m: { email: string }) => m.email);
    expect(await listed()).not.toContain(email);
    const again = await signInWithSso(newBrowser(), email);
    expect(again.answer.statusCode, again.answer.body).toBe(303);
    expect(await listed()).toContain(email);
    const rows = (await owner.request("GET", "/api/audit?action=member_joined")).json().events;
    expect(rows.filter((e: { detail?: { email?: string } }) => e.detail?.email === email)).toHaveLength(1);
  });

  it("finds the organisation by address for Sign in with SSO", async () => {
    const browser = newBrowser();
    const found = await browser.request("POST", "/api/auth/sso/discover", {
      email: `Someone@${DOMAIN.toUpperCase()}`,
    });
    expect(found.statusCode, found.body).toBe(200);
    expect(found.json().sso_url).toBe(`/sso/${slug}?login_hint=someone%40${DOMAIN}`);
    const none = await browser.request("POST", "/api/auth/sso/discover", {
      email: "someone@elsewhere.example",
    });
    expect(none.statusCode).toBe(404);
    expect(
      (await browser.request("POST", "/api/auth/sso/discover", { email: "not an address" })).statusCode,
    ).toBe(400);
  });
});

describe("the domains a connection lists", () => {
  it("count only once proven: another organisation listing this one's domain makes no account of it", async () => {
    const { browser: rival } = await signUpOperator(h, { label: "sso-rival" });
    const rivalSlug = (await rival.request("GET", "/api/auth/me")).json().organisation.slug;
    const listed = await rival.request("PUT", "/api/orgs/sso", {
      issuer: IDP_ISSUER,
      client_id: idp.clientId,
      client_secret: idp.clientSecret,
      email_domains: [DOMAIN],
      require_sso: true,
    });
    expect(listed.statusCode, listed.body).toBe(200);
    expect(listed.json().connection.domains).toEqual([
      {
        domain: DOMAIN,
        verified: false,
        record: {
          name: `_latch-verification.${DOMAIN}`,
          value: expect.stringMatching(/^latch-verification=/),
        },
        missed_checks: 0,
      },
    ]);
    // The domain's TXT records carry the rightful organisation's token, not the rival's.
    const check = await rival.request("POST", "/api/orgs/sso/verify-domains", {});
    expect(check.statusCode, check.body).toBe(200);
    expect(check.json().checked).toEqual([
      { domain: DOMAIN, verified: false, reason: expect.stringContaining("do not carry") },
    ]);

    // A new address of the domain, vouched for by the rival's provider: no account is made.
    const email = corpEmail("claimed");
    const { answer } = await signInWithSso(newBrowser(), email, { slug: rivalSlug });
    expect(answer.statusCode, answer.body).toBe(403);
    expect(answer.body).toContain(`This organisation has not proven it holds ${DOMAIN} yet`);
    // "Sign in with SSO" still names the rightful organisation alone, not "several".
    const found = await newBrowser().request("POST", "/api/auth/sso/discover", { email });
    expect(found.statusCode, found.body).toBe(200);
    expect(found.json().sso_url).toBe(`/sso/${slug}?login_hint=${encodeURIComponent(email)}`);
    // The person signs up with an email code later: their own account, in no organisation of the rival's.
    const person = await signInWithEmailCode(h, newBrowser(), email);
    const organisations = (await person.request("GET", "/api/auth/me")).json().organisations as {
      slug: string;
    }[];
    expect(organisations.map((o) => o.slug)).not.toContain(rivalSlug);
    // Even a member the rival admitted (an invitation the person accepted) is not held to its
    // require_sso of a domain it never proved: the email-code session acts there.
    const started = (await person.request("POST", "/api/auth/totp/start", {})).json();
    const personTotp = OTPAuth.URI.parse(started.otpauth_url) as OTPAuth.TOTP;
    const enrolled = await person.request("POST", "/api/auth/totp/confirm", {
      code: personTotp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(enrolled.statusCode, enrolled.body).toBe(200);
    const invited = await rival.request("POST", "/api/orgs/members/invite", { email, role: "auditor" });
    expect(invited.statusCode, invited.body).toBe(201);
    const joined = await person.request("POST", "/invite", { token: lastInviteTokenFor(h.inbox, email) });
    expect(joined.statusCode, joined.body).toBe(200);
    const acting = await person.request("GET", "/api/items");
    expect(acting.statusCode, acting.body).toBe(200);
    // Nor may the rival's own provider sign the member in (a whole sign-in, past their second
    // factor): the domain is listed there, never proven.
    const asMember = await signInWithSso(newBrowser(), email, { slug: rivalSlug });
    expect(asMember.answer.statusCode, asMember.answer.body).toBe(403);
    expect(asMember.answer.body).toContain(`cannot sign in ${email}`);
  });

  it("stop counting when taken off the list, and are checked again when listed again", async () => {
    h.clock.advance(30_000);
    const code = ownerTotp.generate({ timestamp: h.clock.now.getTime() });
    expect((await owner.request("POST", "/api/auth/totp/verify", { code })).statusCode).toBe(200);
    const put = (domains: string[]) =>
      owner.request("PUT", "/api/orgs/sso", {
        issuer: IDP_ISSUER,
        client_id: idp.clientId,
        email_domains: domains,
      });
    const state = (answer: Awaited<ReturnType<typeof put>>) =>
      Object.fromEntries(
        answer
          .json()
          .connection.domains.map((d: { domain: string; verified: boolean }) => [d.domain, d.verified]),
      );
    const other = `other-${DOMAIN}`;
    const both = await put([DOMAIN, other]);
    expect(both.statusCode, both.body).toBe(200);
    expect(state(both)).toEqual({ [DOMAIN]: true, [other]: false });
    expect(state(await put([other]))).toEqual({ [other]: false });
    const back = await put([DOMAIN]);
    expect(state(back)).toEqual({ [DOMAIN]: false });
    // Meanwhile a new address of it cannot join; the record is still published, so a check finds it.
    const meanwhile = await signInWithSso(newBrowser(), corpEmail("meanwhile"));
    expect(meanwhile.answer.statusCode).toBe(403);
    const checked = await owner.request("POST", "/api/orgs/sso/verify-domains", {});
    expect(checked.json().checked).toEqual([{ domain: DOMAIN, verified: true }]);
    expect(state(await owner.request("GET", "/api/orgs/sso"))).toEqual({ [DOMAIN]: true });
    const rows = (await owner.request("GET", "/api/audit?action=sso_domain_verified")).json().events;
    expect(rows.map((e: { detail: { domain: string } }) => e.detail.domain)).toEqual([DOMAIN, DOMAIN]);
    expect((await signInWithSso(newBrowser(), corpEmail("after"))).answer.statusCode).toBe(303);
  });
});

describe("a connection moved to another provider (issuer or client)", () => {
  it("keeps no proof: its domains are proven again, for a new token, before anyone signs in", async () => {
    h.clock.advance(30_000);
    const code = ownerTotp.generate({ timestamp: h.clock.now.getTime() });
    expect((await owner.request("POST", "/api/auth/totp/verify", { code })).statusCode).toBe(200);
    const before = (await owner.request("GET", "/api/orgs/sso")).json().connection.domains[0];
    expect(before.verified).toBe(true);
    const moveTo = (clientId: string, clientSecret: string) =>
      owner.request("PUT", "/api/orgs/sso", {
        issuer: IDP_ISSUER,
        client_id: clientId,
        client_secret: clientSecret,
        email_domains: [DOMAIN],
      });
    // An owner's own client (any provider the owner runs): the proof made for the other does not carry over.
    const moved = await moveTo("an-owners-own-client", "its-own-secret-value-123");
    expect(moved.statusCode, moved.body).toBe(200);
    const after = moved.json().connection.domains[0];
    expect(after.verified).toBe(false);
    expect(after.record.value).not.toBe(before.record.value);
    // The record published for the old connection proves nothing now.
    const check = await owner.request("POST", "/api/orgs/sso/verify-domains", {});
    expect(check.json().checked).toEqual([
      { domain: DOMAIN, verified: false, reason: expect.stringContaining("do not carry") },
    ]);

    // Back to the organisation's provider: proven again once its new record is published.
    const back = await moveTo(idp.clientId, idp.clientSecret);
    const record = back.json().connection.domains[0].record;
    expect(back.json().connection.domains[0].verified).toBe(false);
    rig!.doh.publish(record.name, record.value);
    const proven = await owner.request("POST", "/api/orgs/sso/verify-domains", {});
    expect(proven.json().checked).toEqual([{ domain: DOMAIN, verified: true }]);
  });
});

describe("a domain check that finds the connection made again", () => {
  it("proves nothing: the records it read carried the old connection's token", async () => {
    const repo = createSsoRepo(h.plane.database.db);
    const before = await repo.findConnection(organisationId);
    expect(before?.domain_token).toBeTruthy();
    expect(
      await repo.updateDomainsVerified(organisationId, "the-token-of-a-removed-connection", [DOMAIN]),
    ).toBe(false);
    expect(await repo.updateDomainsVerified(organisationId, before!.domain_token, [DOMAIN])).toBe(true);
  });
});

describe("require single sign-on", () => {
  it("refuses the email-code sign-in of a member of those domains, naming the SSO address", async () => {
    // A member with a corp address who joined by invitation and the email code, an admin (who may
    // connect agents).
    const email = corpEmail("invited");
    const invited = await owner.request("POST", "/api/orgs/members/invite", { email, role: "admin" });
    expect(invited.statusCode, invited.body).toBe(201);
    const token = lastInviteTokenFor(h.inbox, email);
    const member = newBrowser();
    await member.request("POST", "/api/auth/otp/send", { email });
    await member.request("POST", "/api/auth/otp/verify", { email, otp: lastCodeFor(h.inbox, email) });
    const started = (await member.request("POST", "/api/auth/totp/start", {})).json();
    const { URI } = await import("otpauth");
    const totp = URI.parse(started.otpauth_url) as { generate(o: { timestamp: number }): string };
    await member.request("POST", "/api/auth/totp/confirm", {
      code: totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect((await member.request("POST", "/invite", { token })).statusCode).toBe(200);
    expect((await member.request("GET", "/api/items")).statusCode).toBe(200);

    h.clock.advance(30_000);
    expect(
      (
        await owner.request("POST", "/api/auth/totp/verify", {
          code: ownerTotp.generate({ timestamp: h.clock.now.getTime() }),
        })
      ).statusCode,
    ).toBe(200);
    const required = await owner.request("PUT", "/api/orgs/sso", {
      issuer: IDP_ISSUER,
      client_id: idp.clientId,
      email_domains: [DOMAIN],
      require_sso: true,
    });
    expect(required.statusCode, required.body).toBe(200);

    // The session from before acts there no more.
    const refused = await member.request("GET", "/api/items");
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toMatchObject({ code: "sso_required", sso_url: `/sso/${slug}` });
    // Nor reads a request through its approval link: refused, and nothing of the request shown.
    const stored = await owner.request("POST", "/api/items", {
      name: "SSO_LINK_KEY",
      value: "sk_live_sso_link_canary_0123",
      environment: "staging",
      allowed_hosts: ["api.latch.test"],
    });
    expect(stored.statusCode, stored.body).toBe(201);
    const agentToken = (
      await owner.request("POST", "/api/clients/model", { name: "sso link agent", environment: "staging" })
    ).json().token as string;
    const mailsBefore = h.inbox.mails.length;
    const asked = await h.app.inject({
      method: "POST",
      url: "/api/grants/request",
      headers: { authorization: `Bearer ${agentToken}`, "content-type": "application/json" },
      payload: JSON.stringify({
        item_name: "SSO_LINK_KEY",
        host: "api.latch.test",
        method: "POST",
        path: "/v1/sso-hidden-path",
      }),
    });
    expect(asked.statusCode, asked.body).toBe(201);
    await expect.poll(() => h.inbox.mails.slice(mailsBefore).some((m) => m.to === email)).toBe(true);
    const mail = h.inbox.mails
      .slice(mailsBefore)
      .find((m) => m.to === email)!
      .raw.replace(/=\r?\n/g, "")
      .replace(/=3D/g, "=");
    const linkToken = /\/approve\?token=([A-Za-z0-9_-]+)/.exec(mail)?.[1];
    expect(linkToken, mail).toBeDefined();
    const linkPage = await member.request("GET", `/approve?token=${linkToken}`);
    expect(linkPage.statusCode).toBe(403);
    expect(linkPage.body).toContain("Not approved");
    expect(linkPage.body).not.toContain("sso-hidden-path");
    expect(linkPage.body).not.toContain("sso link agent");
    // Nor connects an agent there: the consent page does not offer the organisation, and an
    // approval naming it is refused as if it were not the member's.
    const organisationId = (await owner.request("GET", "/api/auth/me")).json().organisation.id as string;
    const redirectUri = "http://127.0.0.1:33418/callback";
    const clientId = (
      await register(h.app, { client_name: "Stale session agent", redirect_uris: [redirectUri] })
    ).json().client_id as string;
    const uid = consentUid(await openAuthorize(member, clientId, redirectUri));
    const details = await member.request("GET", `/consent/details?uid=${uid}`);
    expect(details.statusCode, details.body).toBe(200);
    expect((details.json().organisations as { id: string }[]).map((o) => o.id)).not.toContain(organisationId);
    const approved = await member.request(
      "POST",
      "/consent",
      { uid, decision: "approve", organisation_id: organisationId },
      { accept: "application/json" },
    );
    expect(approved.statusCode, approved.body).toBe(404);

    // The email code is refused once proven, with the sentence and the address of the SSO sign-in.
    const fresh = newBrowser();
    await fresh.request("POST", "/api/auth/otp/send", { email });
    const code = await fresh.request("POST", "/api/auth/otp/verify", {
      email,
      otp: lastCodeFor(h.inbox, email),
    });
    expect(code.statusCode).toBe(403);
    expect(code.json().error).toMatchObject({ code: "sso_required", sso_url: `/sso/${slug}` });
    expect(code.json().error.message).toBe(
      `${email} signs in with ${(await owner.request("GET", "/api/auth/me")).json().organisation.name}'s single sign-on: open ${BASE}/sso/${slug}`,
    );
    expect(fresh.cookies.has("latch_session")).toBe(false);
    // A passkey of that member signs in no more either: the same refusal, before any session.
    const memberId = (
      await h.plane.database.db
        .selectFrom("operators")
        .select("id")
        .where("email", "=", email)
        .executeTakeFirstOrThrow()
    ).id;
    await expect(h.plane.services.sso.signIn.refuseUnlessAllowed(memberId, email)).rejects.toMatchObject({
      code: "sso_required",
    });

    // Through the provider the same member signs in, as the admin the invitation made it.
    const viaSso = newBrowser();
    const { answer } = await signInWithSso(viaSso, email);
    expect(answer.statusCode).toBe(303);
    expect((await viaSso.request("GET", "/api/auth/me")).json().organisation.role).toBe("admin");
    expect((await viaSso.request("GET", "/api/items")).statusCode).toBe(200);

    // An address of the domain that is not a member keeps its email code (another organisation
    // cannot lock strangers out by listing their domain).
    const stranger = `${uniqueEmail("stranger").split("@")[0]}@${DOMAIN}`;
    const outsider = newBrowser();
    await outsider.request("POST", "/api/auth/otp/send", { email: stranger });
    expect(
      (
        await outsider.request("POST", "/api/auth/otp/verify", {
          email: stranger,
          otp: lastCodeFor(h.inbox, stranger),
        })
      ).statusCode,
    ).toBe(200);
  });
  it("ends a live inbox stream an email-code session opened before it was turned on", async () => {
    const stepUp = async () => {
      h.clock.advance(30_000);
      const verified = await owner.request("POST", "/api/auth/totp/verify", {
        code: ownerTotp.generate({ timestamp: h.clock.now.getTime() }),
      });
      expect(verified.statusCode, verified.body).toBe(200);
    };
    const requireSso = async (on: boolean) => {
      await stepUp();
      const changed = await owner.request("PUT", "/api/orgs/sso", {
        issuer: IDP_ISSUER,
        client_id: idp.clientId,
        email_domains: [DOMAIN],
        require_sso: on,
      });
      expect(changed.statusCode, changed.body).toBe(200);
    };
    await requireSso(false);
    // A member of the domain, in with the email code and the authenticator.
    const email = corpEmail("streaming");
    const invited = await owner.request("POST", "/api/orgs/members/invite", { email, role: "approver" });
    expect(invited.statusCode, invited.body).toBe(201);
    const inviteToken = lastInviteTokenFor(h.inbox, email);
    const member = newBrowser();
    await member.request("POST", "/api/auth/otp/send", { email });
    await member.request("POST", "/api/auth/otp/verify", { email, otp: lastCodeFor(h.inbox, email) });
    const started = (await member.request("POST", "/api/auth/totp/start", {})).json();
    const totp = OTPAuth.URI.parse(started.otpauth_url) as OTPAuth.TOTP;
    await member.request("POST", "/api/auth/totp/confirm", {
      code: totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    const joined = await member.request("POST", "/invite", { token: inviteToken });
    expect(joined.statusCode, joined.body).toBe(200);

    const url = await h.app.listen({ host: "127.0.0.1", port: 0 });
    const stream = await openEventStream(`${url}/api/inbox/stream`, member);
    expect(stream.status).toBe(200);
    await stream.next("ready");
    await requireSso(true);
    // As every other route answers that session sso_required, the stream ends at its next check.
    await expect.poll(() => stream.isEnded, { timeout: 15_000, interval: 100 }).toBe(true);
    stream.close();
  }, 30_000);
});
