// What an identity provider writes that no honest one would, through the real routes and the real
// egress proxy: a discovery document whose lists are not lists (RFC 8414 2 makes each a JSON
// array). One is read as the field left out, as openid-client reads it for its own checks: the
// sign-in goes on, never a 500 nor a page quoting a JavaScript error. The provider here is a few lines of its own
// (discovery, keys, token endpoint) on a loopback TLS origin of the test PKI's *.latch.test names,
// so that each field is the test's to choose; the browser's walk through its login is skipped:
// the test comes back to the redirect URI with a code of its own, as the provider would send it.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DOH_URL, startTestDoh, type TestDoh } from "../../test/doh-server.ts";
import { Browser, type HostedHarness, signUpOperator, startHosted } from "../../test/hosted.ts";

const BASE = "http://localhost:8787";
const PKI = new URL("../../../egress-proxy/test/pki/", import.meta.url);
const pki = (file: string) => readFileSync(new URL(file, PKI), "utf8");
const run = () => Math.random().toString(16).slice(2, 8);
/** This run's own address: sign-ins started are counted per address. */
const RUN_ADDRESS = `10.${[1, 2, 3].map(() => Math.floor(Math.random() * 250) + 1).join(".")}`;

interface HostileIdp {
  issuer: string;
  connectTo: string;
  clientId: string;
  clientSecret: string;
  /** The claims of the next ID token its token endpoint answers (iss, aud, iat, exp added). */
  nextClaims(claims: Record<string, unknown>): void;
  close(): Promise<void>;
}

