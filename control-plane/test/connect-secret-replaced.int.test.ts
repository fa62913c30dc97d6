// A connect keeps the access token of its exchange (connect.service.ts) only while the client
// secret that exchange spent is still the stored one: a rotate of the secret landing between the
// exchange and that store drops the account's token (items.repo.ts), so a token stored after it
// would outlive the secret it was minted with, for up to an hour.
// PostgreSQL only: PGlite runs one transaction at a time, so there is no race to lose there.
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lockItemTokens } from "../src/items/item-tokens.repo.ts";
import { createItemsRepo } from "../src/items/items.repo.ts";
import { isPostgresRun } from "./database.ts";
import { FAKE_PROVIDER_HOSTS, FakeProviders } from "./fake-providers.ts";
import { type Browser, type HostedHarness, readyOperator, startHosted } from "./hosted.ts";

let h: HostedHarness;
let fakes: FakeProviders;

async function authorized(op: Browser) {
  const started = await op.request("POST", "/api/integrations/spotify/start", {
    item_name: "SPOTIFY",
    environment: "staging",
  });
  expect(started.statusCode, started.body).toBe(200);
  return fakes.authorize("spotify", started.json().authorize_url);
}

async function callback(op: Browser, query: Record<string, string>) {
  return op.request("GET", `/connect/callback?${new URLSearchParams(query)}`);
}

describe.runIf(isPostgresRun())("a connect whose client secret is rotated while it finishes", () => {
  beforeAll(async () => {
    h = await startHosted({ providerHosts: [...FAKE_PROVIDER_HOSTS] });
    fakes = new FakeProviders();
    h.egress.setHandler(fakes.handler);
    await h.app.listen({ host: "127.0.0.1", port: 0 });
  }, 60_000);

  afterAll(async () => {
    await h?.close();
  });

  it("stores the refresh token but no access token minted with the old secret", async () => {
    const op = await readyOperator(h);
    const created = await op.request("POST", "/api/items", {
      name: "SPOTIFY",
      value: fakes.clients.spotify.clientSecret,
      username: fakes.clients.spotify.clientId,
      kind: "client_secret",
      inject: "client_credentials",
      environment: "staging",
      allowed_hosts: ["api.spotify.com", "accounts.spotify.com"],
    });
    expect(created.statusCode, created.body).toBe(201);
    const secretId = created.json().item.id as string;
    expect((await callback(op, await authorized(op))).headers.location).toBe(
      "/console#vault?connected=spotify",
    );
    const db = h.plane.database.db;
    const organisationId = (await op.request("GET", "/api/auth/me")).json().organisation.id as string;
    const refreshItem = () =>
      db
        .selectFrom("items")
        .select(["id", "sealed_value"])
        .where("organisation_id", "=", organisationId)
        .where("name", "=", "SPOTIFY_REFRESH")
        .executeTakeFirstOrThrow();
    const first = await refreshItem();
    const second = await authorized(op);
    let finishing: ReturnType<typeof callback> | undefined;
    await db.transaction().execute(async (trx) => {
      await lockItemTokens(trx, first.id);
      finishing = callback(op, second);
      // The second connect has exchanged with the secret and stored its refresh token once the
      // stored value moves; it then waits for the lock before storing its access token.
      while (Buffer.from((await refreshItem()).sealed_value).equals(Buffer.from(first.sealed_value))) {
        await sleep(20);
      }
      // The operator rotates the client secret (revoked at the provider) meanwhile.
      await createItemsRepo(trx).updateItem(organisationId, secretId, {
        sealed_value: Buffer.from("the sealed rotated client secret"),
        updated_at: new Date(),
      });
    });
    expect((await finishing)?.headers.location).toBe("/console#vault?connected=spotify");
    const kept = await db
      .selectFrom("item_tokens")
      .select("item_id")
      .where("item_id", "=", first.id)
      .executeTakeFirst();
    expect(kept).toBeUndefined();
  });
});
