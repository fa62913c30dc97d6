// The authorization server (spec 4.3 "OAuth endpoints", 5 rules 1 and 2; DECISIONS "OAuth
// authorization server") as one oidc-provider instance. Issuer is BASE_URL exactly; endpoints sit
// under /oauth (plus /device); consent happens on our own /consent page (consent.routes.ts), where
// the operator signs in with Latch's own sign-in and picks the organisation the agent acts in.
// Access tokens are RS256 JWTs for the one resource, BASE_URL/mcp, that live 600 s; refresh
// tokens go to every client, rotate on each use and live 30 days idle.
import { AppError } from "@latch/shared/errors";
import { toSafeText } from "@latch/shared/text/safe-text";
import Provider, { type Configuration, errors, type KoaContextWithOIDC } from "oidc-provider";
import { clientDisplayName, publisherOf, redirectTarget } from "./client-display.ts";
import type { OAuthArtifactsRepo } from "./oauth-artifacts.repo.ts";
import { currentKid, type StoredJwk, signingJwks } from "./oauth-keys.ts";
import {
  deviceConfirmPage,
  deviceInputPage,
  deviceProblem,
  deviceSessionMissingPage,
  deviceSuccessPage,
  oauthErrorPage,
} from "./oauth-pages.ts";

export const MCP_SCOPE = "mcp";
const epochSeconds = () => Math.floor(Date.now() / 1000);
export const ACCESS_TOKEN_TTL_S = 600;
const REFRESH_TOKEN_IDLE_S = 30 * 86_400;
/** A grant outlives any single refresh token; its consent row can end it earlier. */
export const GRANT_TTL_S = 365 * 86_400;

/** The paths oidc-provider answers, all under the issuer (BASE_URL). */
export const OAUTH_ROUTES = {
  authorization: "/oauth/authorize",
  token: "/oauth/token",
  jwks: "/oauth/jwks",
  registration: "/oauth/register",
  device_authorization: "/oauth/device/auth",
  code_verification: "/device",
  revocation: "/oauth/revoke",
  // Not advertised and disabled, but oidc-provider wants every route named.
  end_session: "/oauth/session/end",
  introspection: "/oauth/introspect",
  userinfo: "/oauth/userinfo",
  pushed_authorization_request: "/oauth/par",
  backchannel_authentication: "/oauth/backchannel",
  challenge: "/oauth/challenge",
  credential: "/oauth/credential",
} as const;

export const CONSENT_PATH = "/consent";

export interface OAuthProviderDeps {
  baseUrl: string;
  keys: { keys: StoredJwk[]; cookie_keys: string[] };
  artifacts: OAuthArtifactsRepo;
  /**
   * The organisation a grant was given for (extra access-token claims), while its consent holds:
   * not revoked and its operator still a member there; otherwise undefined (and the grant ended).
   */
  findConsent(grantId: string): Promise<{ organisation_id: string } | undefined>;
  /** Whether the operator still exists (a deleted account ends its refresh tokens). */
  isOperator(operatorId: string): Promise<boolean>;
  /** Fetches a client ID metadata document through the egress proxy (cimd-fetch.ts). */
  fetchClientMetadata(url: string, ctx: KoaContextWithOIDC | undefined): Promise<Response>;
  /** Throws a 429 AppError when the caller or the document host is over its limit. */
  allowMetadataFetch(url: string, ctx: KoaContextWithOIDC | undefined): Promise<void>;
}

export function mcpResource(baseUrl: string): string {
  return `${baseUrl}/mcp`;
}

