// The storage adapter's single use (DECISIONS "OAuth authorization server"): a refresh token spent
// twice, the second time by a replica that lost the race, ends the whole grant, and says so, so
// that the Access ledger marks the revocation (spec 6); nothing is stored under the token itself.
import { randomBytes } from "node:crypto";
import { sha256Hex } from "@latch/shared/crypto/hash";
import { describe, expect, it } from "vitest";
import { testDatabase } from "../../test/database.ts";
import { createOAuthArtifactsRepo } from "./oauth-artifacts.repo.ts";

const SECRET = randomBytes(32).toString("base64url");
/** An 8-letter user code from the device flow's alphabet. */
const userCodeOf = () => Array.from(randomBytes(8), (b) => "BCDFGHJKLMNPQRSTVWXZ"[b % 20]).join("");

describe("the OAuth artifacts adapter", () => {
  it("ends the grant of a refresh token consumed twice, and reports it once", async () => {
    const { db } = await testDatabase();
    const ended: string[] = [];
    const repo = createOAuthArtifactsRepo(db, () => new Date(), {
      deviceCodeSecret: SECRET,
      onReuseRevoked: (grantId) => ended.push(grantId),
    });
    const adapter = repo.adapterFor("RefreshToken");
    const token = randomBytes(32).toString("base64url");
    const grantId = `grant-${randomBytes(6).toString("hex")}`;
    await adapter.upsert(token, { jti: token, grantId, kind: "RefreshToken" }, 600);
    await repo.adapterFor("Grant").upsert(grantId, { jti: grantId, kind: "Grant" }, 600);

    await adapter.consume(token);
    expect(ended).toEqual([]);
    await expect(adapter.consume(token)).rejects.toMatchObject({ error: "invalid_grant" });
    expect(ended).toEqual([grantId]);
    expect(await repo.isGrantLive(grantId, new Date())).toBe(false);
    expect(await adapter.find(token)).toBeUndefined();
    const stored = await db.selectFrom("oauth_artifacts").select("payload").execute();
    expect(JSON.stringify(stored)).not.toContain(token);
  });

  it("stores a device code's id sealed, gives it back by user code, and only under its own key", async () => {
    const { db } = await testDatabase();
    const repo = createOAuthArtifactsRepo(db, () => new Date(), { deviceCodeSecret: SECRET });
    const adapter = repo.adapterFor("DeviceCode");
    const deviceCode = randomBytes(32).toString("base64url");
    // Random codes: a PostgreSQL test database is shared by every test file and outlives a run.
    const userCode = userCodeOf();
    await adapter.upsert(deviceCode, { jti: deviceCode, userCode, kind: "DeviceCode", clientId: "c" }, 600);

    const stored = await db
      .selectFrom("oauth_artifacts")
      .select(["payload", "user_code_hash"])
      .where("user_code_hash", "=", sha256Hex(userCode))
      .execute();
    expect(stored).toHaveLength(1);
    expect(JSON.stringify(stored)).not.toContain(deviceCode);
    expect(JSON.stringify(stored)).not.toContain(userCode);
    expect(await adapter.findByUserCode?.(userCode)).toMatchObject({
      jti: deviceCode,
      userCode,
      clientId: "c",
    });
    expect(await adapter.find(deviceCode)).toMatchObject({ jti: deviceCode, clientId: "c" });
    expect(await adapter.find(deviceCode)).not.toHaveProperty("_jti_sealed");

    // Another key file: the database alone does not give the id back.
    const other = createOAuthArtifactsRepo(db, () => new Date(), {
      deviceCodeSecret: randomBytes(32).toString("base64url"),
    });
    expect(await other.adapterFor("DeviceCode").findByUserCode?.(userCode)).toBeUndefined();

    // A sealed id copied onto another device code's row does not open there.
    const second = randomBytes(32).toString("base64url");
    const secondCode = userCodeOf();
    await adapter.upsert(second, { jti: second, userCode: secondCode, kind: "DeviceCode" }, 600);
    await db
      .updateTable("oauth_artifacts")
      .set({ payload: JSON.stringify(stored[0]!.payload) })
      .where("user_code_hash", "=", sha256Hex(secondCode))
      .execute();
    expect(await adapter.findByUserCode?.(secondCode)).toBeUndefined();
  });
});
