// Public recipes for the API hosts of known providers (spec 2.5): where an operator makes the
// credential an agent asked for, as steps[] and what happens next. Public text only: a recipe never
// names a stored item's value, and it is the same for every organisation.

export interface Recipe {
  steps: string[];
  next: string;
}

const NEXT =
  "Paste the value on this page and store it. The agent's approval is activated with it, and the agent can retry its call.";

/** By exact API host (DECISIONS.md: the five provider identifiers and their API hosts). */
const RECIPES: Readonly<Record<string, Recipe>> = {
  "api.github.com": {
    steps: [
      "Open https://github.com/settings/personal-access-tokens and choose Generate new token (fine-grained).",
      "Limit it to the repositories and permissions the agent needs, with an expiry.",
      "Generate the token and copy it (it starts with github_pat_).",
    ],
    next: NEXT,
  },
  "api.stripe.com": {
    steps: [
      "Open https://dashboard.stripe.com/apikeys (use test mode for staging).",
      "Create a restricted key with only the resources the agent needs.",
      "Copy the key (it starts with rk_test_ or rk_live_).",
    ],
    next: NEXT,
  },
  "slack.com": {
    steps: [
      "Open https://api.slack.com/apps and choose your app (or create one).",
      "Under OAuth & Permissions add the scopes the agent needs and install the app to the workspace.",
      "Copy the Bot User OAuth Token (it starts with xoxb-).",
    ],
    next: NEXT,
  },
  "api.spotify.com": {
    steps: [
      "Open https://developer.spotify.com/dashboard and create an app (or open yours).",
      "Spotify user data needs a user token: store the app's client secret with the client ID as username, then connect the account from the Inbox.",
      "For public catalogue data only, a client credentials token is enough.",
    ],
    next: NEXT,
  },
  "www.googleapis.com": {
    steps: [
      "Open https://console.cloud.google.com/apis/credentials in the project the agent works in.",
      "Create an API key restricted to the APIs the agent needs (user data needs an OAuth client instead: store its secret and connect the account from the Inbox).",
      "Copy the key.",
    ],
    next: NEXT,
  },
};

/** The recipe for a known provider's API host, if any. */
export function findRecipe(host: string): Recipe | undefined {
  return Object.hasOwn(RECIPES, host) ? RECIPES[host] : undefined;
}

/** The recipe of a known provider host as an answer's `recipe` field; nothing for any other host. */
export function recipeFields(host: string | undefined): { recipe?: Recipe } {
  const recipe = host ? findRecipe(host) : undefined;
  return recipe ? { recipe } : {};
}
