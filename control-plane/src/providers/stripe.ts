// The payments provider (DECISIONS.md "Product": <provider_payments> = stripe).
import { type Provider, RECIPE_NEXT } from "./provider.ts";

export const stripe: Provider = {
  id: "stripe",
  displayName: "Stripe",
  apiHosts: ["api.stripe.com"],
  recipe: {
    steps: [
      "Open https://dashboard.stripe.com/apikeys (use test mode for staging).",
      "Create a restricted key with only the resources the agent needs.",
      "Copy the key (it starts with rk_test_ or rk_live_).",
    ],
    next: RECIPE_NEXT,
  },
  oauth: {
    authorizeUrl: "https://connect.stripe.com/oauth/authorize",
    authorizeParams: {},
    scopeParam: "scope",
    tokenUrl: "https://connect.stripe.com/oauth/token",
    tokenHeaders: {},
    // The platform secret key is the client secret; no client_id at the token URL.
    clientAuthentication: "secret_form",
    isPkcePublicClient: false,
  },
  hmacInject: "hmac:stripe_sig",
  appToken: "secret_bearer",
  userOnlyPathPrefixes: [],
  pathRewrites: [],
};
