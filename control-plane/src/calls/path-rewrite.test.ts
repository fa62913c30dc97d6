import type { CallSpec, ExecuteResponse } from "@latch/proto/egress";
import { describe, expect, it } from "vitest";
import type { EgressClient } from "../egress/egress-client.ts";
import type { TicketMinter } from "../egress/tickets.ts";
import { createCallsService } from "./calls.service.ts";
import { rewritePlaylistPath } from "./path-rewrite.ts";

const HOST = "api.spotify.com";

describe("rewritePlaylistPath (spec 4.2 rule 3)", () => {
  it("sends playlist /tracks as /items for GET, POST, PUT and DELETE, keeping the query", () => {
    for (const method of ["GET", "POST", "PUT", "DELETE"]) {
      expect(rewritePlaylistPath(HOST, method, "/v1/playlists/p1/tracks?limit=5", undefined)).toEqual({
        path: "/v1/playlists/p1/items?limit=5",
        body: undefined,
        rewritten: { from: "/v1/playlists/p1/tracks?limit=5", to: "/v1/playlists/p1/items?limit=5" },
      });
    }
  });

  it("leaves other /tracks paths, other methods and other hosts unchanged", () => {
    for (const [host, method, path] of [
      [HOST, "GET", "/v1/albums/a1/tracks"],
      [HOST, "GET", "/v1/me/tracks"],
      [HOST, "GET", "/v1/playlists/p1/tracks/extra"],
      [HOST, "PATCH", "/v1/playlists/p1/tracks"],
      ["api.latch.test", "GET", "/v1/playlists/p1/tracks"],
    ] as const) {
      expect(rewritePlaylistPath(host, method, path, { a: 1 })).toEqual({ path, body: { a: 1 } });
    }
  });

  it("renames a DELETE body's tracks key to items, and only on DELETE", () => {
    const tracks = [{ uri: "spotify:track:1" }];
    expect(
      rewritePlaylistPath(HOST, "DELETE", "/v1/playlists/p1/tracks", { tracks, snapshot_id: "s" }).body,
    ).toEqual({
      items: tracks,
      snapshot_id: "s",
    });
    expect(rewritePlaylistPath(HOST, "POST", "/v1/playlists/p1/tracks", { tracks }).body).toEqual({ tracks });
  });
});

describe("executeCall with a rewritten path", () => {
  it("mints the ticket for /items with the renamed body and says so in path_rewritten and next.for_model", async () => {
    const minted: CallSpec[] = [];
    const minter = {
      mintCallTicket: (call: CallSpec) => {
        minted.push(call);
        return { payload: new Uint8Array(), signature: new Uint8Array(), keyId: "k" };
      },
    } as unknown as TicketMinter;
    const egress = {
      execute: async (): Promise<ExecuteResponse> =>
        ({
          reachedOrigin: true,
          originStatus: 200,
          body: Buffer.from("{}"),
          headers: [],
        }) as unknown as ExecuteResponse,
    } as unknown as EgressClient;
    const calls = createCallsService({
      findItemByName: async () => undefined,
      findItemsByHost: async () => [],
      recordEvent: async () => {},
      minter,
      egress,
    });
    const item = {
      id: "itm_1",
      name: "SPOTIFY_TOKEN",
      allowedHosts: [HOST],
      inject: "bearer",
      username: null,
      sealingKeyId: "k",
      sealedValue: new Uint8Array([1]),
    };
    const outcome = await calls.executeCall(
      { organisationId: "org", environment: "staging", actor: "agent:a" },
      { method: "DELETE", path: "/v1/playlists/p1/tracks", body: { tracks: [{ uri: "u" }] } },
      { item, host: HOST, path: "/v1/playlists/p1/tracks" },
      { release: async () => {} },
    );
    expect(minted[0]).toMatchObject({ path: "/v1/playlists/p1/items", method: "DELETE" });
    expect(JSON.parse(Buffer.from(minted[0]!.body).toString("utf8"))).toEqual({ items: [{ uri: "u" }] });
    expect(outcome.result.path_rewritten).toEqual({
      from: "/v1/playlists/p1/tracks",
      to: "/v1/playlists/p1/items",
    });
    expect(outcome.result.next?.for_model).toContain("/v1/playlists/p1/items");
  });
});
