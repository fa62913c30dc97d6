// A key rotation reaches a replica that keeps running (DECISIONS "OAuth authorization server":
// `vault oauth-rotate-keys` puts a new key first and new tokens use it): within seconds of the
// rotation, the replica mints access tokens and refreshes with the new key, never with the retired
// one, whose tokens issued after its retirement /mcp refuses on every replica.
import { decodeProtectedHeader } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEY_FILE_REFRESH_MS, readOAuthKeys, rotateOAuthKeys } from "../src/oauth/oauth-keys.ts";
import { type HostedHarness, readyOperator, startHosted } from "./hosted.ts";
import { approveAndExchange, mcpWith, RESOURCE, register, token } from "./oauth/oauth-flow.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

const kidOf = (jwt: string) => decodeProtectedHeader(jwt).kid;

describe("a replica running through a key rotation", () => {
  it("signs new tokens with the new key within seconds, and /mcp accepts them", async () => {
    const op = await readyOperator(h);
    const redirectUri = "http://127.0.0.1:9/callback";
    const clientId = (
      await register(h.app, { client_name: "Rotation running", redirect_uris: [redirectUri] })
    ).json().client_id as string;
    const first = await approveAndExchange(op, h.app, { clientId, redirectUri });
    const oldKid = kidOf(first.tokens.access_token);

    const rotation = await rotateOAuthKeys(h.egress.dataDir);
    expect(rotation.retiredKids).toContain(oldKid);
    expect(readOAuthKeys(h.egress.dataDir).keys[0]!.kid).toBe(rotation.newKid);
    // `iat` is in whole seconds, and the replica reads the key file again every few seconds.
    await new Promise((resolve) => setTimeout(resolve, KEY_FILE_REFRESH_MS + 1_100));

    // A refresh on the replica that was not restarted.
    const refreshed = await token(h.app, {
      grant_type: "refresh_token",
      refresh_token: first.tokens.refresh_token,
      client_id: clientId,
      resource: RESOURCE,
    });
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    const refreshedToken = refreshed.json().access_token as string;
    expect(kidOf(refreshedToken)).toBe(rotation.newKid);
    expect((await mcpWith(h.app, refreshedToken)).statusCode).toBe(200);

    // A new authorization there too.
    const second = await approveAndExchange(op, h.app, { clientId, redirectUri });
    expect(kidOf(second.tokens.access_token)).toBe(rotation.newKid);
    expect((await mcpWith(h.app, second.tokens.access_token)).statusCode).toBe(200);

    // The token of before the rotation still works until it expires; the JWKS lists both keys.
    expect((await mcpWith(h.app, first.tokens.access_token)).statusCode).toBe(200);
    const listed = (await h.app.inject({ method: "GET", url: "/oauth/jwks" })).json().keys as {
      kid: string;
    }[];
    expect(listed.map((key) => key.kid)).toEqual([rotation.newKid, oldKid]);
  }, 60_000);
});