export function createOAuthProvider(deps: OAuthProviderDeps): Provider {
  const resource = mcpResource(deps.baseUrl);
  const isSecure = deps.baseUrl.startsWith("https://");
  const cookie = { httpOnly: true, sameSite: "lax" as const, secure: isSecure, signed: true };
  // Access tokens name the current key: a retired key oidc-provider still holds (its tokens verify
  // until they expire) never signs one.
  const signingKid = currentKid(deps.keys);

  const configuration: Configuration = {
    // oidc-provider calls `new adapter(name)`: a function (not an arrow) returning the object.
    adapter: function OAuthAdapter(name: string) {
      return deps.artifacts.adapterFor(name);
    } as unknown as Configuration["adapter"],
    jwks: signingJwks(deps.keys) as Configuration["jwks"],
    cookies: {
      keys: deps.keys.cookie_keys,
      names: {
        session: "latch_oauth_session",
        interaction: "latch_oauth_interaction",
        resume: "latch_oauth_resume",
      },
      long: cookie,
      short: cookie,
    },
    routes: OAUTH_ROUTES,
    // "mcp" is the resource server's scope (getResourceServerInfo), not an OpenID Connect one.
    scopes: ["openid"],
    claims: { openid: ["sub"] },
    responseTypes: ["code"],
    pkce: { required: () => true },
    clientAuthMethods: ["none"],
    clientDefaults: {
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      id_token_signed_response_alg: "RS256",
    },
    // Every authorization asks the operator again: only the grant of the consent just given in
    // this interaction counts, never an earlier one remembered in the sign-in session.
    loadExistingGrant: async (ctx) => {
      const grantId = ctx.oidc.result?.consent?.grantId;
      return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
    },
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed("refresh_token"),
    rotateRefreshToken: true,
    expiresWithSession: async () => false,
    clockTolerance: 30,
    ttl: {
      AccessToken: ACCESS_TOKEN_TTL_S,
      AuthorizationCode: 60,
      DeviceCode: 600,
      Grant: GRANT_TTL_S,
      IdToken: ACCESS_TOKEN_TTL_S,
      Interaction: 600,
      RefreshToken: REFRESH_TOKEN_IDLE_S,
      Session: 86_400,
    },
    features: {
      devInteractions: { enabled: false },
      // Access tokens are bearer tokens only (DECISIONS: /mcp checks signature, audience, expiry,
      // membership and grant, no proof of possession). oidc-provider would otherwise bind a token to
      // a client's DPoP key (token_type DPoP, cnf.jkt) that /mcp never asks it to prove: with DPoP
      // off, a DPoP header is ignored (RFC 9449 section 5: the answer says token_type Bearer).
      dPoP: { enabled: false },
      userinfo: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      introspection: { enabled: false },
      // RFC 7009: a public client may revoke only its own tokens.
      revocation: {
        enabled: true,
        allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId,
      },
      registration: {
        enabled: true,
        initialAccessToken: false,
        // RFC 7592 management is not served, so no token for it is handed out.
        issueRegistrationAccessToken: false,
        idFactory: () => `oac_${crypto.randomUUID().replaceAll("-", "")}`,
      },
      deviceFlow: {
        enabled: true,
        charset: "base-20",
        mask: "****-****",
        userCodeInputSource: async (ctx, form, _out, err) => {
          ctx.body = deviceInputPage(form, deviceProblem(err));
        },
        userCodeConfirmSource: async (ctx, form, client, _deviceInfo, userCode) => {
          const publisher = publisherOf(client.clientId);
          ctx.body = deviceConfirmPage(
            form,
            {
              name: clientDisplayName(client.clientName, publisher ?? "OAuth client"),
              publisher,
              redirectTargets: (client.redirectUris ?? []).flatMap((uri) => redirectTarget(uri) ?? []),
            },
            userCode,
          );
        },
        successSource: async (ctx) => {
          const client = ctx.oidc.client;
          ctx.body = deviceSuccessPage(
            client
              ? clientDisplayName(client.clientName, publisherOf(client.clientId) ?? "The device")
              : "The device",
          );
        },
      },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => resource,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, indicator) => {
          if (indicator !== resource) {
            throw new errors.InvalidTarget(`the only resource is ${resource}`);
          }
          return {
            scope: MCP_SCOPE,
            audience: resource,
            accessTokenTTL: ACCESS_TOKEN_TTL_S,
            accessTokenFormat: "jwt",
            jwt: { sign: { alg: "RS256", kid: signingKid } },
          };
        },
      },
      clientIdMetadataDocument: {
        enabled: true,
        ack: "draft-02",
        allowFetch: async (ctx, clientId) => {
          try {
            await deps.allowMetadataFetch(clientId, ctx);
          } catch (error) {
            // A limit's refusal says when to come back, like every other 429 (oidc-provider's error
            // handler keeps the headers already set).
            // Resolved outside a request of oidc-provider's (never expected: the consent page reads
            // the client its interaction kept) there is no answer to set a header on.
            const retryAfter = (error as { retry_after?: unknown }).retry_after;
            if (typeof retryAfter === "number") ctx?.set("retry-after", String(retryAfter));
            throw error;
          }
          return true;
        },
        cacheDuration: { min: 300, max: 86_400 },
      },
    },
    extraTokenClaims: async (_ctx, token) => {
      const grantId = (token as { grantId?: string }).grantId;
      if (!grantId) return undefined;
      // The consent must still hold: not revoked, and its operator still a member of its
      // organisation since before they gave it (a removal that raced the consent, or whose clean-up
      // failed, ends the grant here; findConsent revokes it).
      const consent = await deps.findConsent(grantId);
      if (!consent) throw new errors.InvalidGrant("the consent for this grant is gone");
      return { org_id: consent.organisation_id, grant_id: grantId };
    },
    findAccount: async (_ctx, sub) => {
      if (!(await deps.isOperator(sub))) return undefined;
      return { accountId: sub, claims: async () => ({ sub }) };
    },
    interactions: {
      url: async (ctx, interaction) => {
        // The client as resolved here, in oidc-provider's request (its document fetched, if at all,
        // under spec 8's limits): the consent page, on any replica, shows and records this one.
        const client = ctx.oidc.client;
        if (client) {
          const lifetime = typeof interaction.exp === "number" ? interaction.exp - epochSeconds() : 0;
          // A client metadata document client is kept whole: the resume after /consent resolves it
          // from this (`allowMetadataFetch`), so what is granted is the document that was shown.
          const isDocument =
            (client as { clientIdMetadataDocument?: boolean }).clientIdMetadataDocument === true;
          await deps.artifacts.saveInteractionClient(
            interaction.uid,
            {
              clientId: client.clientId,
              clientName: client.clientName,
              document: isDocument ? (client.metadata() as Record<string, unknown>) : undefined,
            },
            Math.max(lifetime, 1),
          );
        }
        return `${CONSENT_PATH}?uid=${encodeURIComponent(interaction.uid)}`;
      },
    },
    // Spec 5 rule 6: /oauth reflects the caller's Origin (browser-based MCP clients register and
    // exchange codes from their own pages).
    clientBasedCORS: () => true,
    renderError: async (ctx, out, error) => {
      ctx.type = "html";
      // A client metadata document refused by our own rules (cimd-fetch.ts) reaches here wrapped in
      // oidc-provider's "fetch failed": the page says our sentence, which names the refused URI.
      const cause = (error as { cause?: unknown } | undefined)?.cause;
      const description = toSafeText(
        cause instanceof AppError ? cause.message : String(out.error_description ?? ""),
      );
      ctx.body = oauthErrorPage(String(out.error ?? "error"), description);
    },
    fetch: (url: string | URL, options: RequestInit) =>
      deps.fetchClientMetadata(String(url), undefined).then((response) => {
        void options;
        return response;
      }),
    fetchResponseBodyLimits: { "client_id metadata document": 1024 * 1024 },
    discovery: {},
  } as Configuration;

  const provider = new Provider(deps.baseUrl, configuration);
  provider.use(requireDeviceSession(provider));
  // The same failure on the other device pages (GET /device/:uid without its session, found by
  // schemathesis in CI): oidc-provider saves a touched session it never stored and throws; the
  // person gets the same page instead of a 500.
  provider.use(async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      if (!(error instanceof TypeError) || !/persist can only be called/.test(error.message)) throw error;
      ctx.status = 400;
      ctx.type = "html";
      ctx.body = deviceSessionMissingPage();
    }
  });
  return provider;
}

/**
 * POST /device answers only to the browser that opened the code page (its OAuth session holds the
 * form's xsrf secret). Without that session, or with one that expired or was forged, oidc-provider
 * would fail while saving a session it never stored (a 500 and a stack on stderr): the operator
 * gets a 400 page that sends them back to /device instead (issue 21 item 3).
 */
function requireDeviceSession(provider: Provider) {
  return async (ctx: Parameters<Parameters<Provider["use"]>[0]>[0], next: () => Promise<void>) => {
    if (ctx.method !== "POST" || ctx.path !== OAUTH_ROUTES.code_verification) return next();
    const session = await provider.Session.get(ctx as unknown as KoaContextWithOIDC);
    if (typeof session.exp === "number") return next();
    ctx.status = 400;
    ctx.type = "html";
    ctx.body = deviceSessionMissingPage();
  };
}
