// The storage adapter's single use (DECISIONS "OAuth authorization server"): a refresh token spent
// twice, the second time by a replica that lost the race, ends the whole grant, and says so, so
// that the Access ledger marks the revocation (spec 6); nothing is stored under the token itself.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { testDatabase } from "../../test/database.ts";
import { createOAuthArtifactsRepo } from "./oauth-artifacts.repo.ts";

describe("the OAuth artifacts adapter", () => {
  it("ends the grant of a refresh token consumed twice, and reports it once", async () => {
    const { db } = await testDatabase();
    const ended: string[] = [];
    const repo = createOAuthArtifactsRepo(
      db,
      () => new Date(),
      (grantId) => ended.push(grantId),
    );
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
});
