import { normalisePathForMatch } from "@latch/shared/requests/path";
import { describe, expect, it } from "vitest";
import { pathAsRead } from "./path-as-read.ts";
import { getProvider } from "./providers.ts";

describe("a provider path as the provider reads it", () => {
  it("matches escaped unreserved characters in either hex case and repeated slashes, nothing else", () => {
    const me = new RegExp(`^${pathAsRead("/v1/me")}$`);
    for (const path of ["/v1/me", "/v1//me", "/%76%31/%6De", "/v1/%6de", "//v1/me"])
      expect(me.test(path), path).toBe(true);
    for (const path of ["/v1/ME", "/v1/%4De", "/v1/m", "/v1/me/", "/v1/m%2565", "/v1%2Fme", "/v2/me"]) {
      expect(me.test(path), path).toBe(false);
    }
    // Regular-expression characters of the literal stay literal.
    expect(new RegExp(`^${pathAsRead("/a.b")}$`).test("/axb")).toBe(false);
    expect(new RegExp(`^${pathAsRead("/a.b")}$`).test("/a%2Eb")).toBe(true);
  });
});

describe("Spotify's playlist rename (spec 4.2 rule 3)", () => {
  const [rule] = getProvider("spotify").pathRewrites;
  const plain = /^\/v1\/playlists\/[^/?#]+\/tracks$/;

  it.each([
    ["/v1/playlists/p1/tracks?limit=5", "/v1/playlists/p1/items?limit=5"],
    ["/v1/playlists/p1/%74racks", "/v1/playlists/p1/items"],
    ["/v1/playlists/p1/%74%72%61%63%6B%73?x=1", "/v1/playlists/p1/items?x=1"],
    ["/v1/playlists/p1//tracks", "/v1/playlists/p1/items"],
    ["/%76%31//playlists/p1/tracks", "/%76%31//playlists/p1/items"],
  ])("rewrites %s, the old path as Spotify reads it, to %s", (path, sent) => {
    expect(rule!.pattern.test(path)).toBe(true);
    expect(path.replace(rule!.pattern, rule!.replacement)).toBe(sent);
    expect(plain.test(normalisePathForMatch(sent))).toBe(false);
  });

  it.each([
    "/v1/playlists/p1/tracks/x",
    "/v1/playlists/p1/Tracks",
    "/v1/playlists/p1/%54racks",
    "/v1/playlists/p1/%2574racks",
    "/v1/playlists/tracks",
    "/v1/playlists/p1/items",
    "/v1/albums/a1/tracks",
  ])("leaves %s, another path there, as it is", (path) => {
    expect(rule!.pattern.test(path)).toBe(false);
    expect(plain.test(normalisePathForMatch(path))).toBe(false);
  });
});
