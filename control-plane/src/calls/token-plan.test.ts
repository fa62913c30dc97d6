import { ClientAuthentication, TokenGrant } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import type { CallableItem } from "../items/callable-item.ts";
import { findPlanItems, planItemNames, planTokenCall } from "./token-plan.ts";

function item(
  name: string,
  inject: string,
  allowedHosts: string[],
  username: string | null = null,
): CallableItem {
  return {
    id: `itm_${name}`,
    name,
    allowedHosts,
    inject,
    username,
    sealingKeyId: "k",
    sealedValue: new Uint8Array([1]),
  };
}

const SPOTIFY_HOSTS = ["api.spotify.com", "accounts.spotify.com"];
const scope = { organisationId: "org", environment: "production" };

async function plan(
  stored: CallableItem[],
  call: { item: string; host: string; path: string; method?: string; clientId?: string },
) {
  const byName = new Map(stored.map((i) => [i.name, i]));
  return planTokenCall({ findItemByName: async (_o, _e, name) => byName.get(name) }, scope, {
    item: byName.get(call.item)!,
    host: call.host,
    path: call.path,
    method: call.method ?? "GET",
    clientId: call.clientId,
  });
}

async function refusal(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.catch((e: unknown) => e);
  if (!(error instanceof AppError)) throw new Error("expected a refusal");
  return error;
}

