// Spec 4.2 rule 7 as a decision: for a provider app credential (`client_credentials`) or a user
// refresh token (`<ITEM>_REFRESH`, inject `refresh`), which token exchange the proxy makes before
// (or as) the call, with which sibling item, and how the client authenticates (DECISIONS
// "Providers"). Nothing here opens a value; the plan carries sealed items only.
import { ClientAuthentication, TokenGrant } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import type { CallableItem } from "../items/callable-item.ts";
import type { Provider, ClientAuthentication as ProviderClientAuth } from "../providers/provider.ts";
import {
  findProviderByHost,
  isTokenEndpoint,
  isUserOnlyPath,
  tokenEndpointOf,
} from "../providers/providers.ts";

export type TokenPlan =
  /** Not a provider token item: the stored value goes in as its inject mode says. */
  | { kind: "as_stored" }
  /** An app credential used as it is (Stripe's secret key as bearer, GitHub's client pair). */
  | { kind: "app_secret"; inject: "bearer" | "basic" }
  | {
      kind: "exchange";
      grant: TokenGrant;
      provider: Provider;
      tokenHost: string;
      tokenPath: string;
      clientAuthentication: ClientAuthentication;
      clientId: string;
      clientSecretItem: CallableItem | undefined;
      /** The refresh item (its current value is read again under the lock). */
      refreshItem: CallableItem | undefined;
      /** Where the minted access token is kept: the refresh item, or the app credential. */
      tokenItem: CallableItem;
      /** The agent posted to the token endpoint itself: answer the endpoint's body, redacted. */
      answerIsExchange: boolean;
    };

export interface TokenPlanDeps {
  findItemByName(
    organisationId: string,
    environment: string,
    name: string,
  ): Promise<CallableItem | undefined>;
}

const CLIENT_AUTH: Record<ProviderClientAuth, ClientAuthentication> = {
  basic: ClientAuthentication.CLIENT_AUTHENTICATION_BASIC,
  form: ClientAuthentication.CLIENT_AUTHENTICATION_FORM,
  secret_form: ClientAuthentication.CLIENT_AUTHENTICATION_SECRET_FORM,
};

/** `SPOTIFY_SECRET` and `SPOTIFY` share the base `SPOTIFY`; `SPOTIFY_REFRESH` too. */
export function baseNameOf(name: string): string {
  return name.replace(/_(?:REFRESH|SECRET)$/, "");
}

/**
 * Spec 4.2 `client_id`: the public OAuth client ID the agent names for a client secret. A client
 * secret belongs to one client, so with a client ID stored beside it (its username) the agent's must
 * be that one; with none stored (a PKCE public client's refresh token), the agent's is the one the
 * exchange sends. Answers the client ID to use.
 */
function clientIdFor(stored: string | null | undefined, asked: string | undefined, itemName: string): string {
  if (asked === undefined || asked === "") return stored ?? "";
  if (stored && stored !== asked) {
    throw new AppError(
      "invalid_request",
      `client_id is not the client ID stored with ${itemName}; a client secret belongs to one client (leave client_id out to use the stored one)`,
    );
  }
  return asked;
}

/**
 * The refresh token and the client secret a call with the provider token item `item` exchanges
 * with (itself where it is one of them), found by the names of spec 2.1. planTokenCall and the
 * credentials a policy judges (`findPlanItems`) both read them here, so they never differ.
 */
async function findTokenSiblings(
  deps: TokenPlanDeps,
  scope: { organisationId: string; environment: string },
  item: CallableItem,
): Promise<{ refreshItem: CallableItem | undefined; secretItem: CallableItem | undefined }> {
  const base = baseNameOf(item.name);
  const find = (name: string) => deps.findItemByName(scope.organisationId, scope.environment, name);
  // Spec 2.1: the sibling client secret is <ITEM>_SECRET (or <ITEM>), stored as the provider's
  // app credential; any other item of that name is never sent to a token URL.
  const asAppCredential = (found: CallableItem | undefined) =>
    found?.inject === "client_credentials" ? found : undefined;
  // Likewise the refresh token is <ITEM>_REFRESH stored as one (inject refresh): another item of
  // that name (a bearer stored under it) is never posted to a token URL as a refresh token.
  const asRefreshToken = (found: CallableItem | undefined) =>
    found?.inject === "refresh" ? found : undefined;
  const refreshItem = item.inject === "refresh" ? item : asRefreshToken(await find(`${base}_REFRESH`));
  const secretItem =
    item.inject === "client_credentials"
      ? item
      : (asAppCredential(await find(`${base}_SECRET`)) ??
        (base === item.name ? undefined : asAppCredential(await find(base))));
  return { refreshItem, secretItem };
}

