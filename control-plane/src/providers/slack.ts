// The messaging provider (DECISIONS.md "Product": <provider_messaging> = slack).
import { type Provider, RECIPE_NEXT } from "./provider.ts";

export const slack: Provider = {
  id: "slack",
  displayName: "Slack",
  apiHosts: ["slack.com"],
  recipe: {
    steps: [
      "Open https://api.slack.com/apps and choose your app (or create one).",
      "Under OAuth & Permissions add the scopes the agent needs and install the app to the workspace.",
      "Copy the Bot User OAuth Token (it starts with xoxb-).",
    ],
    next: RECIPE_NEXT,
  },
  oauth: {
    authorizeUrl: "https://slack.com/oauth/v2/authorize",
    authorizeParams: {},
    scopeParam: "user_scope",
    tokenUrl: "https://slack.com/api/oauth.v2.access",
    tokenHeaders: {},
    clientAuthentication: "form",
    isPkcePublicClient: false,
  },
  hmacInject: "hmac:slack_sig",
  userOnlyPathPrefixes: [],
  pathRewrites: [],
};
