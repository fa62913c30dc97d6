// The hourly prune (prune-rounds.ts): counted attempts of a bucket never used again, expired OAuth
// artifacts, denied tokens dead everywhere and old wrong approval codes are deleted by the rounds
// timer; rows a window, a lookup or a replica's clock may still read stay. The control plane starts it.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { sha256Hex } from "@latch/shared/crypto/hash";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, signUpOperator, startHosted } from "../test/hosted.ts";
import { createGrantsRepo } from "./grants/grants.repo.ts";
import { createRateLimitRepo } from "./limits/rate-limit.repo.ts";
import { CIMD_FETCHES_PER_HOST, createRateLimiter, DEVICE_CODE_TYPED } from "./limits/rate-limit.ts";
import { createOAuthRepo } from "./oauth/oauth.repo.ts";
import { createOAuthArtifactsRepo } from "./oauth/oauth-artifacts.repo.ts";
import { createPrunes, PRUNE_BATCH, startPruneSchedule } from "./prune-rounds.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const unique = () => randomBytes(16).toString("hex");

/**
 * Runs `write` with the plane's clock `ago` ms back. The prune's lines lie a day and more behind this
 * file's clock, so on a shared PostgreSQL database no other file's live rows are older than them.
 */
async function at<T>(ago: number, write: () => Promise<T>): Promise<T> {
  h.clock.advance(-ago);
  try {
    return await write();
  } finally {
    h.clock.advance(ago);
  }
}

/** Runs the schedule every 20 ms until `isDone` holds. */
async function pruneUntil(isDone: () => Promise<boolean>) {
  const stop = startPruneSchedule(
    createPrunes(h.plane.database.db, () => h.clock.now),
    pino({ level: "silent" }),
    20,
  );
  try {
    await expect.poll(isDone, { timeout: 10_000 }).toBe(true);
  } finally {
    stop();
  }
}

