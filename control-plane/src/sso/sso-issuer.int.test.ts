// The issuer of an answer at the one redirect URI every organisation shares (RFC 9207): three real
// OpenID providers (oidc-idp.ts) behind the egress proxy, an honest one that names itself (`iss`)
// and says so in its discovery document, an attacker's, connected by the attacker's own
// organisation, and a plain one that does neither. The mix-up attack (RFC 9700 4.4): the honest
// provider's answer, carried to the state of a sign-in with the attacker's connection, is refused
// before its code reaches any token endpoint, and its error is not shown as the attacker's
// provider's words; an honest provider's answer without `iss` is refused, with it signs in, and a
// provider that never sends it signs in as before.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DOH_URL, startTestDoh, type TestDoh } from "../../test/doh-server.ts";
import { Browser, type HostedHarness, signUpOperator, startHosted } from "../../test/hosted.ts";
import { IdpBrowser, startTestIdp, type TestIdp } from "../../test/oidc-idp.ts";
import { createRelyingParty } from "./oidc-relying-party.ts";

const BASE = "http://localhost:8787";
const REDIRECT_URI = `${BASE}/sso/callback`;
const run = () => Math.random().toString(16).slice(2, 8);
/** Domains of this run's own: the database may hold other runs' connections. */
const DOMAIN = `corp-${run()}.latch.test`;
const ATTACKER_DOMAIN = `attacker-${run()}.latch.test`;
const PLAIN_DOMAIN = `plain-${run()}.latch.test`;
/** This run's own address: sign-ins started are counted per address. */
const RUN_ADDRESS = `10.${[1, 2, 3].map(() => Math.floor(Math.random() * 250) + 1).join(".")}`;

let honest: TestIdp;
let attackers: TestIdp;
let plain: TestIdp;
let doh: TestDoh;
let h: HostedHarness;
let victimOrg: string;
let attackerOrg: string;
let plainOrg: string;

const newBrowser = () => new Browser(h.app, BASE, RUN_ADDRESS);
const address = (label: string, domain: string) => `${label}-${run()}${run()}@${domain}`;

/** An owner's organisation connected to `idp` for `domain`, proven when `isProven`; answers its slug. */
async function connectedOrganisation(idp: TestIdp, domain: string, isProven: boolean): Promise<string> {
  const owner = (await signUpOperator(h, { label: "sso-iss-owner" })).browser;
  const connected = await owner.request("PUT", "/api/orgs/sso", {
    issuer: idp.issuer,
    client_id: idp.clientId,
    client_secret: idp.clientSecret,
    email_domains: [domain],
  });
  expect(connected.statusCode, connected.body).toBe(200);
  if (isProven) {
    const { record } = connected.json().connection.domains[0];
    doh.publish(record.name, record.value);
    const proven = await owner.request("POST", "/api/orgs/sso/verify-domains", {});
    expect(proven.json().checked, proven.body).toEqual([{ domain, verified: true }]);
  }
  return (await owner.request("GET", "/api/auth/me")).json().organisation.slug;
}

beforeAll(async () => {
  honest = await startTestIdp({ redirectUri: REDIRECT_URI });
  // The attacker's provider says nothing of iss: its discovery document is the attacker's to write.
  attackers = await startTestIdp({
    redirectUri: REDIRECT_URI,
    host: "idp-attacker.latch.test",
    advertisesIss: false,
  });
  plain = await startTestIdp({
    redirectUri: REDIRECT_URI,
    host: "idp-plain.latch.test",
    advertisesIss: false,
  });
  plain.sendIssInAnswers(false);
  doh = await startTestDoh();
  h = await startHosted({
    connectTo: [honest.connectTo, attackers.connectTo, plain.connectTo, doh.connectTo],
    ssoDnsUrl: DOH_URL,
  });
  victimOrg = await connectedOrganisation(honest, DOMAIN, true);
  attackerOrg = await connectedOrganisation(attackers, ATTACKER_DOMAIN, false);
  plainOrg = await connectedOrganisation(plain, PLAIN_DOMAIN, true);
}, 120_000);

