import { describe, expect, it } from "vitest";
import {
  findProviderByApiHost,
  findRecipe,
  getProvider,
  isTokenEndpoint,
  isUserOnlyPath,
  listProviders,
  PROVIDER_IDS,
  recipeFields,
} from "./providers.ts";

describe("the provider registry", () => {
  it("holds the five providers of DECISIONS.md, each under its own id", () => {
    expect(PROVIDER_IDS).toEqual(["spotify", "github", "google", "slack", "stripe"]);
    expect(listProviders().map((p) => p.id)).toEqual(PROVIDER_IDS);
    for (const id of PROVIDER_IDS) expect(getProvider(id).id).toBe(id);
  });

  it("gives every API host to exactly one provider and finds it by that host", () => {
    const hosts = listProviders().flatMap((p) => p.apiHosts);
    expect(new Set(hosts).size).toBe(hosts.length);
    for (const provider of listProviders()) {
      for (const host of provider.apiHosts) expect(findProviderByApiHost(host)).toBe(provider);
    }
    expect(findProviderByApiHost("api.spotify.com")?.id).toBe("spotify");
    expect(findProviderByApiHost("slack.com")?.id).toBe("slack");
    // Exact hostnames only: no suffix, case or token-host match.
    for (const host of ["spotify.com", "API.SPOTIFY.COM", "evil.api.github.com", "accounts.spotify.com"]) {
      expect(findProviderByApiHost(host)).toBeUndefined();
    }
  });

  it("answers a provider host's recipe, and nothing for another host", () => {
    for (const provider of listProviders()) {
      expect(findRecipe(provider.apiHosts[0])).toBe(provider.recipe);
      expect(provider.recipe.steps.length).toBeGreaterThan(0);
    }
    expect(recipeFields("api.github.com")).toEqual({ recipe: getProvider("github").recipe });
    expect(recipeFields("plain.latch.test")).toEqual({});
    expect(recipeFields(undefined)).toEqual({});
  });

  it("carries the OAuth endpoints and client authentication of DECISIONS.md 'Providers'", () => {
    const table = Object.fromEntries(
      listProviders().map((p) => [
        p.id,
        [p.oauth.authorizeUrl, p.oauth.tokenUrl, p.oauth.clientAuthentication, p.oauth.isPkcePublicClient],
      ]),
    );
    expect(table).toEqual({
      spotify: [
        "https://accounts.spotify.com/authorize",
        "https://accounts.spotify.com/api/token",
        "basic",
        true,
      ],
      github: [
        "https://github.com/login/oauth/authorize",
        "https://github.com/login/oauth/access_token",
        "form",
        false,
      ],
      google: [
        "https://accounts.google.com/o/oauth2/v2/auth",
        "https://oauth2.googleapis.com/token",
        "form",
        true,
      ],
      slack: ["https://slack.com/oauth/v2/authorize", "https://slack.com/api/oauth.v2.access", "form", false],
      stripe: [
        "https://connect.stripe.com/oauth/authorize",
        "https://connect.stripe.com/oauth/token",
        "secret_form",
        false,
      ],
    });
    expect(getProvider("google").oauth.authorizeParams).toEqual({
      access_type: "offline",
      prompt: "consent",
    });
    expect(getProvider("github").oauth.tokenHeaders).toEqual({ Accept: "application/json" });
    expect(getProvider("slack").oauth.scopeParam).toBe("user_scope");
    for (const id of ["spotify", "github", "slack", "stripe"] as const) {
      expect(getProvider(id).oauth.authorizeParams).toEqual({});
    }
  });

  it("names the HMAC inject modes hmac:<provider>_sig", () => {
    const modes = Object.fromEntries(listProviders().map((p) => [p.id, p.hmacInject]));
    expect(modes).toEqual({
      spotify: undefined,
      github: "hmac:github_sig",
      google: undefined,
      slack: "hmac:slack_sig",
      stripe: "hmac:stripe_sig",
    });
  });

  it("knows the user-only paths DECISIONS.md names, by whole path segment", () => {
    const spotify = getProvider("spotify");
    const github = getProvider("github");
    for (const path of ["/v1/me", "/v1/me/player", "/v1/me?market=SE"])
      expect(isUserOnlyPath(spotify, path)).toBe(true);
    for (const path of ["/v1/mentions", "/v1/albums/a1", "/v1/users/u1"]) {
      expect(isUserOnlyPath(spotify, path)).toBe(false);
    }
    for (const path of ["/user", "/user/repos", "/user?per_page=5"])
      expect(isUserOnlyPath(github, path)).toBe(true);
    expect(isUserOnlyPath(github, "/users/octocat")).toBe(false);
    expect(isUserOnlyPath(getProvider("stripe"), "/v1/me")).toBe(false);
  });

  it("reads a user-only path as the provider does: escaped unreserved characters and repeated slashes are the plain path", () => {
    const spotify = getProvider("spotify");
    const github = getProvider("github");
    for (const path of ["/v1/%6De", "/v1/%6de", "/v1//me", "/%76%31/me/player", "/v1/m%65?market=SE"])
      expect(isUserOnlyPath(spotify, path), path).toBe(true);
    for (const path of ["/%75ser", "/%75SER", "/u%73er//repos", "/user%2Frepos"]) {
      // "%75SER" is "uSER", another path (paths are case-sensitive); "%2F" is no separator.
      expect(isUserOnlyPath(github, path), path).toBe(path === "/%75ser" || path === "/u%73er//repos");
    }
    for (const path of ["/v1/%6Dentions", "/v1/ME", "/v1/me%20", "/v1/albums/a1"])
      expect(isUserOnlyPath(spotify, path), path).toBe(false);
    expect(isUserOnlyPath(github, "/%75sers/octocat")).toBe(false);
  });

  it("recognises the token URL however its path is spelled, and only at its host", () => {
    const spotify = getProvider("spotify");
    for (const path of ["/api/token", "/api/%74oken", "/api/%74%6Fken", "/api//token?x=1"])
      expect(isTokenEndpoint(spotify, "accounts.spotify.com", path), path).toBe(true);
    for (const path of ["/api/tokens", "/api/Token", "/api/token/x"])
      expect(isTokenEndpoint(spotify, "accounts.spotify.com", path), path).toBe(false);
    expect(isTokenEndpoint(spotify, "api.spotify.com", "/api/token")).toBe(false);
  });

  it("declares path rewrites on the provider that renamed the path (Spotify's playlist /tracks)", () => {
    const rewrites = listProviders().flatMap((p) => p.pathRewrites.map((rule) => [p.id, rule] as const));
    expect(rewrites.map(([id]) => id)).toEqual(["spotify"]);
    const [, rule] = rewrites[0]!;
    expect("/v1/playlists/p1/tracks?limit=5".replace(rule.pattern, rule.replacement)).toBe(
      "/v1/playlists/p1/items?limit=5",
    );
  });
});
