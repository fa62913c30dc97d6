// The public recipe for connecting a provider account (spec 2.5 recipes, DECISIONS "Providers"):
// where to create the OAuth app, the redirect URI to register (this deployment's), the scopes
// Latch asks for, and how to store the app's client secret. Public text; never a stored value.
import type { ProviderId, Recipe } from "./provider.ts";
import { getProvider, tokenEndpointOf } from "./providers.ts";

/** The scopes a connect asks for: enough for the user paths the providers' recipes name. */
export const CONNECT_SCOPES: Record<ProviderId, string> = {
  spotify:
    "user-read-private user-read-email playlist-read-private playlist-modify-private playlist-modify-public",
  github: "read:user repo",
  google: "openid email https://www.googleapis.com/auth/drive.readonly",
  slack: "users.profile:read chat:write channels:read",
  stripe: "read_write",
};

const CREATE_APP: Record<ProviderId, string> = {
  spotify: "Open https://developer.spotify.com/dashboard and create an app (Web API).",
  github:
    "Open https://github.com/settings/apps/new and create a GitHub App with 'Expire user authorization tokens' on (that is what gives a refresh token).",
  google:
    "Open https://console.cloud.google.com/apis/credentials and create an OAuth client ID of type Web application.",
  slack:
    "Open https://api.slack.com/apps, create an app, and turn on token rotation under OAuth & Permissions.",
  stripe:
    "Open https://dashboard.stripe.com/settings/connect, turn on OAuth for Standard accounts and note the client ID (ca_...).",
};

/**
 * @example connectRecipe("spotify", "https://latch.example.com").steps[1]
 *   // "Register the redirect URI https://latch.example.com/connect/callback."
 */
export function connectRecipe(id: ProviderId, baseUrl: string): Recipe {
  const provider = getProvider(id);
  const hosts = [...new Set([provider.apiHosts[0], tokenEndpointOf(provider).host])].join(" and ");
  return {
    steps: [
      CREATE_APP[id],
      `Register the redirect URI ${baseUrl.replace(/\/$/, "")}/connect/callback.`,
      `Latch asks for the scopes: ${CONNECT_SCOPES[id]}.`,
      `Store the app's client secret${id === "stripe" ? " (the platform secret key)" : ""} with the client ID as username, inject client_credentials, allowed for ${hosts}.`,
    ],
    next: `Then click Connect ${provider.displayName} in the Inbox (or on this page): you approve at ${provider.displayName}, and the agent can retry.`,
  };
}
