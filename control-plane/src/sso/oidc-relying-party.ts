// The OpenID Connect relying party (openid-client v6) with every request through the egress proxy:
// the control plane opens no outbound connection. Discovery and the JWKS are credential-less
// FetchDocument calls under the proxy's destination rules; the token request is an Execute whose
// ticket carries the client secret and the PKCE verifier sealed, so only the proxy holds them in
// clear, and whose answer is the ID token alone (TokenExchange.id_token_only: the access and
// refresh tokens never leave the proxy).
//
// openid-client checks the ID token's claims (iss, aud, azp, exp, iat, nonce, auth_time) but, for
// a token from the token endpoint, its signature only with non-repudiation checks on; the
// signature is checked here, with jose, against the provider's JWKS.
import {
  ClientAuthentication,
  type ExecuteResponse,
  type SealedCredential,
  TokenGrant,
} from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { checkHostname } from "@latch/shared/requests/host";
import { validateRequestPath } from "@latch/shared/requests/path";
import { createLocalJWKSet, type JSONWebKeySet, type JWTPayload, jwtVerify } from "jose";
import * as oidc from "openid-client";
import type { EgressClient } from "../egress/egress-client.ts";
import type { TicketMinter } from "../egress/tickets.ts";

/** Each document or token request: this long at most, this large at most (spec 8's document limits). */
const FETCH_TIMEOUT_MS = 5_000;
const DOCUMENT_MAX_BYTES = 1024 * 1024;
/** Discovery and keys are kept this long; an unknown key id fetches the keys again at once. */
const CACHE_MS = 10 * 60_000;
/**
 * Documents kept at most, per cache: any owner may name any issuer, so an unbounded cache would let
 * one account fill a replica's memory with megabyte documents. The oldest leaves first.
 */
export const MAX_CACHED_DOCUMENTS = 256;

/** Keeps `value` under `key`, newest last, dropping the oldest entries past MAX_CACHED_DOCUMENTS. */
export function remember<V>(cache: Map<string, V>, key: string, value: V): void {
  cache.delete(key);
  cache.set(key, value);
  for (const oldest of cache.keys()) {
    if (cache.size <= MAX_CACHED_DOCUMENTS) break;
    cache.delete(oldest);
  }
}
/** Signatures an ID token may carry: asymmetric only (an HMAC would be keyed by the client secret, which the control plane never holds), never "none". */
const SIGNING_ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
];

/**
 * A list field of the provider's discovery document (RFC 8414 2: a JSON array of strings), or
 * undefined when it is anything else: a hostile or broken document's string, number or object is
 * read as the field left out (openid-client reads it so for its own checks), never called on.
 */
function metadataList(value: unknown): string[] | undefined {
  return Array.isArray(value)
    ? value.filter((entry): entry is string => typeof entry === "string")
    : undefined;
}

export interface RelyingPartyDeps {
  egress: Pick<EgressClient, "fetchDocument" | "execute">;
  minter: Pick<TicketMinter, "mintDocumentTicket" | "mintCallTicket">;
  now: () => Date;
}

/** What a connection gives the relying party. */
export interface ConnectionKeys {
  issuer: string;
  clientId: string;
  /** The client secret, sealed to the proxy. */
  clientSecret: SealedCredential;
  /**
   * The connection's organisation: its discovery, JWKS and code exchanges go out as its own
   * (Ticket.organisation_id: its own upstream connections, its own calls in flight in the proxy).
   */
  organisationId?: string;
}

/** An https URL on port 443 split into what a ticket names, or a refusal naming `what`. */
export function httpsTarget(url: string, what: string): { host: string; path: string } {
  const parsed = URL.parse(url);
  if (parsed?.protocol !== "https:" || (parsed.port && parsed.port !== "443") || parsed.username) {
    throw new AppError("sso_failed", `the provider's ${what} must be an https address on port 443`);
  }
  const host = checkHostname(parsed.hostname);
  if (!host.ok) throw new AppError("sso_failed", `the provider's ${what} has ${host.message}`);
  const path = validateRequestPath(`${parsed.pathname}${parsed.search}`);
  if (!path.ok) throw new AppError("sso_failed", `the provider's ${what} has ${path.message}`);
  return { host: host.host, path: path.path };
}

/** A sign-in's token request as openid-client builds it: what the proxy needs to send it itself. */
interface TokenRequest {
  code: string;
  redirectUri: string;
}

