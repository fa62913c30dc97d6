// Spec 4.2 rule 3 on the path as Spotify reads it: `/v1/playlists/p1/%74racks` is the old playlist
// path there, so it is sent to the new one and judged there like `/tracks` is. Left as it was, it
// reached the old path past a rule on the new one (here an allow on .../items limited to one call
// an hour, which the agent would have passed as often as it liked).
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FAKE_PROVIDER_HOSTS, FakeProviders } from "./fake-providers.ts";
import {
  type Browser,
  connectAgent,
  type HostedHarness,
  operatorWithClient,
  startHosted,
  type ToolAnswer,
  toolAnswer,
} from "./hosted.ts";

let h: HostedHarness;
let url: string;
let fakes: FakeProviders;
const sentPaths: string[] = [];

beforeAll(async () => {
  h = await startHosted({ providerHosts: [...FAKE_PROVIDER_HOSTS] });
  fakes = new FakeProviders();
  h.egress.setHandler((req, res, recorded) => {
    if (String(req.headers.host ?? "").startsWith("api.spotify.com")) sentPaths.push(String(req.url));
    fakes.handler(req, res, recorded);
  });
  url = await h.app.listen({ host: "127.0.0.1", port: 0 });
}, 60_000);

afterAll(async () => {
  await h?.close();
});

const call = async (agent: Client, path: string): Promise<ToolAnswer> =>
  toolAnswer(
    await agent.callTool({
      name: "http_request",
      arguments: { method: "GET", item_name: "SPOTIFY", path: `https://api.spotify.com${path}` },
    }),
  );

async function save(op: Browser, rules: unknown[]) {
  const current = await op.request("GET", "/api/policies");
  return op.request("PUT", "/api/policies", { rules }, { "if-match": current.headers.etag as string });
}

describe("the playlist rename of an escaped old path", () => {
  it("sends an escaped /tracks to /items, where the rule on /items holds", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: fakes.clients.spotify.clientSecret,
      items: [
        {
          name: "SPOTIFY",
          username: fakes.clients.spotify.clientId,
          kind: "client_secret",
          inject: "client_credentials",
          allowed_hosts: ["api.spotify.com", "accounts.spotify.com"],
        },
      ],
      clientName: "music agent",
    });
    const agent = await connectAgent(url, token, "music agent");
    const rules = [
      { id: "tracks", effect: "allow", match: { paths: ["/v1/playlists/*/tracks"] } },
      {
        id: "items-limited",
        effect: "allow",
        match: { paths: ["/v1/playlists/*/items"] },
        rate_limit: { calls: 1, per: "hour" },
      },
    ];
    expect((await save(op, rules)).statusCode).toBe(200);

    const first = await call(agent, "/v1/playlists/p1/%74racks?limit=5");
    expect(first, JSON.stringify(first)).toMatchObject({
      origin_status: 200,
      path_rewritten: { from: "/v1/playlists/p1/%74racks?limit=5", to: "/v1/playlists/p1/items?limit=5" },
    });
    expect(sentPaths).toEqual(["/v1/playlists/p1/items?limit=5"]);
    for (const spelling of ["/v1/playlists/p1/%74racks", "/v1/playlists/p1/tracks"]) {
      const again = await call(agent, spelling);
      expect(again, JSON.stringify(again)).toMatchObject({
        status: "rate_limited",
        policy: { rule_id: "items-limited" },
      });
    }
    expect(sentPaths).toHaveLength(1);
    await agent.close();
  }, 60_000);
});
