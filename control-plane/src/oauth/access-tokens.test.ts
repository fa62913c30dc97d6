// The access token's signature check across key rotations (DECISIONS "OAuth authorization
// server"): a replica trusts the key file (read again every few seconds, and at once for an unknown
// key id), a retired key only for tokens issued before its retirement, and no key retired longer
// than a token lives, whatever this replica signed with at its start.
import { generateKeyPairSync } from "node:crypto";
import { exportJWK, type JWK, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { createAccessTokenVerifier } from "./access-tokens.ts";
import {
  createOAuthKeyReader,
  KEY_FILE_REFRESH_MS,
  RETIRED_KEY_KEEP_MS,
  type StoredJwk,
} from "./oauth-keys.ts";

const BASE = "http://localhost:8787";

async function keyPair(kid: string) {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" } as JWK & { kid: string };
  const sign = (iat = Math.floor(Date.now() / 1000)) =>
    new SignJWT({ client_id: "c", org_id: "o", grant_id: "g" })
      .setProtectedHeader({ alg: "RS256", kid })
      .setIssuer(BASE)
      .setAudience(`${BASE}/mcp`)
      .setSubject("opr_1")
      .setJti(`jti-${kid}-${Math.random()}`)
      .setIssuedAt(iat)
      .setExpirationTime(iat + 600)
      .sign(privateKey);
  return { jwk, sign };
}

describe("the access token verifier", () => {
  it("trusts a retired key only for what it signed before, learns a rotation without a restart", async () => {
    const own = await keyPair("own");
    const newer = await keyPair("newer");
    let clock = Date.now();
    let keys: StoredJwk[] = [own.jwk];
    const reader = createOAuthKeyReader({
      read: () => ({ keys, cookie_keys: [] }),
      initial: { keys, cookie_keys: [] },
      clock: () => clock,
    });
    const verifier = createAccessTokenVerifier({
      baseUrl: BASE,
      keys: reader,
      now: () => new Date(),
    } as never);
    const before = await own.sign(Math.floor(clock / 1000) - 5);
    expect(await verifier.verify(before)).toMatchObject({ sub: "opr_1" });

    // Another replica rotated: `newer` signs, `own` retired now. A token of `newer` is learnt at once.
    const retiredAt = clock;
    keys = [newer.jwk, { ...own.jwk, retired_at: retiredAt }];
    expect(await verifier.verify(await newer.sign())).toMatchObject({ sub: "opr_1" });
    const forged = await own.sign(Math.floor(retiredAt / 1000) + 2);
    expect(await verifier.verify(forged)).toBeUndefined();
    expect(await verifier.verify(before)).toMatchObject({ sub: "opr_1" });

    // Retired longer than a token lives: trusted no more, though the file still lists it.
    clock = retiredAt + RETIRED_KEY_KEEP_MS + KEY_FILE_REFRESH_MS;
    expect(reader.view().keys.map((key) => key.kid)).toEqual(["newer"]);
    // A key neither listed nor its own is refused.
    const stranger = await keyPair("stranger");
    expect(await verifier.verify(await stranger.sign())).toBeUndefined();
  });

  it("learns that a known key was retired within KEY_FILE_REFRESH_MS, with no unknown key id", async () => {
    const own = await keyPair("own");
    const newer = await keyPair("newer");
    let clock = Date.now();
    let keys: StoredJwk[] = [own.jwk];
    const reader = createOAuthKeyReader({
      read: () => ({ keys, cookie_keys: [] }),
      initial: { keys, cookie_keys: [] },
      clock: () => clock,
    });
    const verifier = createAccessTokenVerifier({
      baseUrl: BASE,
      keys: reader,
      now: () => new Date(),
    } as never);
    const retiredAt = Date.now() - 10_000;
    keys = [newer.jwk, { ...own.jwk, retired_at: retiredAt }];
    const forged = await own.sign();
    // Until the file is read again the rotation is unknown here; then the forged token is refused.
    expect(await verifier.verify(forged)).toMatchObject({ sub: "opr_1" });
    clock += KEY_FILE_REFRESH_MS;
    expect(await verifier.verify(forged)).toBeUndefined();
    expect(await verifier.verify(await own.sign(Math.floor(retiredAt / 1000) - 5))).toMatchObject({
      sub: "opr_1",
    });
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
    // Every other rule holds: the consent, the grant, the membership (and any Require SSO) and the
    // client are live.
    const verifier = createAccessTokenVerifier({
      baseUrl: BASE,
      keys: {
        view: () => ({ keys: [jwk], retiredAt: new Map() }),
        reload: () => ({ keys: [jwk], retiredAt: new Map() }),
      },
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
      meetsRequiredSso: async () => true,
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
