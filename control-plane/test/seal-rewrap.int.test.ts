// vault seal-rewrap against the real proxy: values stored before envelopes (bare sealed boxes) and
// envelopes under a key the proxy rotated away from are sealed again, as envelopes, under its
// current key, and still open to the same values; a value the proxy cannot open is left and
// reported; a value written meanwhile is kept. The proxy reads its key file again (a rotation)
// within its refresh interval, and then no longer needs the old key for any stored value.
import { readFileSync, writeFileSync } from "node:fs";
import { splitEnvelope } from "@latch/shared/crypto/envelope";
import { readySodium, sealValue } from "@latch/shared/crypto/seal";
import { deriveSealingKeyId } from "@latch/shared/crypto/sealing-key-id";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sealingKeyPath } from "../../egress-proxy/src/keys/sealing-keys.ts";
import type { OpenDatabase } from "../src/db/database.ts";
import { createItemTokensRepo } from "../src/items/item-tokens.repo.ts";
import { rewrapSealedValues } from "../src/items/seal-rewrap.ts";
import { createSealedValuesRepo } from "../src/items/sealed-values.repo.ts";
import { newTestItem, newTestOrganisation, testDatabase } from "./database.ts";
import { type EgressHarness, startEgressHarness } from "./egress-harness.ts";

let harness: EgressHarness;
let database: OpenDatabase;

beforeAll(async () => {
  harness = await startEgressHarness({ sealingKeyRefreshMs: 100 });
  database = await testDatabase();
}, 60_000);
afterAll(async () => {
  await harness?.close();
});

/** The proxy's current key, as the control plane learns it. */
async function currentKey() {
  const info = await harness.client.getInfo();
  return { keyId: info.sealingKeyId, publicKey: new Uint8Array(info.sealingPublicKey) };
}

const storeItem = (organisationId: string, name: string, keyId: string, sealed: Uint8Array) =>
  newTestItem(database, organisationId, { name, keyId, sealed });

async function stored(id: string) {
  return database.db
    .selectFrom("items")
    .select(["sealed_value", "sealing_key_id"])
    .where("id", "=", id)
    .executeTakeFirstOrThrow();
}

/** What the proxy opens a stored value to (a resolve ticket, as a trusted runtime's). */
async function opened(id: string): Promise<string> {
  return openedValue(await stored(id));
}

function openedValue(row: { sealing_key_id: string; sealed_value: Uint8Array }): Promise<string> {
  return harness.client.resolve(
    harness.minter.mintResolveTicket({
      credential: {
        itemName: "X",
        keyId: row.sealing_key_id,
        sealedValue: Buffer.from(row.sealed_value),
        username: "",
      },
    }),
  );
}

function rewrap(organisationId: string) {
  const lines: string[] = [];
  return rewrapSealedValues({
    repo: createSealedValuesRepo(database.db, organisationId),
    sealingKey: currentKey,
    minter: harness.minter,
    egress: harness.client,
    progress: (line) => lines.push(line),
  });
}

