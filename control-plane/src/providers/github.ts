// The code hosting provider (DECISIONS.md "Product": <provider_code_hosting> = github).
import { type Provider, RECIPE_NEXT } from "./provider.ts";

export const github: Provider = {
  id: "github",
  displayName: "GitHub",
  apiHosts: ["api.github.com"],
  recipe: {
    steps: [
      "Open https://github.com/settings/personal-access-tokens and choose Generate new token (fine-grained).",
      "Limit it to the repositories and permissions the agent needs, with an expiry.",
      "Generate the token and copy it (it starts with github_pat_).",
    ],
    next: RECIPE_NEXT,
  },
  oauth: {
    authorizeUrl: "https://github.com/login/oauth/authorize",
    authorizeParams: {},
    scopeParam: "scope",
    tokenUrl: "https://github.com/login/oauth/access_token",
    // Without it the token URL answers form-encoded, errors included.
    tokenHeaders: { Accept: "application/json" },
    clientAuthentication: "form",
    isPkcePublicClient: false,
  },
  hmacInject: "hmac:github_sig",
  appToken: "client_basic",
  userOnlyPathPrefixes: ["/user"],
  pathRewrites: [],
};
