// `vault oauth-rotate-keys` (spec 4.3 "/oauth/jwks": two keys listed during rotation, new tokens
// signed with the first): tokens of the old key keep working until they expire, a replica started
// after the rotation signs with the new key, a replica still on the old key accepts the new key's
// tokens (it re-reads the key file), and a key retired longer than a token lives is dropped.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rotateOAuthKeys } from "../../src/oauth/oauth-keys.ts";
import { type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import { authorizeAndConsent, pkcePair, RESOURCE, register, token } from "./oauth-flow.ts";

const VAULT = new URL("../../src/cli/vault.ts", import.meta.url).pathname;

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

const kidOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split(".")[0]!, "base64url").toString()).kid as string;

async function accessTokenFrom(harness: HostedHarness): Promise<string> {
  const op = await readyOperator(harness);
  const redirectUri = "http://127.0.0.1:9/callback";
  const clientId = (
    await register(harness.app, { client_name: "Rotation", redirect_uris: [redirectUri] })
  ).json().client_id as string;
  const pkce = pkcePair();
  const { code } = await authorizeAndConsent(op, { clientId, redirectUri, challenge: pkce.challenge });
  const issued = await token(harness.app, {
    grant_type: "authorization_code",
    code: code!,
    redirect_uri: redirectUri,
    client_id: clientId,
    code_verifier: pkce.verifier,
    resource: RESOURCE,
  });
  expect(issued.statusCode, issued.body).toBe(200);
  return issued.json().access_token as string;
}

const acceptedBy = async (harness: HostedHarness, accessToken: string) =>
  (
    await harness.app.inject({
      method: "POST",
      url: "/mcp",
      headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
      payload: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    })
  ).statusCode === 200;

describe("vault oauth-rotate-keys", () => {
  it("lists two keys, signs new tokens with the new one, and keeps the old tokens working", async () => {
    const before = await accessTokenFrom(h);
    const oldKid = kidOf(before);

    const child = spawn(process.execPath, [VAULT, "oauth-rotate-keys"], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: h.egress.dataDir, NODE_ENV: "test" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk) => {
      stderr += String(chunk);
    });
    const [exitCode] = await once(child, "exit");
    expect(exitCode, stderr).toBe(0);
    expect(stderr).toContain(`retired (still listed for 11 minutes): ${oldKid}`);

    // A replica started after the rotation signs with the new key and lists both.
    const replica = await startHosted({ replicaOf: h });
    try {
      const jwks = (await replica.app.inject({ method: "GET", url: "/oauth/jwks" })).json();
      expect(jwks.keys).toHaveLength(2);
      expect(jwks.keys[1].kid).toBe(oldKid);
      for (const key of jwks.keys) expect(key.d).toBeUndefined();
      const after = await accessTokenFrom(replica);
      expect(kidOf(after)).toBe(jwks.keys[0].kid);
      expect(kidOf(after)).not.toBe(oldKid);
      // Old tokens keep working on both; the replica that has not restarted accepts new ones.
      expect(await acceptedBy(replica, before)).toBe(true);
      expect(await acceptedBy(h, before)).toBe(true);
      expect(await acceptedBy(h, after)).toBe(true);
    } finally {
      await replica.close();
    }
  });

  it("drops a key retired longer than an access token lives", async () => {
    const first = await rotateOAuthKeys(h.egress.dataDir);
    const later = await rotateOAuthKeys(h.egress.dataDir, Date.now() + 12 * 60_000);
    expect(later.retiredKids).toEqual([first.newKid]);
    expect(later.droppedKids.length).toBeGreaterThan(0);
    expect(later.droppedKids).not.toContain(first.newKid);
  });
});