export function createRelyingParty(deps: RelyingPartyDeps) {
  const discovered = new Map<string, { until: number; metadata: oidc.ServerMetadata }>();
  const keySets = new Map<string, { until: number; jwks: JSONWebKeySet }>();

  /** A GET through the proxy, on a ticket of the organisation whose connection asks for it. */
  async function fetchDocument(
    url: string,
    what: string,
    organisationId: string | undefined,
  ): Promise<Response> {
    const target = httpsTarget(url, what);
    const ticket = deps.minter.mintDocumentTicket(
      {
        host: target.host,
        path: target.path,
        timeoutMs: FETCH_TIMEOUT_MS,
        maxBytes: DOCUMENT_MAX_BYTES,
      },
      { organisationId },
    );
    const answer = await deps.egress
      .fetchDocument(ticket, FETCH_TIMEOUT_MS + 1_000)
      .catch((cause: unknown) => {
        throw unreachable(`the provider's ${what} could not be fetched`, cause);
      });
    if (answer.error) {
      throw unreachable(`the provider's ${what} could not be fetched (${answer.error.code})`);
    }
    return new Response(Buffer.from(answer.body), {
      status: answer.originStatus,
      headers: { "content-type": answer.contentType || "application/json" },
    });
  }

  /**
   * The proxy-bound fetch openid-client makes its requests with: GETs of documents, and the token
   * request, which goes out as a sealed exchange. Anything else is refused.
   */
  function proxyFetch(
    keys: ConnectionKeys,
    metadata: oidc.ServerMetadata,
    verifier: SealedCredential | undefined,
  ) {
    return async (url: string, options: oidc.CustomFetchOptions): Promise<Response> => {
      if (options.method === "GET") return fetchDocument(url, "document", keys.organisationId);
      if (options.method !== "POST" || url !== metadata.token_endpoint || !verifier) {
        throw new AppError("sso_failed", "the sign-in asked for a request it never makes");
      }
      const form = new URLSearchParams(String(options.body ?? ""));
      const code = form.get("code");
      const redirectUri = form.get("redirect_uri");
      if (form.get("grant_type") !== "authorization_code" || !code || !redirectUri) {
        throw new AppError("sso_failed", "the sign-in's token request is not a code exchange");
      }
      return exchange(keys, metadata, verifier, { code, redirectUri });
    };
  }

  /** The code exchange, in the proxy: it opens the secret and the verifier and answers the ID token. */
  async function exchange(
    keys: ConnectionKeys,
    metadata: oidc.ServerMetadata,
    verifier: SealedCredential,
    request: TokenRequest,
  ): Promise<Response> {
    const token = httpsTarget(String(metadata.token_endpoint), "token endpoint");
    const methods = metadataList(metadata.token_endpoint_auth_methods_supported) ?? ["client_secret_basic"];
    // RFC 8414: client_secret_basic is the default; client_secret_post when that is all it takes.
    const authentication = methods.includes("client_secret_basic")
      ? ClientAuthentication.CLIENT_AUTHENTICATION_BASIC
      : ClientAuthentication.CLIENT_AUTHENTICATION_FORM;
    let answer: ExecuteResponse;
    try {
      answer = await deps.egress.execute(
        deps.minter.mintCallTicket(
          {
            credential: keys.clientSecret,
            inject: "bearer",
            host: token.host,
            allowedHosts: [token.host],
            method: "POST",
            path: token.path,
            body: Buffer.alloc(0),
            contentType: "",
            timeoutMs: FETCH_TIMEOUT_MS,
            headers: [],
            redact: [],
            exchange: {
              grant: TokenGrant.TOKEN_GRANT_AUTHORIZATION_CODE,
              tokenHost: token.host,
              tokenPath: token.path,
              clientAuthentication: authentication,
              clientId: keys.clientId,
              clientSecret: keys.clientSecret,
              refreshToken: undefined,
              headers: [],
              scope: "",
              answerIsExchange: true,
              idTokenOnly: true,
              accessItemName: "",
              code: request.code,
              redirectUri: request.redirectUri,
              codeVerifier: verifier,
              refreshItemName: "",
            },
          },
          { organisationId: keys.organisationId },
        ),
        FETCH_TIMEOUT_MS + 2_000,
      );
    } catch (cause) {
      throw unreachable("the identity provider's token endpoint could not be reached", cause);
    }
    if (answer.error) {
      // The proxy's own refusal (its time limit, an address it will not dial, a TLS failure).
      throw unreachable(`the identity provider's token endpoint could not be reached (${answer.error.code})`);
    }
    if (answer.originStatus < 200 || answer.originStatus >= 300 || !answer.idToken) {
      throw new AppError(
        "sso_failed",
        `the identity provider's token endpoint answered ${answer.originStatus} without an ID token`,
      );
    }
    // openid-client reads a token response: the ID token, with the access token the proxy kept
    // back standing in as a placeholder (Latch calls nothing with it).
    return Response.json(
      { id_token: answer.idToken, token_type: "Bearer", access_token: "withheld-by-the-egress-proxy" },
      { status: 200, headers: { "cache-control": "no-store" } },
    );
  }

  /**
   * The issuer's discovery document, fetched as `organisationId`'s (the connection's, or the one
   * saving it). Kept by issuer: a cached document is not fetched again for another organisation.
   */
  async function serverMetadata(issuer: string, organisationId?: string): Promise<oidc.ServerMetadata> {
    const cached = discovered.get(issuer);
    if (cached && cached.until > Date.now()) return cached.metadata;
    const config = await oidc
      .discovery(new URL(issuer), "latch-discovery", undefined, oidc.None(), {
        [oidc.customFetch]: (url: string, options: oidc.CustomFetchOptions) => {
          if (options.method !== "GET") throw new AppError("sso_failed", "discovery only reads");
          return fetchDocument(url, "discovery document", organisationId);
        },
        timeout: FETCH_TIMEOUT_MS / 1000,
      })
      .catch((cause: unknown) => {
        if (cause instanceof AppError) throw cause;
        throw new AppError("sso_failed", "the provider's discovery document is not valid for this issuer", {
          cause,
        });
      });
    const metadata = config.serverMetadata();
    for (const [field, what] of [
      ["authorization_endpoint", "authorization endpoint"],
      ["token_endpoint", "token endpoint"],
      ["jwks_uri", "JWKS"],
    ] as const) {
      const value = metadata[field];
      if (typeof value !== "string") throw new AppError("sso_failed", `the provider names no ${what}`);
      httpsTarget(value, what);
    }
    remember(discovered, issuer, { until: Date.now() + CACHE_MS, metadata });
    return metadata;
  }

  function configurationOf(keys: ConnectionKeys, metadata: oidc.ServerMetadata, verifier?: SealedCredential) {
    // The client authenticates in the proxy: openid-client sends no secret (it has none).
    const config = new oidc.Configuration(metadata, keys.clientId, undefined, oidc.None());
    config[oidc.customFetch] = proxyFetch(keys, metadata, verifier);
    config.timeout = FETCH_TIMEOUT_MS / 1000;
    return config;
  }

  async function keySet(
    metadata: oidc.ServerMetadata,
    isFresh: boolean,
    organisationId: string | undefined,
  ): Promise<JSONWebKeySet> {
    const uri = String(metadata.jwks_uri);
    const cached = keySets.get(uri);
    if (!isFresh && cached && cached.until > Date.now()) return cached.jwks;
    const response = await fetchDocument(uri, "JWKS", organisationId);
    const jwks = (await response.json().catch(() => undefined)) as JSONWebKeySet | undefined;
    if (response.status !== 200 || !jwks || !Array.isArray(jwks.keys)) {
      throw new AppError("sso_failed", "the provider's JWKS is not a key set");
    }
    remember(keySets, uri, { until: Date.now() + CACHE_MS, jwks });
    return jwks;
  }

  /** The ID token's signature against the provider's keys (fetched again once for an unknown key). */
  async function verifySignature(idToken: string, keys: ConnectionKeys, metadata: oidc.ServerMetadata) {
    const allowed = (metadataList(metadata.id_token_signing_alg_values_supported) ?? ["RS256"]).filter(
      (alg) => SIGNING_ALGORITHMS.includes(alg),
    );
    const options = {
      issuer: metadata.issuer,
      audience: keys.clientId,
      algorithms: allowed.length > 0 ? allowed : ["RS256"],
      currentDate: deps.now(),
      clockTolerance: 30,
    };
    try {
      return (
        await jwtVerify(
          idToken,
          createLocalJWKSet(await keySet(metadata, false, keys.organisationId)),
          options,
        )
      ).payload;
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code !== "ERR_JWKS_NO_MATCHING_KEY") throw refusedToken(error);
      try {
        return (
          await jwtVerify(
            idToken,
            createLocalJWKSet(await keySet(metadata, true, keys.organisationId)),
            options,
          )
        ).payload;
      } catch (again) {
        throw refusedToken(again);
      }
    }
  }

  return {
    /** The provider's metadata (discovery through the proxy, kept 10 minutes). */
    serverMetadata,

    /** Where the browser goes to sign in: the authorization code flow with PKCE and a nonce. */
    async authorizationUrl(
      keys: ConnectionKeys,
      params: {
        redirectUri: string;
        state: string;
        nonce: string;
        codeChallenge: string;
        loginHint?: string;
        prompt?: string;
        /** Seconds: the provider must have checked the person within them, and say when (auth_time). */
        maxAge?: number;
      },
    ): Promise<URL> {
      const config = configurationOf(keys, await serverMetadata(keys.issuer, keys.organisationId));
      return oidc.buildAuthorizationUrl(config, {
        redirect_uri: params.redirectUri,
        scope: "openid email profile",
        response_type: "code",
        state: params.state,
        nonce: params.nonce,
        code_challenge: params.codeChallenge,
        code_challenge_method: "S256",
        ...(params.loginHint ? { login_hint: params.loginHint } : {}),
        ...(params.prompt ? { prompt: params.prompt } : {}),
        ...(params.maxAge !== undefined ? { max_age: String(params.maxAge) } : {}),
      });
    },

    /**
     * RFC 9207 at the redirect URI, before anything reads the answer (an error answer too): an
     * `iss` must be the connection's issuer, compared as a string (section 2.4), and a provider
     * whose discovery document says it sends one (`authorization_response_iss_parameter_supported`)
     * must have sent it. Every connection shares one redirect URI, so an answer naming another
     * issuer is another provider's carried to this sign-in's state (the mix-up attack, RFC 9700
     * 4.4): its code goes to no token endpoint and its error is not this provider's to show. The
     * flag is read from the discovery document the callback uses anyway (kept 10 minutes), the one
     * `finish` then reads for the token endpoint: no request of its own.
     */
    async checkAnswerIssuer(keys: ConnectionKeys, callbackUrl: URL): Promise<void> {
      const named = callbackUrl.searchParams.getAll("iss");
      if (named.length > 1 || (named.length === 1 && named[0] !== keys.issuer)) {
        throw new AppError(
          "sso_failed",
          `this answer names another identity provider than this organisation's (${keys.issuer}), so it was not used: start again`,
        );
      }
      if (named.length === 1) return;
      const metadata = await serverMetadata(keys.issuer, keys.organisationId);
      if (metadata.authorization_response_iss_parameter_supported === true) {
        throw new AppError(
          "sso_failed",
          `this answer does not name its identity provider (iss), which ${keys.issuer} says it always does, so it was not used: start again`,
        );
      }
    },

    /**
     * The provider's answer at the redirect URI, its iss checked by checkAnswerIssuer first: state
     * and iss (again) checked by openid-client, the code exchanged in the proxy, the ID token's
     * claims checked by openid-client (iss, aud, exp, iat, nonce) and its signature here. Answers
     * the ID token's verified claims.
     */
    async finish(
      keys: ConnectionKeys,
      callbackUrl: URL,
      checks: { state: string; nonce: string; verifier: SealedCredential; maxAge?: number },
    ): Promise<JWTPayload> {
      const metadata = await serverMetadata(keys.issuer, keys.organisationId);
      const config = configurationOf(keys, metadata, checks.verifier);
      let idToken: string | undefined;
      try {
        const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
          expectedState: checks.state,
          expectedNonce: checks.nonce,
          // The max_age the sign-in asked for: auth_time is then required, and within it.
          ...(checks.maxAge !== undefined ? { maxAge: checks.maxAge } : {}),
          idTokenExpected: true,
        });
        idToken = tokens.id_token;
      } catch (error) {
        if (error instanceof AppError) throw error;
        // openid-client wraps what its fetch threw: the proxy's own failure is passed on as it is.
        if (error instanceof Error && error.cause instanceof AppError) throw error.cause;
        throw refusedToken(error);
      }
      if (!idToken) throw new AppError("sso_failed", "the provider answered without an ID token");
      return verifySignature(idToken, keys, metadata);
    },
  };
}

export type RelyingParty = ReturnType<typeof createRelyingParty>;

/**
 * The provider could not be reached through the proxy (down, hanging past the time limit, refused
 * by the proxy's destination rules): a failure of the way there, not of the person signing in, so
 * the routes answer it as 502 rather than as a refused sign-in.
 */
function unreachable(message: string, cause?: unknown): AppError {
  return new AppError("sso_failed", message, { cause, extra: { provider_unreachable: true } });
}

/** Whether `error` is the provider being out of reach (unreachable above). */
export function isProviderUnreachable(error: AppError): boolean {
  return error.extra.provider_unreachable === true;
}

/** One refusal for an answer or ID token that does not verify; the reason is kept for the log. */
function refusedToken(cause: unknown): AppError {
  // openid-client wraps oauth4webapi's error, whose message names the claim (`unexpected JWT "nonce"
  // (nonce) claim value`); claim names and checks only, never a token or a secret.
  const inner = cause instanceof Error && cause.cause instanceof Error ? cause.cause : cause;
  const reason = inner instanceof Error ? inner.message.slice(0, 200) : "not valid";
  return new AppError("sso_failed", `the identity provider's answer was not accepted: ${reason}`, { cause });
}
