// Two control-plane replicas refreshing the same connected item at once (DECISIONS "Providers":
// a rotated refresh token replaces the stored one in the transaction that spends it; two replicas
// never lose the newer token). Each replica has its own connection pool on one PostgreSQL when
// DATABASE_URL is set (on PGlite both share the embedded database, which still exercises the lock),
// and calls a fake Spotify that rotates refresh tokens and refuses a spent one.
import { tmpdir } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAuditRepo } from "../src/audit/audit.repo.ts";
import { createCallsService, locateCredential } from "../src/calls/calls.service.ts";
import { type OpenDatabase, openDatabase } from "../src/db/database.ts";
import { createItemTokensRepo } from "../src/items/item-tokens.repo.ts";
import { createItemsRepo } from "../src/items/items.repo.ts";
import { createItemsService } from "../src/items/items.service.ts";
import { newTestOrganisation, testDatabase } from "./database.ts";
import { type EgressHarness, startEgressHarness } from "./egress-harness.ts";
import { FAKE_PROVIDER_HOSTS, FakeProviders } from "./fake-providers.ts";

let harness: EgressHarness;
let fakes: FakeProviders;
let first: OpenDatabase;
let second: OpenDatabase;

beforeAll(async () => {
  harness = await startEgressHarness({ providerHosts: [...FAKE_PROVIDER_HOSTS] });
  fakes = new FakeProviders();
  harness.setHandler(fakes.handler);
  first = await testDatabase();
  const url = process.env.DATABASE_URL;
  second = url ? await openDatabase({ databaseUrl: url, dataDir: tmpdir(), migrate: false }) : first;
}, 60_000);

afterAll(async () => {
  if (second !== first) await second.close();
  await harness?.close();
});

function replica(database: OpenDatabase) {
  const audit = createAuditRepo(database.db);
  const items = createItemsService({
    repo: createItemsRepo(database.db),
    tokens: createItemTokensRepo(database.db),
    sealingKey: async () => harness.proxy.sealingKey,
    recordEvent: audit.insertAuditEvent,
    environments: ["production"],
    defaultEnvironment: "production",
    // The refresh token is typed in, as the local vault takes it (hosted, Connect stores it).
    isRefreshTypable: true,
  });
  const calls = createCallsService({
    findItemByName: items.findCallableByName,
    findItemsByHost: items.findCallableByHost,
    recordEvent: audit.insertAuditEvent,
    minter: harness.minter,
    egress: harness.client,
    inItemTokenLock: items.inItemTokenLock,
  });
  return { items, calls };
}

async function connectedSpotify(organisationId: string) {
  const a = replica(first);
  const hosts = ["api.spotify.com", "accounts.spotify.com"];
  await a.items.storeItem(organisationId, "operator", {
    name: "SPOTIFY",
    value: fakes.clients.spotify.clientSecret,
    username: fakes.clients.spotify.clientId,
    inject: "client_credentials",
    allowed_hosts: hosts,
  });
  await a.items.storeItem(organisationId, "operator", {
    name: "SPOTIFY_REFRESH",
    value: fakes.issueRefreshToken("spotify"),
    inject: "refresh",
    allowed_hosts: hosts,
  });
}

async function callMe(service: ReturnType<typeof replica>, organisationId: string) {
  const scope = { organisationId, environment: "production" };
  const args = { method: "GET" as const, host: "api.spotify.com", path: "/v1/me", item_name: "SPOTIFY" };
  const located = await locateCredential(
    { findItemByName: service.items.findCallableByName, findItemsByHost: service.items.findCallableByHost },
    scope,
    args,
  );
  return service.calls.executeCall({ ...scope, actor: "agent:replica" }, args, located, {
    release: async () => {},
  });
}

const liveSpotifyRefreshTokens = () =>
  [...fakes.refreshTokens.entries()].filter(([, provider]) => provider === "spotify").map(([value]) => value);

describe(`two replicas refreshing one item at once (${process.env.DATABASE_URL ? "PostgreSQL, two pools" : "PGlite, one database"})`, () => {
  it("exchange once: the other replica waits for the lock and reuses the minted token", async () => {
    const organisationId = await newTestOrganisation(first);
    await connectedSpotify(organisationId);
    const before = fakes.tokenRequests.length;
    const [a, b] = [replica(first), replica(second)];
    const outcomes = await Promise.all(
      Array.from({ length: 6 }, (_, i) => callMe(i % 2 ? a : b, organisationId)),
    );
    for (const outcome of outcomes)
      expect(outcome.result.origin_status, JSON.stringify(outcome.result)).toBe(200);
    expect(fakes.tokenRequests.length - before).toBe(1);
  });

  it("tokens too short-lived to reuse: every exchange presents the newest refresh token, and the stored one is the live one", async () => {
    const organisationId = await newTestOrganisation(first);
    await connectedSpotify(organisationId);
    // 30 s tokens are inside the 60 s margin: each call refreshes, rotating the refresh token.
    fakes.accessLifetimeS = 30;
    try {
      const before = fakes.tokenRequests.length;
      const [a, b] = [replica(first), replica(second)];
      const outcomes = await Promise.all(
        Array.from({ length: 6 }, (_, i) => callMe(i % 2 ? a : b, organisationId)),
      );
      // A replica presenting a spent refresh token would get invalid_grant: none did.
      for (const outcome of outcomes)
        expect(outcome.result.origin_status, JSON.stringify(outcome.result)).toBe(200);
      const requests = fakes.tokenRequests.slice(before);
      expect(requests).toHaveLength(6);
      expect(requests.every((request) => request.ok)).toBe(true);
      const stored = await replica(second).items.listItems(organisationId);
      const refresh = stored.find((item) => item.name === "SPOTIFY_REFRESH");
      const live = liveSpotifyRefreshTokens().map((value) => value.slice(-4));
      expect(live).toContain(refresh?.last4);
    } finally {
      fakes.accessLifetimeS = 3600;
    }
  });
});