describe("planTokenCall (spec 4.2 rule 7)", () => {
  it("leaves other items as stored", async () => {
    expect(
      await plan([item("TOKEN", "bearer", ["api.example.com"])], {
        item: "TOKEN",
        host: "api.example.com",
        path: "/",
      }),
    ).toEqual({
      kind: "as_stored",
    });
  });

  it("app credential + <ITEM>_REFRESH: a refresh exchange with HTTP Basic (Spotify), kept on the refresh item", async () => {
    const planned = await plan(
      [
        item("SPOTIFY", "client_credentials", SPOTIFY_HOSTS, "cid"),
        item("SPOTIFY_REFRESH", "refresh", SPOTIFY_HOSTS),
      ],
      { item: "SPOTIFY", host: "api.spotify.com", path: "/v1/me" },
    );
    expect(planned).toMatchObject({
      kind: "exchange",
      grant: TokenGrant.TOKEN_GRANT_REFRESH_TOKEN,
      tokenHost: "accounts.spotify.com",
      tokenPath: "/api/token",
      clientAuthentication: ClientAuthentication.CLIENT_AUTHENTICATION_BASIC,
      clientId: "cid",
      answerIsExchange: false,
    });
    expect(planned.kind === "exchange" && planned.tokenItem.name).toBe("SPOTIFY_REFRESH");
  });

  it("<ITEM>_REFRESH posted to the token endpoint: the exchange is the answer", async () => {
    const planned = await plan(
      [
        item("SPOTIFY_SECRET", "client_credentials", SPOTIFY_HOSTS, "cid"),
        item("SPOTIFY_REFRESH", "refresh", SPOTIFY_HOSTS),
      ],
      { item: "SPOTIFY_REFRESH", host: "accounts.spotify.com", path: "/api/token", method: "POST" },
    );
    expect(planned).toMatchObject({ kind: "exchange", answerIsExchange: true });
    expect(planned.kind === "exchange" && planned.clientSecretItem?.name).toBe("SPOTIFY_SECRET");
  });

  it("a sibling of the right name that is not an app credential is never used as the client secret", async () => {
    const error = await refusal(
      plan(
        [
          item("GITHUB", "bearer", ["api.github.com", "github.com"]),
          item("GITHUB_REFRESH", "refresh", ["api.github.com", "github.com"]),
        ],
        {
          item: "GITHUB_REFRESH",
          host: "api.github.com",
          path: "/user",
        },
      ),
    );
    expect(error.code).toBe("inject_denied");
    expect(error.extra.missing_item).toBe("GITHUB_SECRET");
  });

  it("a PKCE provider's refresh alone: the public-client exchange with the client id from username", async () => {
    const planned = await plan(
      [item("GOOGLE_REFRESH", "refresh", ["www.googleapis.com", "oauth2.googleapis.com"], "gid")],
      {
        item: "GOOGLE_REFRESH",
        host: "www.googleapis.com",
        path: "/drive/v3/files",
      },
    );
    expect(planned).toMatchObject({
      kind: "exchange",
      clientAuthentication: ClientAuthentication.CLIENT_AUTHENTICATION_PUBLIC,
      clientId: "gid",
    });
  });

  it.each([
    ["spotify /v1/me", "SPOTIFY", SPOTIFY_HOSTS, "api.spotify.com", "/v1/me", "user_connect_required"],
    [
      "google, any path",
      "GOOGLE",
      ["www.googleapis.com", "oauth2.googleapis.com"],
      "www.googleapis.com",
      "/x",
      "user_connect_required",
    ],
    [
      "slack, any path",
      "SLACK",
      ["slack.com"],
      "slack.com",
      "/api/chat.postMessage",
      "user_connect_required",
    ],
  ])("app credential only, %s: %s", async (_label, name, hosts, host, path, code) => {
    const error = await refusal(
      plan([item(name, "client_credentials", hosts, "cid")], { item: name, host, path }),
    );
    expect(error.code).toBe(code);
    expect(error.extra.refresh_item_name).toBe(`${name}_REFRESH`);
  });

  it.each([
    ["api.spotify.com", "/v1/%6De", "SPOTIFY", SPOTIFY_HOSTS],
    ["api.spotify.com", "/v1//me/player", "SPOTIFY", SPOTIFY_HOSTS],
    ["api.github.com", "/%75ser", "GITHUB", ["api.github.com", "github.com"]],
  ])(
    "app credential only, %s%s: a user-only path spelled another way is user_connect_required too",
    async (host, path, name, hosts) => {
      const error = await refusal(
        plan([item(name, "client_credentials", hosts, "cid")], { item: name, host, path }),
      );
      expect(error.code).toBe("user_connect_required");
      expect(error.extra.refresh_item_name).toBe(`${name}_REFRESH`);
    },
  );

  it("a post to the token endpoint spelled another way is the token endpoint; an ordinary path is not", async () => {
    const stored = [
      item("SPOTIFY_SECRET", "client_credentials", SPOTIFY_HOSTS, "cid"),
      item("SPOTIFY_REFRESH", "refresh", SPOTIFY_HOSTS),
    ];
    const post = (path: string) =>
      plan(stored, { item: "SPOTIFY_REFRESH", host: "accounts.spotify.com", path, method: "POST" });
    for (const path of ["/api/%74oken", "/api/%74%6fken", "/api//token"])
      expect(await post(path), path).toMatchObject({ kind: "exchange", answerIsExchange: true });
    expect(await post("/api/tokens")).toMatchObject({ kind: "exchange", answerIsExchange: false });
  });

  it("app credential only: Spotify mints a client-credentials token, Stripe's key is the bearer, GitHub's pair is Basic", async () => {
    expect(
      await plan([item("SPOTIFY", "client_credentials", SPOTIFY_HOSTS, "cid")], {
        item: "SPOTIFY",
        host: "api.spotify.com",
        path: "/v1/browse/new-releases",
      }),
    ).toMatchObject({ kind: "exchange", grant: TokenGrant.TOKEN_GRANT_CLIENT_CREDENTIALS });
    expect(
      await plan([item("STRIPE", "client_credentials", ["api.stripe.com"], "ca")], {
        item: "STRIPE",
        host: "api.stripe.com",
        path: "/v1/balance",
      }),
    ).toEqual({ kind: "app_secret", inject: "bearer" });
    expect(
      await plan([item("GITHUB", "client_credentials", ["api.github.com", "github.com"], "cid")], {
        item: "GITHUB",
        host: "api.github.com",
        path: "/repos/a/b",
      }),
    ).toEqual({ kind: "app_secret", inject: "basic" });
  });

  it("a sibling named <ITEM>_REFRESH that is not a refresh token is never posted as one", async () => {
    // A bearer stored under the refresh name (it lists the token host): the app credential alone
    // plans, as if no refresh token were stored.
    expect(
      await plan(
        [
          item("SPOTIFY", "client_credentials", SPOTIFY_HOSTS, "cid"),
          item("SPOTIFY_REFRESH", "bearer", SPOTIFY_HOSTS),
        ],
        { item: "SPOTIFY", host: "api.spotify.com", path: "/v1/browse/new-releases" },
      ),
    ).toMatchObject({ kind: "exchange", grant: TokenGrant.TOKEN_GRANT_CLIENT_CREDENTIALS });
  });

  it("refuses an exchange when an item does not allow the token host", async () => {
    const error = await refusal(
      plan(
        [
          item("SPOTIFY", "client_credentials", ["api.spotify.com"], "cid"),
          item("SPOTIFY_REFRESH", "refresh", SPOTIFY_HOSTS),
        ],
        {
          item: "SPOTIFY",
          host: "api.spotify.com",
          path: "/v1/me",
        },
      ),
    );
    expect(error.code).toBe("host_mismatch");
  });
});