/** A provider whose discovery document carries `discoveryExtra` over the usual fields. */
async function startHostileIdp(host: string, discoveryExtra: Record<string, unknown>): Promise<HostileIdp> {
  const issuer = `https://${host}`;
  const { privateKey, publicKey } = await generateKeyPair("RS256", { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "RS256", use: "sig" };
  const clientId = "latch-hostile-client";
  const clientSecret = `secret-${randomBytes(12).toString("hex")}`;
  let claims: Record<string, unknown> = {};
  const json = (res: import("node:http").ServerResponse, body: unknown) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify(body));
  };
  const server = createServer(
    { cert: pki("trusted-leaf.pem"), key: pki("trusted-leaf-key.pem") },
    (req, res) => {
      req.resume();
      req.on("end", async () => {
        const path = (req.url ?? "/").split("?")[0];
        if (path === "/.well-known/openid-configuration") {
          return json(res, {
            issuer,
            authorization_endpoint: `${issuer}/authorize`,
            token_endpoint: `${issuer}/token`,
            jwks_uri: `${issuer}/jwks`,
            response_types_supported: ["code"],
            subject_types_supported: ["public"],
            ...discoveryExtra,
          });
        }
        if (path === "/jwks") return json(res, { keys: [jwk] });
        if (path === "/token" && req.method === "POST") {
          const now = Math.floor(Date.now() / 1000);
          const idToken = await new SignJWT({ iat: now, exp: now + 300, ...claims })
            .setProtectedHeader({ alg: "RS256", kid: "k1" })
            .setIssuer(issuer)
            .setAudience(clientId)
            .sign(privateKey);
          return json(res, { id_token: idToken, access_token: "at", token_type: "Bearer", expires_in: 300 });
        }
        res.statusCode = 404;
        res.end();
      });
    },
  );
  server.on("tlsClientError", () => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    issuer,
    connectTo: `${host}:443:127.0.0.1:${port}`,
    clientId,
    clientSecret,
    nextClaims(next) {
      claims = next;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Its ID token algorithms as one string, not a list (RFC 8414 2: a JSON array). */
let oddAlgorithms: HostileIdp;
/** Its token endpoint's authentication methods as a number. */
let oddMethods: HostileIdp;
/** An honest discovery document; the addresses its ID tokens carry are the test's. */
let lookalikes: HostileIdp;
let doh: TestDoh;
let h: HostedHarness;
const orgs: Record<string, { slug: string; domain: string }> = {};

/** An owner's organisation connected to `idp` for a domain of its own, proven. */
async function connectedOrganisation(idp: HostileIdp): Promise<{ slug: string; domain: string }> {
  const domain = `hostile-${run()}.latch.test`;
  const owner = (await signUpOperator(h, { label: "sso-hostile-owner" })).browser;
  const connected = await owner.request("PUT", "/api/orgs/sso", {
    issuer: idp.issuer,
    client_id: idp.clientId,
    client_secret: idp.clientSecret,
    email_domains: [domain],
  });
  expect(connected.statusCode, connected.body).toBe(200);
  const { record } = connected.json().connection.domains[0];
  doh.publish(record.name, record.value);
  const proven = await owner.request("POST", "/api/orgs/sso/verify-domains", {});
  expect(proven.json().checked, proven.body).toEqual([{ domain, verified: true }]);
  return { slug: (await owner.request("GET", "/api/auth/me")).json().organisation.slug, domain };
}

beforeAll(async () => {
  oddAlgorithms = await startHostileIdp("idp-odd-algs.latch.test", {
    id_token_signing_alg_values_supported: "RS256",
  });
  oddMethods = await startHostileIdp("idp-odd-methods.latch.test", {
    token_endpoint_auth_methods_supported: 7,
  });
  lookalikes = await startHostileIdp("idp-lookalikes.latch.test", {
    id_token_signing_alg_values_supported: ["RS256"],
  });
  doh = await startTestDoh();
  h = await startHosted({
    connectTo: [oddAlgorithms.connectTo, oddMethods.connectTo, lookalikes.connectTo, doh.connectTo],
    ssoDnsUrl: DOH_URL,
  });
  orgs.algorithms = await connectedOrganisation(oddAlgorithms);
  orgs.methods = await connectedOrganisation(oddMethods);
  orgs.lookalikes = await connectedOrganisation(lookalikes);
}, 120_000);

afterAll(async () => {
  await h?.close();
  await Promise.all([oddAlgorithms?.close(), oddMethods?.close(), lookalikes?.close(), doh?.close()]);
});

/** A sign-in with `idp` as `email` (else a new address of the organisation's domain). */
async function signIn(idp: HostileIdp, org: { slug: string; domain: string }, as?: string) {
  const browser = new Browser(h.app, BASE, RUN_ADDRESS);
  const started = await browser.request("GET", `/sso/${org.slug}`);
  expect(started.statusCode, started.body).toBe(302);
  const authorize = new URL(String(started.headers.location));
  const email = as ?? `person-${run()}@${org.domain}`;
  idp.nextClaims({
    sub: `sub-${email}`,
    email,
    email_verified: true,
    nonce: authorize.searchParams.get("nonce"),
  });
  const callback = new URLSearchParams({
    code: `code-${run()}`,
    state: String(authorize.searchParams.get("state")),
    iss: idp.issuer,
  });
  const answer = await browser.request("GET", `/sso/callback?${callback}`);
  return { browser, email, answer };
}

describe("a provider's discovery document whose lists are not lists", () => {
  it("signs in as if it named no algorithms (RS256), never a 500", async () => {
    const { browser, email, answer } = await signIn(oddAlgorithms, orgs.algorithms!);
    expect(answer.statusCode, answer.body).toBe(303);
    expect((await browser.request("GET", "/api/auth/me")).json()).toMatchObject({
      email,
      signed_in_with_sso: true,
    });
  });

  it("signs in as if it named no client authentication (client_secret_basic)", async () => {
    const { browser, email, answer } = await signIn(oddMethods, orgs.methods!);
    expect(answer.statusCode, answer.body).toBe(303);
    expect((await browser.request("GET", "/api/auth/me")).json()).toMatchObject({
      email,
      signed_in_with_sso: true,
    });
  });
});

describe("an address the provider spells otherwise than Latch keeps it", () => {
  it("signs in nobody: a Kelvin sign is no k, a Unicode space no nothing", async () => {
    const local = `kate-${run()}`;
    const kate = `${local}@${orgs.lookalikes!.domain}`;
    const first = await signIn(lookalikes, orgs.lookalikes!, kate);
    expect(first.answer.statusCode, first.answer.body).toBe(303);

    // U+212A KELVIN SIGN lowercases to "k"; trim() drops U+00A0 and U+FEFF. Each is another
    // address at the provider (another person, another mailbox), never Kate's account.
    for (const lookalike of [
      `\u212A${local.slice(1)}@${orgs.lookalikes!.domain}`,
      `${kate}\u00A0`,
      `\uFEFF${kate}`,
    ]) {
      const { browser, answer } = await signIn(lookalikes, orgs.lookalikes!, lookalike);
      expect(answer.statusCode, `${JSON.stringify(lookalike)}: ${answer.body}`).toBe(401);
      expect(answer.body).toContain("email address is not valid");
      expect((await browser.request("GET", "/api/auth/me")).statusCode).toBe(401);
    }
  });
});
