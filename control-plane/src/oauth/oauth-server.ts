// Assembles the authorization server from the database, the key file and the egress link: the
// storage adapter, oidc-provider, the access-token verifier /mcp uses, the client metadata document
// fetcher and the service the pages call. control-plane.ts registers its routes.
import type { FastifyInstance } from "fastify";
import type { Kysely } from "kysely";
import type Provider from "oidc-provider";
import { errors } from "oidc-provider";
import type { AuditEvent } from "../audit/audit.repo.ts";
import type { ClientsService } from "../clients/clients.service.ts";
import type { Database } from "../db/schema.ts";
import type { EgressClient } from "../egress/egress-client.ts";
import type { TicketMinter } from "../egress/tickets.ts";
import { createRateLimitRepo } from "../limits/rate-limit.repo.ts";
import { createRateLimiter } from "../limits/rate-limit.ts";
import type { OrgsService } from "../orgs/orgs.service.ts";
import { createAccessTokenVerifier } from "./access-tokens.ts";
import { createDocumentFetcher } from "./cimd-fetch.ts";
import { registerConsentRoutes } from "./consent.routes.ts";
import { type ConsentRow, createOAuthRepo } from "./oauth.repo.ts";
import { registerOAuthRoutes } from "./oauth.routes.ts";
import { createOAuthService } from "./oauth.service.ts";
import { createOAuthArtifactsRepo } from "./oauth-artifacts.repo.ts";
import {
  createOAuthKeyReader,
  currentKid,
  type JwksFile,
  type loadOrCreateOAuthKeys,
  readOAuthKeys,
} from "./oauth-keys.ts";
import { createOAuthProvider, type OAuthProviderDeps } from "./oauth-provider.ts";

export interface OAuthServerDeps {
  db: Kysely<Database>;
  baseUrl: string;
  dataDir: string;
  /** OAUTH_JWKS_FILE, when the keys are mounted from a secret store. */
  keysFile?: string | undefined;
  keys: Awaited<ReturnType<typeof loadOrCreateOAuthKeys>>;
  egress: Pick<EgressClient, "fetchDocument">;
  minter: Pick<TicketMinter, "mintDocumentTicket">;
  clients: Pick<ClientsService, "ensureOAuthClient" | "findLiveClientForToken">;
  orgs: Pick<OrgsService, "findOrganisationsOf">;
  /** The operator's organisations that require their single sign-on (consent excludes them). */
  findSsoRequiringOrganisations(operatorId: string): Promise<string[]>;
  /** The environments this plane serves; consent picks one of them. */
  environments: readonly string[];
  recordEvent(event: AuditEvent): Promise<void>;
  isOperator(operatorId: string): Promise<boolean>;
  /**
   * Told (its database code only) when a ledger row of an issued or revoked token is not written,
   * or a grant found to outlive its member's removal could not be ended (its token is refused all
   * the same).
   */
  onLedgerFailure?: (error: unknown) => void;
  /**
   * An error inside oidc-provider's own routes: it answers `server_error` (500) and says nothing
   * else, so this is the operator's only sight of the cause (a database outage, an adapter fault).
   */
  onServerError?: (error: unknown) => void;
  now: () => Date;
}

