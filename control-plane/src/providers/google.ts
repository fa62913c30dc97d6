// The suite provider (DECISIONS.md "Product": <provider_suite> = google).
import { type Provider, RECIPE_NEXT } from "./provider.ts";

export const google: Provider = {
  id: "google",
  displayName: "Google",
  apiHosts: ["www.googleapis.com"],
  recipe: {
    steps: [
      "Open https://console.cloud.google.com/apis/credentials in the project the agent works in.",
      "Create an API key restricted to the APIs the agent needs (user data needs an OAuth client instead: store its secret and connect the account from the Inbox).",
      "Copy the key.",
    ],
    next: RECIPE_NEXT,
  },
  oauth: {
    authorizeUrl: "https://accounts.google.com/o/oauth2/v2/auth",
    // Google issues a refresh token only for offline access, and again only when consent is shown.
    authorizeParams: { access_type: "offline", prompt: "consent" },
    scopeParam: "scope",
    tokenUrl: "https://oauth2.googleapis.com/token",
    tokenHeaders: {},
    clientAuthentication: "form",
    isPkcePublicClient: true,
  },
  userOnlyPathPrefixes: [],
  pathRewrites: [],
};
