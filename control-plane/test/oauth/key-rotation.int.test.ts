// `vault oauth-rotate-keys` (spec 4.3 "/oauth/jwks": two keys listed during rotation, new tokens
// signed with the first): tokens of the old key keep working until they expire, a replica started
// after the rotation signs with the new key, a replica still on the old key accepts the new key's
// tokens (it re-reads the key file), and a key retired longer than a token lives is dropped. A retired
// key signs nothing after its retirement: a token it signs later (a leaked copy of it) is refused at
// /mcp, on a replica started since and, within seconds, on one still running; once retired longer
// than a token lives it is listed and trusted nowhere, whether or not a rotation dropped it.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { writeFileSync } from "node:fs";
import { decodeJwt, importJWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  KEY_FILE_REFRESH_MS,
  oauthKeysPath,
  readOAuthKeys,
  rotateOAuthKeys,
} from "../../src/oauth/oauth-keys.ts";
import { type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import { approveAndExchange, register } from "./oauth-flow.ts";

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
  return (await approveAndExchange(op, harness.app, { clientId, redirectUri })).tokens.access_token;
}

/** The same claims as `like`, signed now with the key `kid` of the key file (a leaked copy of it). */
async function signedNowWith(dataDir: string, kid: string, like: string): Promise<string> {
  const key = readOAuthKeys(dataDir).keys.find((k) => k.kid === kid);
  if (!key) throw new Error(`no key ${kid} in the key file`);
  const { retired_at: _retired, ...jwk } = key;
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ ...decodeJwt(like), jti: `forged-${crypto.randomUUID()}`, iat: now, exp: now + 600 })
    .setProtectedHeader({ alg: "RS256", kid, typ: "at+jwt" })
    .sign(await importJWK(jwk, "RS256"));
}

const mcpAnswer = (harness: HostedHarness, accessToken: string) =>
  harness.app.inject({
    method: "POST",
    url: "/mcp",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
    payload: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
  });

const expectRefused = async (harness: HostedHarness, accessToken: string) => {
  const answer = await mcpAnswer(harness, accessToken);
  expect(answer.statusCode).toBe(401);
  expect(String(answer.headers["www-authenticate"])).toMatch(/^Bearer .*resource_metadata=/);
};

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
    expect(stderr).toContain(`retired: ${oldKid}`);
    const rotatedAt = Date.now();

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

      // The old key signs nothing after its retirement: a token signed now with a copy of it is
      // refused by the replica started since, and by the one still running once it has read the
      // file again (within KEY_FILE_REFRESH_MS, no restart), while the old token keeps working.
      // (`iat` is in whole seconds: one second after the rotation, "now" is after it.)
      await new Promise((resolve) => setTimeout(resolve, rotatedAt + 1000 - Date.now()));
      const forged = await signedNowWith(h.egress.dataDir, oldKid, before);
      await expectRefused(replica, forged);
      await new Promise((resolve) => setTimeout(resolve, rotatedAt + KEY_FILE_REFRESH_MS + 100 - Date.now()));
      await expectRefused(h, forged);
      expect(await acceptedBy(h, before)).toBe(true);
      expect(await acceptedBy(replica, before)).toBe(true);
    } finally {
      await replica.close();
    }
  });

  it("trusts and lists a key retired longer than a token lives nowhere, before any rotation drops it", async () => {
    const dataDir = h.egress.dataDir;
    const kid = readOAuthKeys(dataDir).keys[0]!.kid;
    await rotateOAuthKeys(dataDir);
    // That key retired 12 minutes ago (as the file is 12 minutes after a rotation, none since).
    const aged = readOAuthKeys(dataDir);
    aged.keys.find((key) => key.kid === kid)!.retired_at = Date.now() - 12 * 60_000;
    writeFileSync(oauthKeysPath(dataDir), `${JSON.stringify(aged, null, 2)}\n`, { mode: 0o600 });
    const kidsListedBy = async (harness: HostedHarness) =>
      (
        (await harness.app.inject({ method: "GET", url: "/oauth/jwks" })).json().keys as { kid: string }[]
      ).map((key) => key.kid);

    const replica = await startHosted({ replicaOf: h });
    try {
      expect(await kidsListedBy(replica)).not.toContain(kid);
      expect((await kidsListedBy(replica))[0]).toBe(aged.keys[0]!.kid);
      const fresh = await accessTokenFrom(replica);
      expect(await acceptedBy(replica, fresh)).toBe(true);
      await expectRefused(replica, await signedNowWith(dataDir, kid, fresh));
      // The running replica too, without a restart.
      await new Promise((resolve) => setTimeout(resolve, KEY_FILE_REFRESH_MS + 100));
      expect(await kidsListedBy(h)).not.toContain(kid);
      expect((await kidsListedBy(h))[0]).toBe(aged.keys[0]!.kid);
      await expectRefused(h, await signedNowWith(dataDir, kid, fresh));
      expect(await acceptedBy(h, fresh)).toBe(true);
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
