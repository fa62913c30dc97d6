// Spec 5 rule 1 and DECISIONS: /mcp accepts an OAuth access token when its RS256 signature checks
// against our own keys (no network), `iss` is BASE_URL, `aud` is exactly BASE_URL/mcp, it is
// within 600 s of issue and not expired (30 s skew), it is bound to no key (no `cnf`), its jti is
// not denylisted, its grant is alive, its consent is not revoked, and the operator who consented is
// still a member of the organisation named by `org_id`, the same membership they consented in, and
// where that organisation requires its single sign-on of their address, the consent was given in a
// session begun with it. The agent behind it is the model client row of that consent. A key is trusted only while the key file
// lists it (read again every few seconds, and at once for an unknown key id) and, once retired, only
// for tokens issued before its retirement: a key rotated out after a leak signs nothing that passes.
import { sha256Hex } from "@latch/shared/crypto/hash";
import { createLocalJWKSet, type JWTPayload, jwtVerify } from "jose";
import type { ClientRow } from "../db/schema.ts";
import type { ConsentRow, OAuthRepo } from "./oauth.repo.ts";
import type { OAuthArtifactsRepo } from "./oauth-artifacts.repo.ts";
import type { OAuthKeyReader, OAuthKeyView } from "./oauth-keys.ts";
import { ACCESS_TOKEN_TTL_S, mcpResource } from "./oauth-provider.ts";

const SKEW_S = 30;
/** An unknown key id re-reads the key file at most this often (a replica that rotated first). */
const RELOAD_INTERVAL_MS = 10_000;
const JWT_SHAPE = /^eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

export interface AccessTokenClaims extends JWTPayload {
  jti: string;
  sub: string;
  client_id: string;
  org_id: string;
  grant_id: string;
  exp: number;
  iat: number;
}

export function looksLikeJwt(token: string): boolean {
  return token.length < 8192 && JWT_SHAPE.test(token);
}

export function jtiHash(jti: string): string {
  return sha256Hex(`jti:${jti}`);
}

export interface AccessTokenDeps {
  baseUrl: string;
  /** The trusted keys of the key file (`createOAuthKeyReader`). */
  keys: Pick<OAuthKeyReader, "view" | "reload">;
  oauth: OAuthRepo;
  artifacts: OAuthArtifactsRepo;
  /** The live client row; `isUse` false reads it without marking its use (a stream's re-check). */
  findLiveClient(id: string, options?: { isUse?: boolean }): Promise<ClientRow | undefined>;
  /** False when the consent's organisation requires its single sign-on and the consent was not given through it. */
  meetsRequiredSso(consent: ConsentRow): Promise<boolean>;
  now: () => Date;
}

export function createAccessTokenVerifier(deps: AccessTokenDeps) {
  let view = deps.keys.view();
  let keySet = createLocalJWKSet({ keys: view.keys });
  let reloadedAt = 0;
  const audience = mcpResource(deps.baseUrl);

  /** The key set of the keys trusted now; rebuilt only when the key file changed. */
  const keysNow = (next: OAuthKeyView) => {
    if (next !== view) {
      view = next;
      keySet = createLocalJWKSet({ keys: next.keys });
    }
    return { keySet, retiredAt: next.retiredAt };
  };

  async function verifyWith(token: string, keys: ReturnType<typeof keysNow>) {
    const { payload, protectedHeader } = await jwtVerify(token, keys.keySet, {
      issuer: deps.baseUrl,
      audience,
      algorithms: ["RS256"],
      clockTolerance: SKEW_S,
      maxTokenAge: ACCESS_TOKEN_TTL_S + SKEW_S,
      currentDate: deps.now(),
      requiredClaims: ["jti", "sub", "client_id", "exp", "iat"],
    });
    const claims = payload as AccessTokenClaims;
    // A retired key signs nothing after its retirement: a token it signed later was made by
    // whoever still holds the old private key (the leak a rotation answers), or by a replica in the
    // seconds before it read the key file again (KEY_FILE_REFRESH_MS), whose client then refreshes.
    const retiredAt = protectedHeader.kid === undefined ? undefined : keys.retiredAt.get(protectedHeader.kid);
    if (retiredAt !== undefined && claims.iat * 1000 > retiredAt) return undefined;
    return claims;
  }

  async function verifySignature(token: string): Promise<AccessTokenClaims | undefined> {
    try {
      return await verifyWith(token, keysNow(deps.keys.view()));
    } catch (error) {
      const code = (error as { code?: string }).code;
      const now = Date.now();
      if (code !== "ERR_JWKS_NO_MATCHING_KEY" || now - reloadedAt < RELOAD_INTERVAL_MS) return undefined;
      reloadedAt = now;
      try {
        return await verifyWith(token, keysNow(deps.keys.reload()));
      } catch {
        return undefined;
      }
    }
  }

  return {
    /** Verifies a verified access token's claims; the decoded claims or undefined. */
    async verify(token: string): Promise<AccessTokenClaims | undefined> {
      if (!looksLikeJwt(token)) return undefined;
      return verifySignature(token);
    },

    /**
     * The live model client an access token acts as, or undefined for any failed rule. `isUse`
     * false checks every rule without marking the client used (an idle stream's re-check).
     */
    async authenticate(token: string, options: { isUse?: boolean } = {}): Promise<ClientRow | undefined> {
      if (!looksLikeJwt(token)) return undefined;
      const claims = await verifySignature(token);
      if (!claims) return undefined;
      // A sender-constrained token (RFC 9449 DPoP or RFC 8705 mTLS, `cnf`) is one whose holder must
      // prove a key; /mcp asks no proof, so such a token is never taken as a plain bearer (the
      // authorization server has DPoP off and mints none).
      if (claims.cnf !== undefined) return undefined;
      // The lifetime is ours to enforce, whatever a token claims.
      if (claims.exp - claims.iat > ACCESS_TOKEN_TTL_S) return undefined;
      if (typeof claims.org_id !== "string" || typeof claims.grant_id !== "string") return undefined;
      if (await deps.oauth.isTokenDenied(jtiHash(claims.jti))) return undefined;
      const consent = await deps.oauth.findConsent(claims.grant_id);
      if (!consent || consent.revoked_at) return undefined;
      if (consent.organisation_id !== claims.org_id || consent.operator_id !== claims.sub) return undefined;
      if (!(await deps.artifacts.isGrantLive(claims.grant_id, deps.now()))) return undefined;
      const { organisation_id: organisationId, operator_id: operatorId, created_at: consentedAt } = consent;
      if (!(await deps.oauth.isMemberSince(organisationId, operatorId, consentedAt))) return undefined;
      if (!(await deps.meetsRequiredSso(consent))) return undefined;
      const client = await deps.findLiveClient(consent.client_row_id, options);
      if (!client || client.oauth_client_id !== claims.client_id) return undefined;
      return client;
    },
  };
}

export type AccessTokenVerifier = ReturnType<typeof createAccessTokenVerifier>;