/**
 * Every credential a call with `item` may use, the item first: for a provider token item also the
 * `<ITEM>_REFRESH` its plan exchanges (the user's account) and the sibling client secret that
 * authenticates the exchange, exactly as planTokenCall would find them. An organisation policy
 * judges each (tools/http-request.tool.ts): a rule on `SPOTIFY_REFRESH` must hold when the agent
 * names `SPOTIFY`, or only the host, and the plan exchanges the refresh token anyway.
 */
export async function findPlanItems(
  deps: TokenPlanDeps,
  scope: { organisationId: string; environment: string },
  item: CallableItem,
  options: { isAppOnly?: boolean | undefined } = {},
): Promise<CallableItem[]> {
  if (item.inject !== "client_credentials" && item.inject !== "refresh") return [item];
  // The app credential alone (findUnnamedAccount): the connected account is not used.
  if (options.isAppOnly && item.inject === "client_credentials") return [item];
  const { refreshItem, secretItem } = await findTokenSiblings(deps, scope, item);
  // Only the app credential: it is the one used (a client-credentials token, or itself).
  if (refreshItem === undefined) return [item];
  const siblings = [refreshItem, secretItem].filter(
    (found): found is CallableItem => found !== undefined && found.name !== item.name,
  );
  return [item, ...siblings];
}

/**
 * The connected user account (`<ITEM>_REFRESH`, inject refresh) a call naming the app credential
 * `item` (or only its host) would exchange, though the agent did not name it; undefined for any
 * other call. `isAppPath`: the call can go with the app credential alone (the provider has an app
 * token and the path is not user-only), as it went before the account was connected. An approval
 * or allow rule on the app credential never reaches the account (spec 4.2
 * user_connect_required: "after the operator connects and allows the agent"), so the tool
 * decides which of the two the call is made with (tools/http-request.tool.ts `decideAccountUse`).
 */
export async function findUnnamedAccount(
  deps: TokenPlanDeps,
  scope: { organisationId: string; environment: string },
  call: { item: CallableItem; host: string; path: string },
): Promise<{ account: CallableItem; isAppPath: boolean } | undefined> {
  const { item } = call;
  if (item.inject !== "client_credentials") return undefined;
  const provider = findProviderByHost(call.host);
  if (!provider) return undefined;
  const { refreshItem } = await findTokenSiblings(deps, scope, item);
  if (refreshItem === undefined) return undefined;
  const isAppPath = provider.appToken !== undefined && !isUserOnlyPath(provider, call.path);
  return { account: refreshItem, isAppPath };
}

/** The names of the credentials a plan sends or exchanges with (`item` first), as findPlanItems lists them. */
export function planItemNames(plan: TokenPlan, item: CallableItem): string[] {
  if (plan.kind !== "exchange") return [item.name];
  const names = [item.name, plan.refreshItem?.name, plan.clientSecretItem?.name, plan.tokenItem.name];
  return [...new Set(names.filter((name) => name !== undefined))];
}

/**
 * The plan for a call with `item` to `host` `path` (with the agent's `clientId`, spec 4.2, when it
 * named one). Throws `user_connect_required` (a user-only path, or a provider with no app token,
 * with only the app credential stored) or `inject_denied` with `missing_item` (a refresh with no
 * client secret at a provider that is no PKCE public client and no client ID to send).
 */
