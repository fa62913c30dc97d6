// The access token's signature check across key rotations (DECISIONS "OAuth authorization
// server"): a replica trusts the key file (re-read on an unknown key id) and, always, the keys it
// signs with itself, so that a replica not restarted between two rotations (the file has dropped
// its key by then) does not refuse its own tokens.
import { generateKeyPairSync } from "node:crypto";
import { exportJWK, type JWK, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { createAccessTokenVerifier } from "./access-tokens.ts";

const BASE = "http://localhost:8787";

async function keyPair(kid: string) {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" } as JWK;
  const sign = () =>
    new SignJWT({ client_id: "c", org_id: "o", grant_id: "g" })
      .setProtectedHeader({ alg: "RS256", kid })
      .setIssuer(BASE)
      .setAudience(`${BASE}/mcp`)
      .setSubject("opr_1")
      .setJti(`jti-${kid}-${Math.random()}`)
      .setIssuedAt()
      .setExpirationTime("600s")
      .sign(privateKey);
  return { jwk, sign };
}

describe("the access token verifier", () => {
  it("keeps accepting its own key after the key file dropped it, and learns a new key from the file", async () => {
    const own = await keyPair("own");
    const newer = await keyPair("newer");
    let file: JWK[] = [own.jwk];
    const verifier = createAccessTokenVerifier({
      baseUrl: BASE,
      readJwks: () => ({ keys: file }),
      ownJwks: { keys: [own.jwk] },
      now: () => new Date(),
    } as never);
    expect(await verifier.verify(await own.sign())).toMatchObject({ sub: "opr_1" });
    // Two rotations later the file lists only the newest key; another replica signs with it.
    file = [newer.jwk];
    expect(await verifier.verify(await newer.sign())).toMatchObject({ sub: "opr_1" });
    expect(await verifier.verify(await own.sign())).toMatchObject({ sub: "opr_1" });
    // A key neither listed nor its own is refused.
    const stranger = await keyPair("stranger");
    expect(await verifier.verify(await stranger.sign())).toBeUndefined();
  });
});

describe("a key-bound access token (RFC 9449 DPoP, RFC 8705: `cnf`)", () => {
  it("is never taken as a bearer at /mcp, whatever else holds", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const jwk = { ...(await exportJWK(publicKey)), kid: "k", alg: "RS256", use: "sig" } as JWK;
    const sign = (extra: Record<string, unknown>) =>
      new SignJWT({ client_id: "oac_1", org_id: "org_1", grant_id: "g", ...extra })
        .setProtectedHeader({ alg: "RS256", kid: "k" })
        .setIssuer(BASE)
        .setAudience(`${BASE}/mcp`)
        .setSubject("opr_1")
        .setJti(`jti-${Math.random()}`)
        .setIssuedAt()
        .setExpirationTime("600s")
        .sign(privateKey);
    const client = { id: "cli_1", oauth_client_id: "oac_1" };
    // Every other rule holds: the consent, the grant, the membership and the client are live.
    const verifier = createAccessTokenVerifier({
      baseUrl: BASE,
      readJwks: () => ({ keys: [jwk] }),
      oauth: {
        isTokenDenied: async () => false,
        findConsent: async () => ({
          organisation_id: "org_1",
          operator_id: "opr_1",
          client_row_id: "cli_1",
          revoked_at: null,
          created_at: new Date(),
        }),
        isMemberSince: async () => true,
      },
      artifacts: { isGrantLive: async () => true },
      findLiveClient: async () => client,
      now: () => new Date(),
    } as never);
    expect(await verifier.authenticate(await sign({}))).toBe(client);
    expect(
      await verifier.authenticate(
        await sign({ cnf: { jkt: "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I" } }),
      ),
    ).toBeUndefined();
    expect(
      await verifier.authenticate(
        await sign({ cnf: { "x5t#S256": "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2" } }),
      ),
    ).toBeUndefined();
  });
});