afterAll(async () => {
  await h?.close();
  await Promise.all([honest?.close(), attackers?.close(), plain?.close(), doh?.close()]);
});

/** The sentence of Latch's page of a sign-in that did not finish. */
const sentenceOf = (body: string) => /<p id="sentence">([^<]*)</.exec(body)?.[1] ?? "";
const tokenRequests = (idp: TestIdp, since: number) =>
  idp.requests.slice(since).filter((r) => r.method === "POST" && r.path === "/token");

/** Where Latch sends a browser to sign in with the organisation `slug`'s provider. */
async function startAt(browser: Browser, slug: string): Promise<URL> {
  const started = await browser.request("GET", `/sso/${slug}`);
  expect(started.statusCode, started.body).toBe(302);
  return new URL(String(started.headers.location));
}

/**
 * The attack up to the honest provider's answer: the victim follows a link to the attacker's
 * organisation's sign-in, whose provider sends the browser on to the honest provider with Latch's
 * client ID there, the shared redirect URI, the challenge of a sign-in the attacker started at Latch
 * with the honest provider, and the victim's state. Answers the victim's browser and where the
 * honest provider sends it back.
 */
async function mixedUp(extra: Record<string, string> = {}): Promise<{ victim: Browser; callback: URL }> {
  const victim = newBrowser();
  const toAttackers = await startAt(victim, attackerOrg);
  expect(toAttackers.host).toBe(attackers.host);
  const toHonest = await startAt(newBrowser(), victimOrg);
  expect(toHonest.host).toBe(honest.host);
  toHonest.searchParams.set("state", String(toAttackers.searchParams.get("state")));
  for (const [name, value] of Object.entries(extra)) toHonest.searchParams.set(name, value);
  honest.signInAs({ sub: `sub-victim-${run()}`, email: address("victim", DOMAIN), email_verified: true });
  const callback = await new IdpBrowser(honest).walk(toHonest.href);
  expect(callback.href.startsWith(REDIRECT_URI)).toBe(true);
  expect(callback.searchParams.get("iss")).toBe(honest.issuer);
  return { victim, callback };
}

