// Fake OAuth providers for the egress harness's origin, one per host of DECISIONS "Providers",
// behaving like the real ones where Latch depends on it: each token endpoint authenticates the
// client its provider's way (Spotify: HTTP Basic, or client_id alone for a PKCE public client;
// GitHub, Google, Slack: form fields; Stripe: client_secret alone), rotates refresh tokens and
// refuses a spent one, and answers errors as that provider does (`invalid_grant` at 400, Slack's
// `ok: false` at 200, GitHub's `error` at 200, form-encoded unless `Accept: application/json`).
// A user-only API path echoes the bearer it got, so the answer's redaction is checked for real.
import { createHash, randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { RecordedRequest } from "../../egress-proxy/test/origin.ts";

export type FakeProviderId = "spotify" | "github" | "google" | "slack" | "stripe";

export interface FakeClient {
  clientId: string;
  clientSecret: string;
}

interface IssuedAccess {
  provider: FakeProviderId;
  kind: "user" | "app";
  expiresAtMs: number;
}

/** The hosts a test routes to the origin for these fakes. */
export const FAKE_PROVIDER_HOSTS = [
  "accounts.spotify.com",
  "api.spotify.com",
  "github.com",
  "api.github.com",
  "oauth2.googleapis.com",
  "www.googleapis.com",
  "slack.com",
  "connect.stripe.com",
  "api.stripe.com",
] as const;

const TOKEN_PATHS: Record<string, { provider: FakeProviderId; path: string }> = {
  "accounts.spotify.com": { provider: "spotify", path: "/api/token" },
  "github.com": { provider: "github", path: "/login/oauth/access_token" },
  "oauth2.googleapis.com": { provider: "google", path: "/token" },
  "slack.com": { provider: "slack", path: "/api/oauth.v2.access" },
  "connect.stripe.com": { provider: "stripe", path: "/oauth/token" },
};

const API_HOSTS: Record<string, FakeProviderId> = {
  "api.spotify.com": "spotify",
  "api.github.com": "github",
  "www.googleapis.com": "google",
  "slack.com": "slack",
  "api.stripe.com": "stripe",
};

/** Which providers rotate the refresh token on every refresh (Google and Stripe keep it). */
const ROTATES: Record<FakeProviderId, boolean> = {
  spotify: true,
  github: true,
  google: false,
  slack: true,
  stripe: false,
};

function token(prefix: string): string {
  return `${prefix}${randomBytes(18).toString("base64url")}`;
}

export class FakeProviders {
  readonly clients: Record<FakeProviderId, FakeClient>;
  /** Live refresh tokens; a rotated one is removed (reuse is invalid_grant). */
  readonly refreshTokens = new Map<string, FakeProviderId>();
  readonly accessTokens = new Map<string, IssuedAccess>();
  /** Every token-endpoint request, with the grant type, for counting and checking. */
  readonly tokenRequests: { provider: FakeProviderId; grantType: string; ok: boolean }[] = [];
  /** Every value the fakes issued or hold: none may show up unredacted anywhere. */
  readonly secrets: string[] = [];
  /** Seconds an access token lives. */
  accessLifetimeS = 3600;
  /** Codes of the authorize step: single use, bound to client, redirect URI and PKCE challenge. */
  readonly codes = new Map<
    string,
    { provider: FakeProviderId; clientId: string; redirectUri: string; challenge: string | undefined }
  >();
  /** A provider that issues no refresh token on the code exchange (spec 4.3 no_refresh_token). */
  withoutRefreshToken = new Set<FakeProviderId>();

  /**
   * The user approves on the provider's authorize page: checks the URL as that provider would
   * (its own authorize URL, the registered client, S256 PKCE where it is a public client) and
   * returns the code the browser brings back, with the state.
   */
  authorize(
    provider: FakeProviderId,
    authorizeUrl: string,
  ): { code: string; state: string; redirectUri: string } {
    const url = new URL(authorizeUrl);
    const clientId = url.searchParams.get("client_id");
    if (clientId !== this.clients[provider].clientId) throw new Error(`${provider}: unknown client_id`);
    if (url.searchParams.get("response_type") !== "code")
      throw new Error(`${provider}: response_type must be code`);
    const challenge = url.searchParams.get("code_challenge") ?? undefined;
    const isPkce = provider === "spotify" || provider === "google";
    if (isPkce && (!challenge || url.searchParams.get("code_challenge_method") !== "S256")) {
      throw new Error(`${provider}: a public-client provider needs PKCE S256`);
    }
    const state = url.searchParams.get("state") ?? "";
    const redirectUri = url.searchParams.get("redirect_uri") ?? "";
    const code = token(`${provider}_code_`);
    this.codes.set(code, { provider, clientId, redirectUri, challenge });
    this.secrets.push(code);
    return { code, state, redirectUri };
  }

  constructor() {
    const client = (provider: FakeProviderId): FakeClient => ({
      clientId: `${provider}-client-${randomBytes(4).toString("hex")}`,
      clientSecret: token(`${provider}_cs_`),
    });
    this.clients = {
      spotify: client("spotify"),
      github: client("github"),
      google: client("google"),
      slack: client("slack"),
      stripe: { clientId: "ca_platform", clientSecret: token("sk_test_") },
    };
    for (const c of Object.values(this.clients)) this.secrets.push(c.clientSecret);
  }

  /** A refresh token as a connect would have left it. */
  issueRefreshToken(provider: FakeProviderId): string {
    const value = token(`${provider}_rt_`);
    this.refreshTokens.set(value, provider);
    this.secrets.push(value);
    return value;
  }

  revokeRefreshToken(value: string): void {
    this.refreshTokens.delete(value);
  }

  /** The handler for the harness origin: routes on Host. */
  handler = (req: IncomingMessage, res: ServerResponse, recorded: RecordedRequest): void => {
    const host = String(req.headers.host ?? "").replace(/:\d+$/, "");
    const path = (recorded.url.split("?")[0] ?? "").toString();
    const tokenRoute = TOKEN_PATHS[host];
    if (tokenRoute && path === tokenRoute.path && recorded.method === "POST") {
      this.answerToken(tokenRoute.provider, recorded, res);
      return;
    }
    const apiProvider = API_HOSTS[host];
    if (apiProvider) {
      this.answerApi(apiProvider, path, recorded, res);
      return;
    }
    res.writeHead(404, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: "not_found" }));
  };

  private answerApi(
    provider: FakeProviderId,
    path: string,
    recorded: RecordedRequest,
    res: ServerResponse,
  ): void {
    const authorization = String(recorded.headers.authorization ?? "");
    const bearer = authorization.startsWith("Bearer ") ? authorization.slice(7) : "";
    const client = this.clients[provider];
    const basic = Buffer.from(`${client.clientId}:${client.clientSecret}`).toString("base64");
    const access = this.accessTokens.get(bearer);
    const isApp =
      (provider === "stripe" && bearer === client.clientSecret) ||
      (provider === "github" && authorization === `Basic ${basic}`) ||
      access?.kind === "app";
    const isUser = access?.kind === "user" && access.provider === provider && access.expiresAtMs > Date.now();
    const userOnly =
      provider === "spotify"
        ? path.startsWith("/v1/me")
        : provider === "github"
          ? path.startsWith("/user")
          : provider !== "stripe";
    if (!isUser && !(isApp && !userOnly)) {
      res.writeHead(401, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { status: 401, message: "Invalid access token" } }));
      return;
    }
    // A careless API that echoes the credential it was sent, in the body and in a header.
    res.writeHead(200, { "content-type": "application/json", "x-request-id": bearer || authorization });
    res.end(JSON.stringify({ provider, path, you_sent: authorization, kind: isUser ? "user" : "app" }));
  }

  private answerToken(provider: FakeProviderId, recorded: RecordedRequest, res: ServerResponse): void {
    const form = new URLSearchParams(recorded.body.toString("utf8"));
    const grantType = form.get("grant_type") ?? "";
    const accept = String(recorded.headers.accept ?? "");
    const refuse = (status: number, error: string) => {
      this.tokenRequests.push({ provider, grantType, ok: false });
      if (provider === "slack") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ ok: false, error }));
      } else if (provider === "github") {
        // GitHub answers 200 with the error, form-encoded unless JSON was asked for.
        const body = { error, error_description: "The refresh token passed is incorrect or expired." };
        if (accept.includes("application/json")) {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify(body));
        } else {
          res.writeHead(200, { "content-type": "application/x-www-form-urlencoded" });
          res.end(new URLSearchParams(body).toString());
        }
      } else {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify({ error, error_description: "refused by the fake provider" }));
      }
    };
    const authenticated = this.authenticate(provider, recorded, form);
    if (authenticated === undefined) {
      refuse(401, "invalid_client");
      return;
    }
    let kind: "user" | "app";
    let refreshToken: string | undefined;
    if (grantType === "refresh_token") {
      const presented = form.get("refresh_token") ?? "";
      if (this.refreshTokens.get(presented) !== provider) {
        refuse(
          400,
          provider === "github"
            ? "bad_refresh_token"
            : provider === "slack"
              ? "invalid_refresh_token"
              : "invalid_grant",
        );
        return;
      }
      kind = "user";
      if (ROTATES[provider]) {
        this.refreshTokens.delete(presented);
        refreshToken = this.issueRefreshToken(provider);
      } else {
        refreshToken = provider === "stripe" ? presented : undefined;
      }
    } else if (grantType === "authorization_code") {
      const issued = this.codes.get(form.get("code") ?? "");
      this.codes.delete(form.get("code") ?? "");
      const verifier = form.get("code_verifier") ?? "";
      const isVerified =
        issued?.challenge === undefined ||
        createHash("sha256").update(verifier).digest("base64url") === issued.challenge;
      if (
        !issued ||
        issued.provider !== provider ||
        issued.redirectUri !== form.get("redirect_uri") ||
        !isVerified
      ) {
        refuse(
          400,
          provider === "github"
            ? "bad_verification_code"
            : provider === "slack"
              ? "invalid_code"
              : "invalid_grant",
        );
        return;
      }
      kind = "user";
      refreshToken = this.withoutRefreshToken.has(provider) ? undefined : this.issueRefreshToken(provider);
    } else if (
      grantType === "client_credentials" &&
      provider === "spotify" &&
      authenticated === "confidential"
    ) {
      kind = "app";
    } else {
      refuse(400, "unsupported_grant_type");
      return;
    }
    const accessToken = token(`${provider}_at_`);
    this.secrets.push(accessToken);
    const expiresIn = provider === "stripe" ? 0 : this.accessLifetimeS;
    this.accessTokens.set(accessToken, {
      provider,
      kind,
      expiresAtMs: expiresIn === 0 ? Number.MAX_SAFE_INTEGER : Date.now() + expiresIn * 1000,
    });
    this.tokenRequests.push({ provider, grantType, ok: true });
    const tokens = {
      access_token: accessToken,
      token_type: provider === "slack" ? "user" : "Bearer",
      ...(expiresIn > 0 ? { expires_in: expiresIn } : {}),
      ...(refreshToken ? { refresh_token: refreshToken } : {}),
      scope: "read",
    };
    // Google adds an OpenID id_token: a credential of its own that must not reach the agent.
    const idToken = provider === "google" ? token("google_id_") : undefined;
    if (idToken) this.secrets.push(idToken);
    const withId = idToken ? { ...tokens, id_token: idToken } : tokens;
    const body = provider === "slack" ? { ok: true, ...withId } : withId;
    if (provider === "github" && !accept.includes("application/json")) {
      res.writeHead(200, { "content-type": "application/x-www-form-urlencoded" });
      res.end(
        new URLSearchParams(
          Object.entries(body).map(([k, v]): [string, string] => [k, String(v)]),
        ).toString(),
      );
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  }

  /** The client as the provider authenticates it; "public" only where PKCE public clients exist. */
  private authenticate(
    provider: FakeProviderId,
    recorded: RecordedRequest,
    form: URLSearchParams,
  ): "confidential" | "public" | undefined {
    const client = this.clients[provider];
    const authorization = String(recorded.headers.authorization ?? "");
    switch (provider) {
      case "spotify": {
        const basic = Buffer.from(`${client.clientId}:${client.clientSecret}`).toString("base64");
        if (authorization === `Basic ${basic}`) return "confidential";
        if (!authorization && form.get("client_id") === client.clientId && !form.has("client_secret"))
          return "public";
        return undefined;
      }
      case "google":
        if (form.get("client_id") !== client.clientId) return undefined;
        if (form.get("client_secret") === client.clientSecret) return "confidential";
        return form.has("client_secret") ? undefined : "public";
      case "github":
      case "slack":
        return form.get("client_id") === client.clientId && form.get("client_secret") === client.clientSecret
          ? "confidential"
          : undefined;
      case "stripe":
        return form.get("client_secret") === client.clientSecret ? "confidential" : undefined;
    }
  }
}