/** Puts a new key first in the proxy's key file; `keep` false drops the others (a retirement). */
async function rotate(keep = true): Promise<string> {
  const path = sealingKeyPath(harness.dataDir);
  const file = JSON.parse(readFileSync(path, "utf8")) as { keys: object[] };
  const na = await readySodium();
  const pair = na.crypto_box_keypair();
  const keyId = deriveSealingKeyId(pair.publicKey);
  const key = {
    keyId,
    publicKey: Buffer.from(pair.publicKey).toString("base64url"),
    privateKey: Buffer.from(pair.privateKey).toString("base64url"),
    createdAt: new Date().toISOString(),
  };
  writeFileSync(path, JSON.stringify({ keys: keep ? [key, ...file.keys] : [key] }));
  for (let i = 0; i < 100 && (await currentKey()).keyId !== keyId; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect((await currentKey()).keyId).toBe(keyId);
  return keyId;
}

describe("vault seal-rewrap", () => {
  it("seals values from before envelopes, and after a rotation every value, under the current key", async () => {
    const org = await newTestOrganisation(database);
    const first = await currentKey();
    const na = await readySodium();
    const bare = await storeItem(
      org,
      "BARE_KEY",
      first.keyId,
      na.crypto_box_seal(new TextEncoder().encode("sk_live_bare_before_envelopes"), first.publicKey),
    );
    const envelope = await sealValue(first, "sk_live_envelope_value");
    const enveloped = await storeItem(org, "ENVELOPE_KEY", first.keyId, envelope.sealed);
    await database.db
      .insertInto("item_tokens")
      .values({
        item_id: bare,
        organisation_id: org,
        sealed_value: na.crypto_box_seal(
          new TextEncoder().encode("gho_minted_before_envelopes"),
          first.publicKey,
        ),
        sealing_key_id: first.keyId,
        token_last4: "opes",
        scope: "",
        expires_at: new Date(Date.now() + 3_600_000),
      })
      .execute();
    expect(await opened(bare)).toBe("sk_live_bare_before_envelopes");

    // The bare boxes become envelopes; the envelope is already what it should be.
    expect(await rewrap(org)).toEqual({
      keyId: first.keyId,
      rewrapped: 2,
      changedMeanwhile: 0,
      unopened: 0,
      left: 0,
    });
    expect(splitEnvelope((await stored(bare)).sealed_value)).toBeDefined();
    expect(await opened(bare)).toBe("sk_live_bare_before_envelopes");
    expect(Buffer.from((await stored(enveloped)).sealed_value)).toEqual(Buffer.from(envelope.sealed));
    expect(await rewrap(org)).toMatchObject({ rewrapped: 0 });

    // A rotation: every value is sealed again under the new key, an envelope's value untouched.
    const second = await rotate();
    expect(await rewrap(org)).toEqual({
      keyId: second,
      rewrapped: 3,
      changedMeanwhile: 0,
      unopened: 0,
      left: 0,
    });
    const after = await stored(enveloped);
    expect(after.sealing_key_id).toBe(second);
    const before = splitEnvelope(envelope.sealed)!;
    const now = splitEnvelope(after.sealed_value)!;
    expect(Buffer.from(now.ciphertext)).toEqual(Buffer.from(before.ciphertext));
    expect(Buffer.from(now.nonce)).toEqual(Buffer.from(before.nonce));
    expect(Buffer.from(now.sealedDataKey)).not.toEqual(Buffer.from(before.sealedDataKey));

    // The old key retired: nothing stored needs it any more.
    await rotate(false);
    // What no key opens is left, and said so: the run does not give the all-clear.
    expect(await rewrap(org)).toMatchObject({ unopened: 3, left: 3 });
  });

  it("opens every value after the old key is gone, once they were sealed again", async () => {
    const org = await newTestOrganisation(database);
    const old = await currentKey();
    const item = await storeItem(
      org,
      "ROTATED_KEY",
      old.keyId,
      (await sealValue(old, "sk_live_survives")).sealed,
    );
    // The organisation's SSO client secret is a stored secret too.
    await database.db
      .insertInto("sso_connections")
      .values({
        organisation_id: org,
        issuer: "https://idp.latch.test",
        client_id: "latch",
        sealed_client_secret: (await sealValue(old, "sso_client_secret_survives")).sealed,
        sealing_key_id: old.keyId,
        client_secret_last4: "ives",
        email_domains: ["corp.latch.test"],
        created_at: new Date(),
        updated_at: new Date(),
      })
      .execute();
    const next = await rotate();
    expect(await rewrap(org)).toMatchObject({ keyId: next, rewrapped: 2, unopened: 0 });
    // The old key taken out of the file: the proxy reads it again and holds only the new one.
    const path = sealingKeyPath(harness.dataDir);
    const file = JSON.parse(readFileSync(path, "utf8")) as { keys: { keyId: string }[] };
    writeFileSync(path, JSON.stringify({ keys: file.keys.filter((k) => k.keyId !== old.keyId) }));
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await opened(item)).toBe("sk_live_survives");
    const sso = await database.db
      .selectFrom("sso_connections")
      .select(["sealing_key_id", "sealed_client_secret as sealed_value"])
      .where("organisation_id", "=", org)
      .executeTakeFirstOrThrow();
    expect(sso.sealing_key_id).toBe(next);
    expect(await openedValue(sso)).toBe("sso_client_secret_survives");
    const stale = await storeItem(
      org,
      "STALE_KEY",
      old.keyId,
      (await sealValue(old, "sk_live_stale")).sealed,
    );
    await expect(opened(stale)).rejects.toThrow(/no sealing key/);
  });

  it("never loses a refresh token a call rotates while the run seals the old one again", async () => {
    const org = await newTestOrganisation(database);
    const key = await currentKey();
    const na = await readySodium();
    // A connected item's refresh token, sealed before envelopes: the run will seal it again.
    const id = await storeItem(
      org,
      "GITHUB_REFRESH",
      key.keyId,
      na.crypto_box_seal(new TextEncoder().encode("ghr_spent_refresh_0001"), key.publicKey),
    );
    const rotated = await sealValue(key, "ghr_rotated_refresh_0002");
    const repo = createSealedValuesRepo(database.db, org);
    let reached!: () => void;
    const reachedWrite = new Promise<void>((resolve) => {
      reached = resolve;
    });
    // The run, told when it is about to write its value (PostgreSQL: it waits for the lock there).
    let running: Promise<unknown> | undefined;
    const isStored = await createItemTokensRepo(database.db).inItemTokenLock(id, async (locked) => {
      // A call: it read the refresh token under the lock and spent it at the provider.
      const spent = (await locked.findSealedValue(id))!;
      running = rewrapSealedValues({
        repo: {
          ...repo,
          updateRewrapped: (...args) => {
            reached();
            return repo.updateRewrapped(...args);
          },
        },
        sealingKey: currentKey,
        minter: harness.minter,
        egress: harness.client,
        progress: () => {},
      });
      // PGlite runs one transaction at a time: the run cannot start before this one ends.
      if (database.kind === "postgres") {
        await reachedWrite;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      return locked.updateRotatedValue(id, spent.sealedValue, {
        sealedValue: rotated.sealed,
        sealingKeyId: rotated.keyId,
        last4: "0002",
      });
    });
    await running;
    expect(isStored).toBe(true);
    expect(await opened(id)).toBe("ghr_rotated_refresh_0002");
  });

  it("seals again a hundred values of the largest size, in tickets under the proxy's 2 MiB cap", async () => {
    const org = await newTestOrganisation(database);
    const key = await currentKey();
    const na = await readySodium();
    // 32 KiB each, the longest value stored: one ticket of the hundred would be about 3.3 MB.
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) {
      const value = `sk_large_${String(i).padStart(3, "0")}_`.padEnd(32 * 1024, "x");
      const sealed = na.crypto_box_seal(new TextEncoder().encode(value), key.publicKey);
      ids.push(await storeItem(org, `LARGE_${i}`, key.keyId, sealed));
    }
    expect(await rewrap(org)).toEqual({
      keyId: key.keyId,
      rewrapped: 100,
      changedMeanwhile: 0,
      unopened: 0,
      left: 0,
    });
    expect(splitEnvelope((await stored(ids[99]!)).sealed_value)).toBeDefined();
    expect((await opened(ids[99]!)).startsWith("sk_large_099_")).toBe(true);
    expect(await rewrap(org)).toMatchObject({ rewrapped: 0 });
  });

  it("leaves a value the proxy cannot open, and keeps a value written meanwhile", async () => {
    const org = await newTestOrganisation(database);
    const key = await currentKey();
    const na = await readySodium();
    const foreign = na.crypto_box_keypair();
    const unopenable = await storeItem(
      org,
      "FOREIGN_KEY",
      key.keyId,
      na.crypto_box_seal(new TextEncoder().encode("sealed to someone else"), foreign.publicKey),
    );
    const report = await rewrap(org);
    expect(report).toMatchObject({ rewrapped: 0, unopened: 1 });
    expect((await stored(unopenable)).sealing_key_id).toBe(key.keyId);

    const repo = createSealedValuesRepo(database.db, org);
    const row = await stored(unopenable);
    expect(
      await repo.updateRewrapped("items", unopenable, Buffer.from("not what is stored"), {
        keyId: key.keyId,
        sealedValue: Buffer.from("x"),
      }),
    ).toBe(false);
    expect(Buffer.from((await stored(unopenable)).sealed_value)).toEqual(Buffer.from(row.sealed_value));
  });
});