describe("the issuer of an answer at the redirect URI (RFC 9207)", () => {
  it("refuses the honest provider's code carried to the attacker's connection's state, before any token endpoint hears of it", async () => {
    const { victim, callback } = await mixedUp();
    expect(callback.searchParams.get("code")).toBeTruthy();
    const [attackersBefore, honestBefore] = [attackers.requests.length, honest.requests.length];
    const answer = await victim.request("GET", `${callback.pathname}${callback.search}`);
    // The code went nowhere: not to the attacker's token endpoint (nor, by Latch, to the honest one).
    expect(tokenRequests(attackers, attackersBefore)).toEqual([]);
    expect(tokenRequests(honest, honestBefore)).toEqual([]);
    expect(answer.statusCode).toBe(401);
    expect(answer.body).toContain("Single sign-on did not finish");
    expect(sentenceOf(answer.body)).toContain(
      `This answer names another identity provider than this organisation&#39;s (${attackers.issuer})`,
    );
    expect(victim.cookies.has("latch_session")).toBe(false);
    // The state is spent: the same answer again finds no sign-in.
    const again = await victim.request("GET", `${callback.pathname}${callback.search}`);
    expect(sentenceOf(again.body)).toMatch(/already used or has expired/);
    expect(h.logs.text()).toMatch(
      /"code":"sso_failed","reason":"this answer names another identity provider/,
    );
    expect(h.logs.text()).not.toContain(String(callback.searchParams.get("code")));
  });

  it("does not show the honest provider's error, carried to the attacker's state, as the attacker's provider's words", async () => {
    // prompt=none with no session at the honest provider: it answers login_required, naming itself.
    const { victim, callback } = await mixedUp({ prompt: "none" });
    expect(callback.searchParams.get("error")).toBe("login_required");
    const answer = await victim.request("GET", `${callback.pathname}${callback.search}`);
    expect(answer.statusCode).toBe(401);
    const sentence = sentenceOf(answer.body);
    expect(sentence).toContain("names another identity provider");
    expect(sentence).not.toContain("login_required");
  });

  it("refuses an answer without iss from a provider whose discovery document says it sends one", async () => {
    honest.sendIssInAnswers(false);
    try {
      const browser = newBrowser();
      honest.signInAs({ sub: `sub-${run()}`, email: address("no-iss", DOMAIN), email_verified: true });
      const callback = await new IdpBrowser(honest).walk((await startAt(browser, victimOrg)).href);
      expect(callback.searchParams.has("iss")).toBe(false);
      expect(callback.searchParams.get("code")).toBeTruthy();
      const before = honest.requests.length;
      const answer = await browser.request("GET", `${callback.pathname}${callback.search}`);
      expect(answer.statusCode).toBe(401);
      expect(sentenceOf(answer.body)).toContain(
        `This answer does not name its identity provider (iss), which ${honest.issuer} says it always does`,
      );
      expect(tokenRequests(honest, before)).toEqual([]);
      expect(browser.cookies.has("latch_session")).toBe(false);
    } finally {
      honest.sendIssInAnswers(true);
    }
  });

  it("signs in with the provider's answer naming it", async () => {
    const browser = newBrowser();
    const email = address("named", DOMAIN);
    honest.signInAs({ sub: `sub-${run()}`, email, email_verified: true });
    const callback = await new IdpBrowser(honest).walk((await startAt(browser, victimOrg)).href);
    expect(callback.searchParams.get("iss")).toBe(honest.issuer);
    const answer = await browser.request("GET", `${callback.pathname}${callback.search}`);
    expect(answer.statusCode, answer.body).toBe(303);
    expect((await browser.request("GET", "/api/auth/me")).json()).toMatchObject({
      email,
      signed_in_with_sso: true,
      organisation: { slug: victimOrg },
    });
  });

  it("signs in with a provider that neither sends iss nor says it does, as before", async () => {
    const browser = newBrowser();
    const email = address("plain", PLAIN_DOMAIN);
    plain.signInAs({ sub: `sub-${run()}`, email, email_verified: true });
    const callback = await new IdpBrowser(plain).walk((await startAt(browser, plainOrg)).href);
    expect(callback.searchParams.has("iss")).toBe(false);
    const answer = await browser.request("GET", `${callback.pathname}${callback.search}`);
    expect(answer.statusCode, answer.body).toBe(303);
    expect((await browser.request("GET", "/api/auth/me")).json()).toMatchObject({
      email,
      organisation: { slug: plainOrg },
    });
  });
});

describe("the comparison", () => {
  const untouched = () => {
    throw new Error("a named issuer is compared without a request");
  };
  const relyingParty = createRelyingParty({
    egress: { fetchDocument: untouched, execute: untouched },
    minter: { mintDocumentTicket: untouched, mintCallTicket: untouched },
    now: () => new Date(),
  });
  const keys = {
    issuer: "https://idp.latch.test",
    clientId: "latch",
    clientSecret: { itemName: "", keyId: "", sealedValue: Buffer.alloc(0), username: "" },
  };
  const answer = (query: string) => new URL(`${REDIRECT_URI}?state=s&code=c&${query}`);

  it("is a simple string comparison (RFC 9207 2.4), and one iss only", async () => {
    await expect(
      relyingParty.checkAnswerIssuer(keys, answer("iss=https%3A%2F%2Fidp.latch.test")),
    ).resolves.toBe(undefined);
    for (const query of [
      "iss=https%3A%2F%2Fidp.latch.test%2F",
      "iss=HTTPS%3A%2F%2Fidp.latch.test",
      "iss=",
      "iss=https%3A%2F%2Fidp.latch.test&iss=https%3A%2F%2Fidp-attacker.latch.test",
    ]) {
      await expect(relyingParty.checkAnswerIssuer(keys, answer(query)), query).rejects.toMatchObject({
        code: "sso_failed",
      });
    }
  });
});
