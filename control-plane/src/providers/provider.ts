// What the control plane knows about one provider with built-in connect (DECISIONS.md "Product" and
// "Providers"): its API hosts, the public recipe, the OAuth endpoints and how the client
// authenticates there, its HMAC inject mode, its user-only paths and the path renames it made.
// Data only: nothing here opens a connection.

/** The provider identifiers of DECISIONS.md "Product" (the spec's placeholders). */
export type ProviderId = "spotify" | "github" | "google" | "slack" | "stripe";

/** Spec 2.5: where an operator makes the credential an agent asked for. Public text, the same for
 * every organisation; it never names a stored item's value. */
export interface Recipe {
  steps: string[];
  next: string;
}

/** What every recipe says happens after the steps (the collect page stores the value). */
export const RECIPE_NEXT =
  "Paste the value on this page and store it. The agent's approval is activated with it, and the agent can retry its call.";

/**
 * How the client authenticates at the token URL (DECISIONS.md "Providers"):
 * - `basic`: HTTP Basic `client_id:client_secret` (RFC 6749 section 2.3.1);
 * - `form`: `client_id` and `client_secret` form fields;
 * - `secret_form`: the `client_secret` form field alone (Stripe: the platform secret key).
 */
export type ClientAuthentication = "basic" | "form" | "secret_form";

export interface OAuthEndpoints {
  authorizeUrl: string;
  /** Fixed parameters every authorize URL of this provider carries (Google: a refresh token every time). */
  authorizeParams: Readonly<Record<string, string>>;
  /** The authorize parameter that carries the scopes: Slack asks for user scopes (`user_scope`),
   * since a user token is what connect stores. */
  scopeParam: "scope" | "user_scope";
  tokenUrl: string;
  /** Fixed headers on every token URL request (GitHub answers form-encoded without Accept). */
  tokenHeaders: Readonly<Record<string, string>>;
  clientAuthentication: ClientAuthentication;
  /** A PKCE public client may exchange without the client secret: `client_id` form field plus
   * `code_verifier` (RFC 7636), whatever `clientAuthentication` says for a confidential client. */
  isPkcePublicClient: boolean;
}

/** The HMAC inject modes of DECISIONS.md "Providers": `hmac:<provider>_sig`. */
export type HmacInjectMode = "hmac:stripe_sig" | "hmac:slack_sig" | "hmac:github_sig";

/**
 * A path the provider renamed (spec 4.2 rule 3). A call on `pattern` with one of `methods` is sent
 * to `pattern` replaced by `replacement` (`$1`-style groups; an unmatched group is empty); a body key
 * is renamed with it where the provider renamed that too. The validated path is what the operator
 * approved: a rewrite only follows the provider's rename.
 */
export interface PathRewriteRule {
  methods: readonly string[];
  /** Anchored at both ends; matched against the path with its query. */
  pattern: RegExp;
  replacement: string;
  /** A JSON object body's key renamed on this method, unless the body already has the new key. */
  bodyKeyRename?: { method: string; from: string; to: string };
  /** next.for_model naming the change. */
  describe(rewritten: { from: string; to: string }): string;
}

/**
 * What an app credential alone (a `client_credentials` item, no connected account) is good for:
 * - `client_credentials`: the RFC 6749 4.4 grant at the token URL mints an app token (Spotify);
 * - `secret_bearer`: the stored secret is itself the bearer (Stripe's platform secret key);
 * - `client_basic`: HTTP Basic client_id:client_secret (GitHub's OAuth app endpoints);
 * - undefined: nothing; every path needs a connected user (Google, Slack).
 */
export type AppTokenKind = "client_credentials" | "secret_bearer" | "client_basic";

export interface Provider {
  id: ProviderId;
  displayName: string;
  /** Exact API hostnames; the first is the one `setup { provider }` prepares. */
  apiHosts: readonly [string, ...string[]];
  recipe: Recipe;
  oauth: OAuthEndpoints;
  hmacInject?: HmacInjectMode;
  /** Path prefixes that need a user token (DECISIONS.md: only an app credential stored answers
   * `user_connect_required`). A prefix covers itself and everything below it, not a longer name. */
  userOnlyPathPrefixes: readonly string[];
  pathRewrites: readonly PathRewriteRule[];
  appToken?: AppTokenKind;
}
