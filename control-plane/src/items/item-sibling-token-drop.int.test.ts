// A connected account's access token (kept under `<BASE>_REFRESH`, items/item-tokens.repo.ts) is
// minted with its client secret (`<BASE>_SECRET`, or `<BASE>`, spec 2.1) too: a replace, rotate,
// edit, rename or delete of that secret drops it, so a secret revoked at the provider and rotated
// here stops working at once, not when the token expires (up to an hour later).
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import { isPostgresRun, newTestOrganisation, testDatabase } from "../../test/database.ts";
import { testItemsService } from "../../test/items-service.ts";
import type { OpenDatabase } from "../db/database.ts";
import { createItemTokensRepo } from "./item-tokens.repo.ts";
import type { ItemsService } from "./items.service.ts";

let database: OpenDatabase;
let items: ItemsService;

const HOSTS = ["api.spotify.com", "accounts.spotify.com"];

beforeAll(async () => {
  database = await testDatabase();
  items = await testItemsService(database.db, ["staging", "production"]);
});

/** An organisation with a connected Spotify account whose access token is cached. */
async function connectedAccount(secretName = "SPOTIFY_SECRET") {
  const org = await newTestOrganisation(database);
  const secret = await items.storeItem(org, "operator", {
    name: secretName,
    value: "app-secret-old-0123456789",
    allowed_hosts: HOSTS,
    inject: "client_credentials",
    username: "spotify-client-id",
  });
  const refresh = await items.storeSealedItem(org, "operator", {
    name: "SPOTIFY_REFRESH",
    environment: "staging",
    sealedValue: new Uint8Array([9, 9, 9]),
    sealingKeyId: "k",
    last4: "resh",
    allowedHosts: HOSTS,
    inject: "refresh",
    username: "spotify-client-id",
  });
  await items.inItemTokenLock(refresh.id, (locked) =>
    locked.upsertAccessToken(refresh.id, org, {
      sealedValue: new Uint8Array([1, 2, 3]),
      sealingKeyId: "k",
      tokenLast4: "oken",
      expiresAt: new Date(Date.now() + 3_600_000),
      scope: "",
    }),
  );
  const cachedToken = () => createItemTokensRepo(database.db).findAccessToken(refresh.id, new Date());
  expect(await cachedToken()).toBeDefined();
  return { org, secret, refresh, cachedToken };
}

describe("a change of a connected account's client secret", () => {
  const changes: [string, (org: string, id: string) => Promise<unknown>][] = [
    [
      "a replace by name",
      (org) =>
        items.storeItem(
          org,
          "operator",
          {
            name: "SPOTIFY_SECRET",
            value: "app-secret-new-0123456789",
            allowed_hosts: HOSTS,
            inject: "client_credentials",
            username: "spotify-client-id",
          },
          { replace: true },
        ),
    ],
    ["a rotate", (org, id) => items.rotateItem(org, "operator", id, "app-secret-new-0123456789")],
    [
      "an edit of the value",
      (org, id) => items.updateItem(org, "operator", id, { value: "app-secret-new-0123456789" }),
    ],
    ["a rename", (org, id) => items.updateItem(org, "operator", id, { name: "SPOTIFY_OLD_SECRET" })],
    ["a delete", (org, id) => items.deleteItem(org, "operator", id)],
  ];

  it.each(changes)("%s drops the access token minted with it", async (_label, change) => {
    const { org, secret, cachedToken } = await connectedAccount();
    await change(org, secret.id);
    expect(await cachedToken()).toBeUndefined();
  });

  it("drops it for a client secret stored under the base name too (SPOTIFY)", async () => {
    const { org, secret, cachedToken } = await connectedAccount("SPOTIFY");
    await items.rotateItem(org, "operator", secret.id, "app-secret-new-0123456789");
    expect(await cachedToken()).toBeUndefined();
  });

  it("drops it when a client secret is stored beside the account for the first time", async () => {
    const { org, secret, cachedToken } = await connectedAccount("SPOTIFY");
    await items.storeItem(org, "operator", {
      name: "SPOTIFY_SECRET",
      value: "app-secret-new-0123456789",
      allowed_hosts: HOSTS,
      inject: "client_credentials",
      username: "spotify-client-id",
    });
    expect(secret.id).toBeDefined();
    expect(await cachedToken()).toBeUndefined();
  });

  it("keeps it for a change of another credential, or of the same name in another environment", async () => {
    const { org, cachedToken } = await connectedAccount();
    const other = await items.storeItem(org, "operator", {
      name: "GITHUB_SECRET",
      value: "other-secret-0123456789",
      allowed_hosts: ["github.com"],
      inject: "client_credentials",
      username: "github-client-id",
    });
    await items.rotateItem(org, "operator", other.id, "other-secret-new-0123456789");
    await items.deleteItem(org, "operator", other.id);
    await items.storeItem(org, "operator", {
      name: "SPOTIFY_SECRET",
      environment: "production",
      value: "prod-secret-0123456789",
      allowed_hosts: HOSTS,
      inject: "client_credentials",
      username: "spotify-client-id",
    });
    expect(await cachedToken()).toBeDefined();
  });
});

// The call's side (calls.service.ts storeRotated): it holds the values it spent unchanged, then
// stores its token. A rotate of the secret arriving between the two waits, then drops that token.
describe.runIf(isPostgresRun())("a rotate of the client secret while a call stores its token", () => {
  it("waits for the call's token to be stored, then drops it", async () => {
    const { org, secret, refresh, cachedToken } = await connectedAccount();
    const spent = await createItemTokensRepo(database.db).findSealedValue(secret.id);
    let rotating: Promise<unknown> | undefined;
    await items.inItemTokenLock(refresh.id, async (locked) => {
      expect(await locked.holdIfUnchanged([{ itemId: secret.id, sealedValue: spent!.sealedValue }])).toBe(
        true,
      );
      rotating = items.rotateItem(org, "operator", secret.id, "app-secret-new-0123456789");
      expect(await waitForLockWaiter(rotating)).toBe(true);
      await locked.upsertAccessToken(refresh.id, org, {
        sealedValue: new Uint8Array([4, 5, 6]),
        sealingKeyId: "k",
        tokenLast4: "oken",
        expiresAt: new Date(Date.now() + 3_600_000),
        scope: "",
      });
    });
    await rotating;
    expect(await cachedToken()).toBeUndefined();
  });
});

/** Whether a session waits on a lock before `change` settles. */
async function waitForLockWaiter(change: Promise<unknown>): Promise<boolean> {
  let isSettled = false;
  const settle = () => {
    isSettled = true;
  };
  void change.then(settle, settle);
  for (let attempt = 0; attempt < 250; attempt++) {
    if (isSettled) return false;
    const { rows } = await sql<{ waiting: number }>`
      select count(*)::int as waiting from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock'`.execute(database.db);
    if ((rows[0]?.waiting ?? 0) >= 1) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return false;
}