describe("the hourly prune", () => {
  it("deletes counted attempts of buckets never used again, and keeps those a window or a clock may count", async () => {
    const db = h.plane.database.db;
    const limiter = createRateLimiter(createRateLimitRepo(db), () => h.clock.now);
    const bucket = (name: string, key: string) => `${name}:${key}`;
    const old = { typed: unique(), host: `${unique()}.example` };
    const kept = { typed: unique(), dayOld: unique() };
    // A device code typed once and a document host asked for once, an hour and a day ago and more:
    // nothing ever takes a place in those buckets again, so only the table-wide prune removes them.
    await at(DAY + HOUR + 10 * MINUTE, async () => {
      await limiter.take(DEVICE_CODE_TYPED, old.typed);
      await limiter.take(CIMD_FETCHES_PER_HOST, old.host);
    });
    await at(DAY, () => limiter.take(DEVICE_CODE_TYPED, kept.dayOld));
    await at(10 * MINUTE, () => limiter.take(DEVICE_CODE_TYPED, kept.typed));
    const hitsOf = async (name: string) =>
      (await db.selectFrom("rate_limit_hits").select("at").where("bucket", "=", name).execute()).length;

    await pruneUntil(
      async () =>
        (await hitsOf(bucket(DEVICE_CODE_TYPED.name, old.typed))) === 0 &&
        (await hitsOf(bucket(CIMD_FETCHES_PER_HOST.name, old.host))) === 0,
    );
    expect(await hitsOf(bucket(DEVICE_CODE_TYPED.name, kept.dayOld))).toBe(1);
    expect(await hitsOf(bucket(DEVICE_CODE_TYPED.name, kept.typed))).toBe(1);
    // The live one still counts: the code was typed in this window.
    expect(await limiter.holds(DEVICE_CODE_TYPED, kept.typed)).toBe(true);
  });

  it("deletes expired OAuth artifacts and denied tokens a day past their expiry, and keeps live ones", async () => {
    const db = h.plane.database.db;
    const artifacts = createOAuthArtifactsRepo(db, () => h.clock.now, {
      deviceCodeSecret: randomBytes(32).toString("base64url"),
    });
    const oauth = createOAuthRepo(db);
    const grantId = `grant-${unique()}`;
    const expired = {
      session: unique(),
      interaction: unique(),
      code: unique(),
      deviceCode: unique(),
      spentRefresh: unique(),
    };
    // Each lived 10 minutes, and died a day and more ago.
    await at(DAY + 30 * MINUTE, async () => {
      await artifacts
        .adapterFor("Session")
        .upsert(expired.session, { accountId: "opr_x", kind: "Session" }, 600);
      await artifacts.adapterFor("Interaction").upsert(expired.interaction, { kind: "Interaction" }, 600);
      await artifacts
        .adapterFor("AuthorizationCode")
        .upsert(expired.code, { jti: expired.code, grantId }, 600);
      await artifacts
        .adapterFor("DeviceCode")
        .upsert(expired.deviceCode, { jti: expired.deviceCode, userCode: unique(), grantId }, 600);
      const refresh = artifacts.adapterFor("RefreshToken");
      await refresh.upsert(expired.spentRefresh, { jti: expired.spentRefresh, grantId }, 600);
      await refresh.consume(expired.spentRefresh);
    });
    const live = { refresh: unique(), justExpired: unique() };
    await artifacts.adapterFor("Grant").upsert(grantId, { jti: grantId, kind: "Grant" }, 86_400);
    await artifacts.adapterFor("RefreshToken").upsert(live.refresh, { jti: live.refresh, grantId }, 600);
    // Expired a minute ago: another replica's clock may not think so yet.
    await at(11 * MINUTE, () =>
      artifacts.adapterFor("RefreshToken").upsert(live.justExpired, { jti: live.justExpired, grantId }, 600),
    );

    const denied = { old: sha256Hex(unique()), recent: sha256Hex(unique()), live: sha256Hex(unique()) };
    const now = h.clock.now.getTime();
    await oauth.insertDeniedToken(denied.old, new Date(now - DAY - 2 * MINUTE));
    // Expired, but a replica whose clock runs behind still accepts the token: its denial stays.
    await oauth.insertDeniedToken(denied.recent, new Date(now - MINUTE));
    await oauth.insertDeniedToken(denied.live, new Date(now + 10 * MINUTE));

    const artifactsLeft = async (ids: string[]) =>
      (
        await db
          .selectFrom("oauth_artifacts")
          .select("id_hash")
          .where("id_hash", "in", ids.map(sha256Hex))
          .execute()
      ).length;
    const deniedLeft = async (hashes: string[]) =>
      (
        await db
          .selectFrom("oauth_denied_tokens")
          .select("jti_hash")
          .where("jti_hash", "in", hashes)
          .execute()
      ).length;
    expect(await artifactsLeft(Object.values(expired))).toBe(5);

    await pruneUntil(
      async () =>
        (await artifactsLeft(Object.values(expired))) === 0 && (await deniedLeft([denied.old])) === 0,
    );
    expect(await artifactsLeft([grantId, live.refresh, live.justExpired])).toBe(3);
    expect(await deniedLeft([denied.recent, denied.live])).toBe(2);
    expect(await oauth.isTokenDenied(denied.live)).toBe(true);
    expect(await artifacts.adapterFor("RefreshToken").find(live.refresh)).toMatchObject({ grantId });
  });

  it("deletes wrong approval codes a day past their window, and keeps those the window counts", async () => {
    const db = h.plane.database.db;
    const { email } = await signUpOperator(h, { label: "prune" });
    const { organisation_id: organisationId } = await db
      .selectFrom("memberships")
      .innerJoin("operators", "operators.id", "memberships.operator_id")
      .select("memberships.organisation_id")
      .where("operators.email", "=", email)
      .executeTakeFirstOrThrow();
    const grants = createGrantsRepo(db);
    const now = h.clock.now.getTime();
    await grants.insertCodeFailure(organisationId, new Date(now - DAY - HOUR));
    await grants.insertCodeFailure(organisationId, new Date(now - 5 * MINUTE));

    await pruneUntil(
      async () => (await grants.countCodeFailuresSince(organisationId, new Date(0))).count === 1,
    );
    expect(await grants.countCodeFailuresSince(organisationId, new Date(now - 15 * MINUTE))).toMatchObject({
      count: 1,
    });
  });

  it("deletes in batches until a batch comes back short", async () => {
    const db = h.plane.database.db;
    const name = `prune_batch:${unique()}`;
    const old = new Date(h.clock.now.getTime() - 2 * DAY);
    const rows = Array.from({ length: PRUNE_BATCH + 5 }, () => ({ bucket: name, at: old }));
    for (let i = 0; i < rows.length; i += 2_000) {
      await db
        .insertInto("rate_limit_hits")
        .values(rows.slice(i, i + 2_000))
        .execute();
    }
    const counts = await createPrunes(db, () => h.clock.now).pruneOnce();
    expect(counts.rateLimitHits).toBeGreaterThanOrEqual(PRUNE_BATCH + 5);
    expect(
      (await db.selectFrom("rate_limit_hits").select("id").where("bucket", "=", name).execute()).length,
    ).toBe(0);
  });

  it("is started by the control plane, and stopped when it closes", () => {
    const wiring = readFileSync(new URL("./control-plane.ts", import.meta.url), "utf8");
    expect(wiring).toContain(
      "const stopPrunes = startPruneSchedule(createPrunes(db, now, services.emailCodes), logger);",
    );
    expect(wiring).toMatch(/async close\(\) \{[^}]*stopPrunes\(\);/);
  });
});
