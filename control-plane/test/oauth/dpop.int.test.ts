// Latch's access tokens are bearer tokens (DECISIONS "OAuth authorization server": /mcp checks the
// signature, audience, expiry, membership and grant, and asks no proof of possession). A client that
// sends a DPoP proof (RFC 9449) to /oauth/token is answered as a server without DPoP answers: a
// Bearer token with no `cnf`, never a token bound to a key /mcp would not check. A registration
// that demands bound tokens is refused, saying so.
import { randomUUID } from "node:crypto";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import { authorizeAndConsent, BASE, form, mcpWith, pkcePair, RESOURCE, register } from "./oauth-flow.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

const REDIRECT = "http://127.0.0.1:33418/callback";

/** A real DPoP proof (RFC 9449 4.2) for POST /oauth/token, signed with the client's ES256 key. */
async function dpopProof(): Promise<string> {
  const { privateKey, publicKey } = await generateKeyPair("ES256");
  return new SignJWT({ htm: "POST", htu: `${BASE}/oauth/token`, jti: randomUUID() })
    .setProtectedHeader({ alg: "ES256", typ: "dpop+jwt", jwk: await exportJWK(publicKey) })
    .setIssuedAt()
    .sign(privateKey);
}

const claimsOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString());

async function tokenWithProof(fields: Record<string, string>) {
  return h.app.inject({
    method: "POST",
    url: "/oauth/token",
    headers: { "content-type": "application/x-www-form-urlencoded", dpop: await dpopProof() },
    payload: form(fields),
  });
}

const mcp = (accessToken: string, method?: string) => mcpWith(h.app, accessToken, method);

describe("a DPoP proof at /oauth/token", () => {
  it("is ignored: the code and the refresh give Bearer tokens with no cnf, which /mcp takes", async () => {
    const op = await readyOperator(h);
    const registered = await register(h.app, { client_name: "Proving agent", redirect_uris: [REDIRECT] });
    expect(registered.statusCode, registered.body).toBe(201);
    const clientId = registered.json().client_id as string;
    const pkce = pkcePair();
    const { code } = await authorizeAndConsent(op, {
      clientId,
      redirectUri: REDIRECT,
      challenge: pkce.challenge,
    });
    const issued = await tokenWithProof({
      grant_type: "authorization_code",
      code: code!,
      redirect_uri: REDIRECT,
      client_id: clientId,
      code_verifier: pkce.verifier,
      resource: RESOURCE,
    });
    expect(issued.statusCode, issued.body).toBe(200);
    expect(issued.json().token_type).toBe("Bearer");
    expect(claimsOf(issued.json().access_token).cnf).toBeUndefined();
    expect((await mcp(issued.json().access_token)).statusCode).toBe(200);

    const refreshed = await tokenWithProof({
      grant_type: "refresh_token",
      refresh_token: issued.json().refresh_token,
      client_id: clientId,
      resource: RESOURCE,
    });
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    expect(refreshed.json().token_type).toBe("Bearer");
    expect(claimsOf(refreshed.json().access_token).cnf).toBeUndefined();
    expect((await mcp(refreshed.json().access_token)).statusCode).toBe(200);
  });

  it("is not advertised: the metadata names no DPoP signing algorithms", async () => {
    const metadata = (
      await h.app.inject({ method: "GET", url: "/.well-known/oauth-authorization-server" })
    ).json();
    expect(metadata.dpop_signing_alg_values_supported).toBeUndefined();
  });
});

describe("a registration asking for key-bound access tokens", () => {
  it("is refused with invalid_client_metadata naming the field", async () => {
    for (const field of ["dpop_bound_access_tokens", "tls_client_certificate_bound_access_tokens"]) {
      const answer = await register(h.app, {
        client_name: "Bound agent",
        redirect_uris: [REDIRECT],
        [field]: true,
      });
      expect(answer.statusCode, answer.body).toBe(400);
      expect(answer.json().error).toBe("invalid_client_metadata");
      expect(answer.json().error_description).toContain(field);
    }
    // Saying false asks for nothing Latch does not do.
    const plain = await register(h.app, {
      client_name: "Bearer agent",
      redirect_uris: [REDIRECT],
      dpop_bound_access_tokens: false,
    });
    expect(plain.statusCode, plain.body).toBe(201);
  });
});
