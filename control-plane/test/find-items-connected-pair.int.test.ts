// find_items by host treats an app credential and its connected <ITEM>_REFRESH as one credential,
// as http_request and setup by host do (calls.service.ts `connectedPairSource`): after a Connect
// both allow the provider's hosts, and "ambiguous, call again with item_name" would send the agent
// to pick one itself where a call by host goes with the app credential. Two credentials that are
// not such a pair stay ambiguous. The real local vault and the MCP SDK client.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type EgressHarness, startEgressHarness } from "./egress-harness.ts";
import { connectLocalAgent, type LocalRig, localOperator, startLocalVault, toolPayload } from "./local.ts";

const SPOTIFY_HOSTS = ["api.spotify.com", "accounts.spotify.com"];

let harness: EgressHarness;
let rig: LocalRig;
let agent: Client;

beforeAll(async () => {
  harness = await startEgressHarness();
  rig = await startLocalVault(harness);
  agent = await connectLocalAgent(rig.url, "pair-agent");
}, 60_000);
afterAll(async () => {
  await agent?.close();
  await rig?.app.close();
  await rig?.vault.close();
  await harness?.close();
});

async function store(body: Record<string, unknown>): Promise<void> {
  const stored = await localOperator(rig, "POST", "/api/items", body);
  expect(stored.status, JSON.stringify(stored.json)).toBe(201);
}

const ask = async (name: string, args: Record<string, unknown>) =>
  toolPayload(await agent.callTool({ name, arguments: args }));

it("finds the app credential of a connected pair by host, as a call by host uses it", async () => {
  await store({
    name: "SPOTIFY",
    value: "app-secret-value-pair-1234",
    username: "pair-client-id",
    inject: "client_credentials",
    allowed_hosts: SPOTIFY_HOSTS,
  });
  await store({
    name: "SPOTIFY_REFRESH",
    value: "refresh-token-value-pair-5678",
    inject: "refresh",
    allowed_hosts: SPOTIFY_HOSTS,
  });
  const found = await ask("find_items", { host: "api.spotify.com" });
  expect(found).toMatchObject({
    status: "found",
    item: { name: "SPOTIFY", inject: "client_credentials", last4: "1234" },
  });
  const call = await ask("http_request", {
    method: "GET",
    host: "api.spotify.com",
    path: "/v1/browse/new-releases",
    dry_run: true,
  });
  expect(call.item_name).toBe("SPOTIFY");
  expect(JSON.stringify(found)).not.toContain("refresh-token-value");
});

it("keeps two credentials that are no such pair ambiguous", async () => {
  for (const name of ["SHOP_KEY", "SHOP_OTHER"]) {
    await store({ name, value: `shop-value-${name}`, allowed_hosts: ["api.shop.test"] });
  }
  const answer = await ask("find_items", { host: "api.shop.test" });
  expect(answer.status).toBe("ambiguous");
  expect((answer.items as { name: string }[]).map((i) => i.name).sort()).toEqual(["SHOP_KEY", "SHOP_OTHER"]);
});
