// The registry of providers with built-in connect (DECISIONS.md "Product"): the list, one by id,
// one by API host, and the public recipe of a host. One file per provider beside this one.
import { normalisePathForMatch } from "@latch/shared/requests/path";
import { github } from "./github.ts";
import { google } from "./google.ts";
import type { Provider, ProviderId, Recipe } from "./provider.ts";
import { slack } from "./slack.ts";
import { spotify } from "./spotify.ts";
import { stripe } from "./stripe.ts";

// `satisfies` makes a provider missing from, or unknown to, ProviderId a type error.
const BY_ID = { spotify, github, google, slack, stripe } satisfies Record<ProviderId, Provider>;

const BY_API_HOST: ReadonlyMap<string, Provider> = new Map(
  Object.values(BY_ID).flatMap((provider) => provider.apiHosts.map((host) => [host, provider] as const)),
);

/** The identifiers in DECISIONS.md order, e.g. for `z.enum(PROVIDER_IDS)` (setup's `provider`). */
export const PROVIDER_IDS = Object.freeze(Object.keys(BY_ID)) as readonly [ProviderId, ...ProviderId[]];

/** Every provider, in DECISIONS.md order. */
export function listProviders(): readonly Provider[] {
  return Object.values(BY_ID);
}

/** The provider of an identifier, e.g. `getProvider("github").oauth.tokenUrl`. */
export function getProvider(id: ProviderId): Provider {
  return BY_ID[id];
}

/** The provider that owns an exact API hostname, e.g. `api.spotify.com` -> spotify; else nothing. */
export function findProviderByApiHost(host: string): Provider | undefined {
  return BY_API_HOST.get(host);
}

const BY_TOKEN_HOST: ReadonlyMap<string, Provider> = new Map(
  Object.values(BY_ID).map((provider) => [new URL(provider.oauth.tokenUrl).host, provider] as const),
);

/** The provider of an API host or of its token URL's host (`accounts.spotify.com`). */
export function findProviderByHost(host: string): Provider | undefined {
  return BY_API_HOST.get(host) ?? BY_TOKEN_HOST.get(host);
}

/** The token URL as host and path, e.g. `{ host: "accounts.spotify.com", path: "/api/token" }`. */
export function tokenEndpointOf(provider: Provider): { host: string; path: string } {
  const url = new URL(provider.oauth.tokenUrl);
  return { host: url.host, path: url.pathname };
}

/** The public recipe (spec 2.5) of a known provider's API host, if any. */
export function findRecipe(host: string): Recipe | undefined {
  return findProviderByApiHost(host)?.recipe;
}

/** The recipe of a known provider host as an answer's `recipe` field; nothing for any other host. */
export function recipeFields(host: string | undefined): { recipe?: Recipe } {
  const recipe = host ? findRecipe(host) : undefined;
  return recipe ? { recipe } : {};
}

/**
 * Whether a path (with or without its query) needs a user token at this provider (DECISIONS.md
 * "Providers": with only the app credential stored it answers `user_connect_required`).
 * `/user` covers `/user`, `/user/repos` and `/user?x=1`, not `/users/octocat`. The path is read as
 * the provider reads it (`normalisePathForMatch`): `/%75ser` and `/user//repos` are `/user` and `/user/repos` there, so
 * they are here, or they would go with the app credential alone.
 */
export function isUserOnlyPath(provider: Provider, path: string): boolean {
  const read = normalisePathForMatch(path);
  return provider.userOnlyPathPrefixes.some((prefix) => read === prefix || read.startsWith(`${prefix}/`));
}

/** Whether `path` (with or without its query) at `host` is the provider's token URL, as the provider reads it. */
export function isTokenEndpoint(provider: Provider, host: string, path: string): boolean {
  const token = tokenEndpointOf(provider);
  return host === token.host && normalisePathForMatch(path) === token.path;
}