export function createOAuthServer(deps: OAuthServerDeps) {
  const onLedgerFailure = deps.onLedgerFailure ?? (() => undefined);
  // The service is made below; a grant ended by a raced reuse is recorded through it.
  let recordGrantRevoked = (_grantId: string): Promise<void> => Promise.resolve();
  const artifacts = createOAuthArtifactsRepo(deps.db, deps.now, {
    deviceCodeSecret: deps.keys.cookie_keys[0] ?? "",
    onReuseRevoked: (grantId) => void recordGrantRevoked(grantId).catch(onLedgerFailure),
  });
  const oauth = createOAuthRepo(deps.db);
  const limiter = createRateLimiter(createRateLimitRepo(deps.db), deps.now);
  // The key file as every replica trusts it now: /mcp verifies and /oauth/jwks lists from it, and
  // oidc-provider signs with its current key (`currentProvider` below), so a rotation reaches a
  // running replica within seconds.
  const keyReader = createOAuthKeyReader({
    read: () => readOAuthKeys(deps.dataDir, deps.keysFile),
    initial: deps.keys,
  });
  const documents = createDocumentFetcher({ egress: deps.egress, minter: deps.minter, limiter });
  /**
   * "Require SSO" (DECISIONS "Passkeys and single sign-on") for a grant: where its organisation
   * requires its single sign-on of the operator's address, the grant lives only if its consent was
   * given in a session begun with that sign-on. A grant that recorded no sign-in counts as not.
   */
  async function meetsRequiredSso(consent: ConsentRow): Promise<boolean> {
    const requiring = await deps.findSsoRequiringOrganisations(consent.operator_id);
    if (!requiring.includes(consent.organisation_id)) return true;
    const signIn = await artifacts.findGrantSignIn(consent.grant_id);
    return signIn?.ssoOrganisationId === consent.organisation_id;
  }
  const providerDeps: Omit<OAuthProviderDeps, "keys"> = {
    baseUrl: deps.baseUrl,
    artifacts,
    findConsent: async (grantId) => {
      const consent = await oauth.findConsent(grantId);
      if (!consent || consent.revoked_at) return undefined;
      // DECISIONS "Teams": removing a member destroys the grants they gave there. A consent recorded
      // while the removal committed (after its clean-up ran), or whose clean-up failed, is ended now,
      // before a token is minted from it, even when they have been invited back since.
      if (!(await oauth.isMemberSince(consent.organisation_id, consent.operator_id, consent.created_at))) {
        await service.endDeadConsent(consent, "member_removed").catch(onLedgerFailure);
        return undefined;
      }
      // Spec 3.4: a refresh for a revoked agent is invalid_grant. A consent recorded while its client
      // row was being revoked (after `endClient` ran) would otherwise mint tokens /mcp refuses, and
      // the agent would refresh in a loop; it ends here instead.
      if (await oauth.isClientRowRevoked(consent.client_row_id)) {
        await service.endDeadConsent(consent, "client_revoked").catch(onLedgerFailure);
        return undefined;
      }
      // The organisation came to require its single sign-on of this operator after an email-code
      // (or passkey) session consented: that session could not act there now, nor does its agent.
      if (!(await meetsRequiredSso(consent))) {
        await service.endDeadConsent(consent, "sso_required").catch(onLedgerFailure);
        throw new errors.InvalidGrant(
          "the organisation requires its single sign-on: connect the agent again from a session signed in with it",
        );
      }
      return consent;
    },
    isOperator: deps.isOperator,
    fetchClientMetadata: (url) => documents.fetch(url),
    allowMetadataFetch: async (url, ctx) => {
      // The resume of an interaction (after /consent, on any replica, past any cache) resolves its
      // client again: from the document it was shown and consented with, kept with it, never
      // fetched again (a document changed or gone since would fail an authorization whose consent
      // is recorded, and its fetch would count twice against spec 8's limits).
      const uid = ctx?.oidc?.entities?.Interaction?.uid;
      if (typeof uid === "string") {
        const kept = await artifacts.findInteractionClient(uid);
        if (kept?.clientId === url && kept.document) return documents.keep(url, kept.document);
      }
      return documents.allow(url, ctx?.ip);
    },
  };
  /** One oidc-provider over `keys`, answering to the ledger and the operator as every other. */
  const providerOver = (keys: JwksFile): Provider => {
    const made = createOAuthProvider({ ...providerDeps, keys });
    // It sits behind Fastify: it trusts the forwarded protocol the routes set, nothing a caller sent.
    made.proxy = true;
    made.on("server_error", (_ctx: unknown, error: unknown) => deps.onServerError?.(error));
    made.on("grant.revoked", (_ctx: unknown, grantId: string) => {
      void service.recordGrantRevoked(grantId).catch(onLedgerFailure);
    });
    // Spec 6: the Access ledger records every token issued (JWT access tokens are not stored, so
    // oidc-provider says "issued" rather than "saved"), by a hash of its jti.
    made.on("access_token.issued", (token: { grantId?: string; jti: string }) => {
      if (token.grantId) void service.recordTokenIssued(token.grantId, token.jti).catch(onLedgerFailure);
    });
    return made;
  };
  // oidc-provider signs with the keys it was made with: when the key file's signing key changes (a
  // rotation, here or by `vault` on another replica), the next request is answered by one made over
  // the file as it is now, so new tokens name the new key within KEY_FILE_REFRESH_MS (DECISIONS),
  // never the retired one /mcp refuses. Everything else it keeps is in the database or the cookie
  // keys, which a rotation leaves as they are.
  let signing = { kid: currentKid(deps.keys), provider: providerOver(deps.keys) };
  // The pages' interactions and grants (the service) sign nothing: the first provider serves them.
  const provider = signing.provider;
  const currentProvider = (): Provider => {
    const file = keyReader.file();
    const kid = currentKid(file);
    if (kid === signing.kid) return signing.provider;
    try {
      signing = { kid, provider: providerOver(file) };
    } catch (error) {
      // A key oidc-provider refuses (a hand-edited file): the provider of before keeps answering,
      // and the operator is told once, not on every request.
      signing = { kid, provider: signing.provider };
      deps.onServerError?.(error);
    }
    return signing.provider;
  };
  const tokens = createAccessTokenVerifier({
    baseUrl: deps.baseUrl,
    keys: keyReader,
    oauth,
    artifacts,
    findLiveClient: deps.clients.findLiveClientForToken,
    meetsRequiredSso,
    now: deps.now,
  });
  const service = createOAuthService({
    provider,
    baseUrl: deps.baseUrl,
    oauth,
    artifacts,
    clients: deps.clients,
    orgs: deps.orgs,
    findSsoRequiringOrganisations: deps.findSsoRequiringOrganisations,
    environments: deps.environments,
    tokens,
    recordEvent: deps.recordEvent,
    now: deps.now,
  });

  recordGrantRevoked = service.recordGrantRevoked;

  return {
    /** The provider answering now (its signing key the key file's current one). */
    provider: currentProvider,
    service,
    tokens,
    registerRoutes(app: FastifyInstance) {
      registerOAuthRoutes(app, {
        baseUrl: deps.baseUrl,
        provider: currentProvider,
        service,
        limiter,
        keys: keyReader,
      });
      registerConsentRoutes(app, { service });
    },
  };
}

export type OAuthServer = ReturnType<typeof createOAuthServer>;