export async function planTokenCall(
  deps: TokenPlanDeps,
  scope: { organisationId: string; environment: string },
  call: {
    item: CallableItem;
    host: string;
    path: string;
    method: string;
    clientId?: string | undefined;
    /** The agent may not use the connected account: planned as if only the app credential were stored. */
    isAppOnly?: boolean | undefined;
  },
): Promise<TokenPlan> {
  const { item, host } = call;
  if (item.inject !== "client_credentials" && item.inject !== "refresh") return { kind: "as_stored" };
  const provider = findProviderByHost(host);
  if (!provider) {
    throw new AppError(
      "invalid_inject",
      `inject ${item.inject} works with the hosts of a provider with built-in connect; ${host} is not one`,
    );
  }
  const token = tokenEndpointOf(provider);
  const isTokenPost = call.method === "POST" && isTokenEndpoint(provider, host, call.path);
  const base = baseNameOf(item.name);
  const siblings = await findTokenSiblings(deps, scope, item);
  const { secretItem } = siblings;
  const refreshItem =
    call.isAppOnly && item.inject === "client_credentials" ? undefined : siblings.refreshItem;

  if (refreshItem === undefined) {
    // Only the app credential is stored (or the agent may not use the account beside it).
    const appToken = provider.appToken;
    if (isUserOnlyPath(provider, call.path) || appToken === undefined) {
      throw new AppError(
        "user_connect_required",
        `${call.path.split("?")[0]} at ${provider.displayName} needs a connected user account; only the app credential ${item.name} is stored`,
        { extra: { provider: provider.id, item_name: item.name, refresh_item_name: `${base}_REFRESH` } },
      );
    }
    if (appToken === "secret_bearer") return { kind: "app_secret", inject: "bearer" };
    if (appToken === "client_basic") {
      // The stored client ID is the Basic user: the agent's, when named, must be it.
      clientIdFor(item.username, call.clientId, item.name);
      return { kind: "app_secret", inject: "basic" };
    }
    requireTokenHost(item, token.host);
    return {
      kind: "exchange",
      grant: TokenGrant.TOKEN_GRANT_CLIENT_CREDENTIALS,
      provider,
      tokenHost: token.host,
      tokenPath: token.path,
      clientAuthentication: CLIENT_AUTH[provider.oauth.clientAuthentication],
      clientId: clientIdFor(item.username, call.clientId, item.name),
      clientSecretItem: item,
      refreshItem: undefined,
      tokenItem: item,
      answerIsExchange: isTokenPost,
    };
  }

  requireTokenHost(refreshItem, token.host);
  const clientId = secretItem
    ? clientIdFor(secretItem.username ?? refreshItem.username, call.clientId, secretItem.name)
    : clientIdFor(refreshItem.username, call.clientId, refreshItem.name);
  if (secretItem === undefined) {
    // Rule 7: without the sibling only a PKCE public client may exchange (client_id alone: the
    // refresh item's username, or the agent's client_id).
    if (!provider.oauth.isPkcePublicClient || !clientId) {
      throw new AppError(
        "inject_denied",
        `the refresh token ${refreshItem.name} needs the client secret ${base}_SECRET (with the client ID as username) to be exchanged at ${provider.displayName}`,
        { extra: { missing_item: `${base}_SECRET`, provider: provider.id } },
      );
    }
  } else {
    requireTokenHost(secretItem, token.host);
  }
  return {
    kind: "exchange",
    grant: TokenGrant.TOKEN_GRANT_REFRESH_TOKEN,
    provider,
    tokenHost: token.host,
    tokenPath: token.path,
    clientAuthentication: secretItem
      ? CLIENT_AUTH[provider.oauth.clientAuthentication]
      : ClientAuthentication.CLIENT_AUTHENTICATION_PUBLIC,
    clientId,
    clientSecretItem: secretItem,
    refreshItem,
    tokenItem: refreshItem,
    answerIsExchange: isTokenPost,
  };
}

/** Rule 7: both items must allow the provider's token host. */
function requireTokenHost(item: CallableItem, tokenHost: string): void {
  if (!item.allowedHosts.includes(tokenHost)) {
    throw new AppError(
      "host_mismatch",
      `credential ${item.name} must allow the token host ${tokenHost} to be exchanged there`,
      { extra: { item_name: item.name, allowed_hosts: item.allowedHosts } },
    );
  }
}
