// The music provider (DECISIONS.md "Product": <provider_music> = spotify).
import { pathAsRead } from "./path-as-read.ts";
import { type Provider, RECIPE_NEXT } from "./provider.ts";

export const spotify: Provider = {
  id: "spotify",
  displayName: "Spotify",
  apiHosts: ["api.spotify.com"],
  recipe: {
    steps: [
      "Open https://developer.spotify.com/dashboard and create an app (or open yours).",
      "Spotify user data needs a user token: store the app's client secret with the client ID as username, then connect the account from the Inbox.",
      "For public catalogue data only, a client credentials token is enough.",
    ],
    next: RECIPE_NEXT,
  },
  oauth: {
    authorizeUrl: "https://accounts.spotify.com/authorize",
    authorizeParams: {},
    scopeParam: "scope",
    tokenUrl: "https://accounts.spotify.com/api/token",
    tokenHeaders: {},
    clientAuthentication: "basic",
    isPkcePublicClient: true,
  },
  appToken: "client_credentials",
  userOnlyPathPrefixes: ["/v1/me"],
  pathRewrites: [
    {
      // Spec 4.2 rule 3: playlist content moved from /tracks to /items. Exactly
      // /v1/playlists/{id}/tracks, optionally with a query; /tracks/... and other paths stay.
      // Matched as Spotify reads the path (path-as-read.ts): `/v1/playlists/p1/%74racks` is the old
      // path there too, and left as it was it would reach the old path past the rules on the new.
      methods: ["GET", "POST", "PUT", "DELETE"],
      pattern: new RegExp(`^(${pathAsRead("/v1/playlists/")}[^/?#]+)${pathAsRead("/tracks")}(\\?.*)?$`),
      replacement: "$1/items$2",
      bodyKeyRename: { method: "DELETE", from: "tracks", to: "items" },
      describe: ({ from, to }) =>
        `The provider renamed playlist tracks to items: this call was sent to ${to} instead of ${from}. Use the /items path from now on.`,
    },
  ],
};
