// Spec 5 rule 1 and DECISIONS: /mcp accepts an OAuth access token when its RS256 signature checks
// against our own keys (no network), `iss` is BASE_URL, `aud` is exactly BASE_URL/mcp, it is
// within 600 s of issue and not expired (30 s skew), it is bound to no key (no `cnf`), its jti is
// not denylisted, its grant is alive, its consent is not revoked, and the operator who consented is
// still a member of the organisation named by `org_id`, the same membership they consented in. The
// agent behind it is the model client row of that consent.
import { sha256Hex } from "@latch/shared/crypto/hash";
import { createLocalJWKSet, type JWK, type JWTPayload, jwtVerify } from "jose";
import type { ClientRow } from "../db/schema.ts";
import type { OAuthRepo } from "./oauth.repo.ts";
import type { OAuthArtifactsRepo } from "./oauth-artifacts.repo.ts";
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
  readJwks(): { keys: JWK[] };
  /**
   * The public keys this process signs with, as loaded at its start: always trusted beside the
   * file's. A replica not restarted since a rotation still signs with its key after the file has
   * dropped it (two rotations apart), and must not then refuse its own tokens.
   */
  ownJwks?: { keys: JWK[] };
  oauth: OAuthRepo;
  artifacts: OAuthArtifactsRepo;
  /** The live client row; `isUse` false reads it without marking its use (a stream's re-check). */
  findLiveClient(id: string, options?: { isUse?: boolean }): Promise<ClientRow | undefined>;
  now: () => Date;
}

export function createAccessTokenVerifier(deps: AccessTokenDeps) {
  const readKeys = () => {
    const file = deps.readJwks();
    const listed = new Set(file.keys.map((key) => key.kid));
    return { keys: [...file.keys, ...(deps.ownJwks?.keys ?? []).filter((key) => !listed.has(key.kid))] };
  };
  let keySet = createLocalJWKSet(readKeys());
  let reloadedAt = 0;
  const audience = mcpResource(deps.baseUrl);

  async function verifySignature(token: string): Promise<AccessTokenClaims | undefined> {
    const options = {
      issuer: deps.baseUrl,
      audience,
      algorithms: ["RS256"],
      clockTolerance: SKEW_S,
      maxTokenAge: ACCESS_TOKEN_TTL_S + SKEW_S,
      currentDate: deps.now(),
      requiredClaims: ["jti", "sub", "client_id", "exp", "iat"],
    };
    try {
      return (await jwtVerify(token, keySet, options)).payload as AccessTokenClaims;
    } catch (error) {
      const code = (error as { code?: string }).code;
      const now = Date.now();
      if (code !== "ERR_JWKS_NO_MATCHING_KEY" || now - reloadedAt < RELOAD_INTERVAL_MS) return undefined;
      reloadedAt = now;
      keySet = createLocalJWKSet(readKeys());
      try {
        return (await jwtVerify(token, keySet, options)).payload as AccessTokenClaims;
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
      const client = await deps.findLiveClient(consent.client_row_id, options);
      if (!client || client.oauth_client_id !== claims.client_id) return undefined;
      return client;
    },
  };
}

export type AccessTokenVerifier = ReturnType<typeof createAccessTokenVerifier>;