describe("http_request's client_id (spec 4.2; issue 21 item 7)", () => {
  const spotifyUser = { item: "SPOTIFY_REFRESH", host: "api.spotify.com", path: "/v1/me" };

  it("is the client ID a PKCE public client's refresh exchange sends when none is stored", async () => {
    const refreshOnly = [item("SPOTIFY_REFRESH", "refresh", SPOTIFY_HOSTS)];
    expect((await refusal(plan(refreshOnly, spotifyUser))).code).toBe("inject_denied");
    expect(await plan(refreshOnly, { ...spotifyUser, clientId: "public-cid" })).toMatchObject({
      kind: "exchange",
      clientAuthentication: ClientAuthentication.CLIENT_AUTHENTICATION_PUBLIC,
      clientId: "public-cid",
    });
  });

  it("must be the client ID stored with a client secret (it belongs to one client)", async () => {
    const pair = [
      item("SPOTIFY", "client_credentials", SPOTIFY_HOSTS, "cid"),
      item("SPOTIFY_REFRESH", "refresh", SPOTIFY_HOSTS),
    ];
    const app = { item: "SPOTIFY", host: "api.spotify.com", path: "/v1/me" };
    expect(await plan(pair, { ...app, clientId: "cid" })).toMatchObject({
      kind: "exchange",
      clientId: "cid",
    });
    const other = await refusal(plan(pair, { ...app, clientId: "someone-else" }));
    expect(other.code).toBe("invalid_request");
    expect(other.message).toMatch(/client_id is not the client ID stored with SPOTIFY/);
    // The app credential alone: client credentials under the same rule.
    const appOnly = [item("SPOTIFY", "client_credentials", SPOTIFY_HOSTS, "cid")];
    const catalogue = { item: "SPOTIFY", host: "api.spotify.com", path: "/v1/browse/new-releases" };
    expect(await plan(appOnly, { ...catalogue, clientId: "cid" })).toMatchObject({ clientId: "cid" });
    expect((await refusal(plan(appOnly, { ...catalogue, clientId: "x" }))).code).toBe("invalid_request");
    // A refresh item with its own client ID stored: the same.
    const named = [item("SPOTIFY_REFRESH", "refresh", SPOTIFY_HOSTS, "cid")];
    expect((await refusal(plan(named, { ...spotifyUser, clientId: "x" }))).code).toBe("invalid_request");
  });
});

describe("findPlanItems: the credentials a call uses, which a policy judges", () => {
  const app = item("SPOTIFY", "client_credentials", SPOTIFY_HOSTS, "cid");
  const me = { host: "api.spotify.com", path: "/v1/me" };
  const catalogue = { host: "api.spotify.com", path: "/v1/browse/new-releases" };
  const cases: [string, CallableItem[], { item: string; host: string; path: string }, string[]][] = [
    [
      "a plain item: itself",
      [item("TOKEN", "bearer", ["api.example.com"])],
      { item: "TOKEN", host: "api.example.com", path: "/" },
      ["TOKEN"],
    ],
    ["the app credential alone: itself", [app], { item: "SPOTIFY", ...catalogue }, ["SPOTIFY"]],
    [
      "the app credential with a connected account: the refresh token it exchanges too",
      [app, item("SPOTIFY_REFRESH", "refresh", SPOTIFY_HOSTS)],
      { item: "SPOTIFY", ...me },
      ["SPOTIFY", "SPOTIFY_REFRESH"],
    ],
    [
      "the refresh token: the sibling client secret its exchange adds",
      [
        item("SPOTIFY_SECRET", "client_credentials", SPOTIFY_HOSTS, "cid"),
        item("SPOTIFY_REFRESH", "refresh", SPOTIFY_HOSTS),
      ],
      { item: "SPOTIFY_REFRESH", ...me },
      ["SPOTIFY_REFRESH", "SPOTIFY_SECRET"],
    ],
    [
      "a bearer stored under the refresh name: never exchanged, never listed",
      [app, item("SPOTIFY_REFRESH", "bearer", SPOTIFY_HOSTS)],
      { item: "SPOTIFY", ...catalogue },
      ["SPOTIFY"],
    ],
  ];

  it.each(cases)("%s, as the plan uses them", async (_name, stored, call, expected) => {
    const byName = new Map(stored.map((i) => [i.name, i]));
    const deps = { findItemByName: async (_o: string, _e: string, name: string) => byName.get(name) };
    const named = byName.get(call.item)!;
    expect((await findPlanItems(deps, scope, named)).map((i) => i.name)).toEqual(expected);
    // The plan made for the call uses the same ones (the send checks it against them).
    expect(planItemNames(await plan(stored, call), named).sort()).toEqual([...expected].sort());
  });
});
