import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { splitEnvelope } from "@latch/shared/crypto/envelope";
import { readySodium, sealValue } from "@latch/shared/crypto/seal";
import { deriveSealingKeyId } from "@latch/shared/crypto/sealing-key-id";
import sodium from "sodium-native";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createDataKeyCache } from "./data-key-cache.ts";
import { loadOrCreateSealingKeyring, sealingKeyPath } from "./sealing-keys.ts";

const newDir = () => mkdtempSync(join(tmpdir(), "latch-keys-"));

/** A value as it was stored before envelopes: a bare sealed box of the value. */
async function sealBareBox(publicKey: Uint8Array, value: string): Promise<Uint8Array> {
  return (await readySodium()).crypto_box_seal(new TextEncoder().encode(value), publicKey);
}

/** The data key inside an envelope, opened the slow way with the key file's private key. */
async function dataKeyOf(dir: string, sealed: Uint8Array): Promise<Buffer> {
  const file = JSON.parse(readFileSync(sealingKeyPath(dir), "utf8")) as {
    keys: { publicKey: string; privateKey: string }[];
  };
  const key = file.keys[0]!;
  const na = await readySodium();
  const parts = splitEnvelope(sealed)!;
  return Buffer.from(
    na.crypto_box_seal_open(
      parts.sealedDataKey,
      Buffer.from(key.publicKey, "base64url"),
      Buffer.from(key.privateKey, "base64url"),
    ),
  );
}

/** Puts a new key first in the key file, keeping the old ones after it (a rotation). */
function rotateKeyFile(dir: string): void {
  const path = sealingKeyPath(dir);
  const file = JSON.parse(readFileSync(path, "utf8")) as { keys: object[] };
  const publicKey = Buffer.alloc(32);
  const privateKey = Buffer.alloc(32);
  sodium.crypto_box_keypair(publicKey, privateKey);
  const keyId = deriveSealingKeyId(publicKey);
  file.keys.unshift({
    keyId,
    publicKey: publicKey.toString("base64url"),
    privateKey: privateKey.toString("base64url"),
    createdAt: new Date().toISOString(),
  });
  writeFileSync(path, JSON.stringify(file));
}

describe("sealing keyring", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("creates an owner-only key file on first run and reuses it after", async () => {
    const dir = mkdtempSync(join(tmpdir(), "latch-keys-"));
    const first = await loadOrCreateSealingKeyring(dir);
    expect(statSync(sealingKeyPath(dir)).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "egress")).mode & 0o777).toBe(0o700);
    const second = await loadOrCreateSealingKeyring(dir);
    expect(second.current.keyId).toBe(first.current.keyId);
  });

  it("opens what the control plane sealed, and nothing else", async () => {
    const keyring = await loadOrCreateSealingKeyring(mkdtempSync(join(tmpdir(), "latch-keys-")));
    const sealed = await sealValue(keyring.current, "sk_live_canary_value");
    expect(Buffer.from(sealed.sealed).includes("sk_live_canary_value")).toBe(false);
    expect(keyring.open(sealed.keyId, sealed.sealed)).toBe("sk_live_canary_value");

    const tampered = Uint8Array.from(sealed.sealed);
    tampered[tampered.length - 1] = (tampered.at(-1) ?? 0) ^ 1;
    expect(() => keyring.open(sealed.keyId, tampered)).toThrow(/could not be opened/);
    expect(() => keyring.open("sk_unknown", sealed.sealed)).toThrow(/no sealing key/);
    // Shorter than a sealed box's overhead (48 bytes), and empty: refused, never a crash.
    expect(() => keyring.open(sealed.keyId, sealed.sealed.subarray(0, 47))).toThrow(/could not be opened/);
    expect(() => keyring.open(sealed.keyId, new Uint8Array(0))).toThrow(/could not be opened/);
    // Exactly the overhead: an empty value sealed is still a box that must authenticate.
    expect(() => keyring.open(sealed.keyId, new Uint8Array(48))).toThrow(/could not be opened/);
  });

  it("cannot open a value sealed to another proxy's key", async () => {
    const ours = await loadOrCreateSealingKeyring(mkdtempSync(join(tmpdir(), "latch-keys-")));
    const theirs = await loadOrCreateSealingKeyring(mkdtempSync(join(tmpdir(), "latch-keys-")));
    const sealed = await sealValue(theirs.current, "value-for-someone-else");
    expect(() => ours.open(ours.current.keyId, sealed.sealed)).toThrow(/could not be opened/);
  });

  it("opens an envelope and a value stored before envelopes (a bare sealed box) alike", async () => {
    const keyring = await loadOrCreateSealingKeyring(newDir());
    const envelope = await sealValue(keyring.current, "sk_live_new_format");
    expect(splitEnvelope(envelope.sealed)).toBeDefined();
    const bare = await sealBareBox(keyring.current.publicKey, "sk_live_old_format");
    expect(splitEnvelope(bare)).toBeUndefined();
    expect(keyring.open(envelope.keyId, envelope.sealed)).toBe("sk_live_new_format");
    expect(keyring.open(keyring.current.keyId, bare)).toBe("sk_live_old_format");
    // Twice each: the second envelope open comes from the data key cache.
    expect(keyring.open(envelope.keyId, envelope.sealed)).toBe("sk_live_new_format");
    expect(keyring.open(keyring.current.keyId, bare)).toBe("sk_live_old_format");
    // Empty and non-ASCII values.
    for (const value of ["", "pässwörd-ü-😀"]) {
      const sealed = await sealValue(keyring.current, value);
      expect(keyring.open(sealed.keyId, sealed.sealed)).toBe(value);
    }
    keyring.close();
  });

  it("tries a value that reads as an envelope but does not open as one as a bare sealed box", async () => {
    const keyring = await loadOrCreateSealingKeyring(newDir());
    // A bare box's first 32 bytes are a random key, so about one in 2^40 begins with "lenv" 0x01:
    // such a value must still open as the box it is. Shown here by the two opens attempted.
    const forged = Buffer.concat([Buffer.from([0x6c, 0x65, 0x6e, 0x76, 0x01]), Buffer.alloc(200, 7)]);
    expect(splitEnvelope(forged)).toBeDefined();
    const boxOpen = vi.spyOn(sodium, "crypto_box_seal_open");
    expect(() => keyring.open(keyring.current.keyId, forged)).toThrow(/could not be opened/);
    expect(boxOpen.mock.calls.map((call) => call[1].length)).toEqual([80, forged.length]);
    keyring.close();
  });

  it("refuses an envelope with any part changed, cached data key or not", async () => {
    const keyring = await loadOrCreateSealingKeyring(newDir());
    const sealed = await sealValue(keyring.current, "sk_live_tamper_me");
    const flip = (at: number) => {
      const copy = Buffer.from(sealed.sealed);
      copy[at] = (copy[at] ?? 0) ^ 1;
      return copy;
    };
    // header, sealed data key, nonce, ciphertext, tag
    const places = [4, 5, 60, 90, 110, sealed.sealed.length - 20, sealed.sealed.length - 1];
    for (const at of places)
      expect(() => keyring.open(sealed.keyId, flip(at))).toThrow(/could not be opened/);
    expect(keyring.open(sealed.keyId, sealed.sealed)).toBe("sk_live_tamper_me");
    // Now its data key is cached: a changed nonce or ciphertext under that same sealed key fails.
    for (const at of places.slice(3))
      expect(() => keyring.open(sealed.keyId, flip(at))).toThrow(/could not be opened/);
    keyring.close();
  });

  it("opens a hot value's data key once, then decrypts with the cached key", async () => {
    const dir = newDir();
    const dataKeys = createDataKeyCache({ capacity: 16 });
    const keyring = await loadOrCreateSealingKeyring(dir, undefined, { dataKeys });
    const sealed = await sealValue(keyring.current, "sk_live_hot_value");
    const boxOpen = vi.spyOn(sodium, "crypto_box_seal_open");
    for (let i = 0; i < 5; i++) expect(keyring.open(sealed.keyId, sealed.sealed)).toBe("sk_live_hot_value");
    expect(boxOpen).toHaveBeenCalledTimes(1);
    expect(dataKeys.size).toBe(1);
    keyring.close();
  });

  it("caches data keys and never a value: the cache holds each 32-byte key and nothing else", async () => {
    const dir = newDir();
    const dataKeys = createDataKeyCache({ capacity: 16 });
    const keyring = await loadOrCreateSealingKeyring(dir, undefined, { dataKeys });
    const values = ["sk_live_canary_one_0123456789", "ghp_canary_two_abcdefghijklmnop", "k"];
    const sealed = await Promise.all(values.map((value) => sealValue(keyring.current, value)));
    for (const [i, s] of sealed.entries()) expect(keyring.open(s.keyId, s.sealed)).toBe(values[i]);
    const bare = await sealBareBox(keyring.current.publicKey, "sk_live_bare_canary_value");
    expect(keyring.open(keyring.current.keyId, bare)).toBe("sk_live_bare_canary_value");

    const entries = dataKeys.inspect();
    // One per envelope; a bare sealed box has no data key, so nothing of it is kept.
    expect(entries).toHaveLength(3);
    const expected = await Promise.all(sealed.map((s) => dataKeyOf(dir, s.sealed)));
    expect(entries.map((e) => e.bytes.toString("hex")).sort()).toEqual(
      expected.map((k) => k.toString("hex")).sort(),
    );
    for (const entry of entries) {
      expect(entry.keyId).toBe(keyring.current.keyId);
      expect(entry.bytes).toHaveLength(32);
    }
    // No value, in any spelling, anywhere in the cache's memory (free slots included).
    const memory = dataKeys.inspectMemory();
    for (const value of [...values.slice(0, 2), "sk_live_bare_canary_value"]) {
      for (const spelling of [
        value,
        Buffer.from(value).toString("hex"),
        Buffer.from(value).toString("base64"),
      ]) {
        expect(memory.includes(Buffer.from(spelling))).toBe(false);
      }
    }
    keyring.close();
  });

  it("wipes the cached data keys on a rotation, and still opens values under the old key", async () => {
    const dir = newDir();
    const dataKeys = createDataKeyCache({ capacity: 16 });
    const keyring = await loadOrCreateSealingKeyring(dir, undefined, { dataKeys });
    const oldKeyId = keyring.current.keyId;
    const sealed = await sealValue(keyring.current, "sk_live_before_rotation");
    expect(keyring.open(sealed.keyId, sealed.sealed)).toBe("sk_live_before_rotation");
    expect(dataKeys.size).toBe(1);
    expect(keyring.reload()).toBe(false); // same file: nothing changes, nothing wiped
    expect(dataKeys.size).toBe(1);

    rotateKeyFile(dir);
    expect(keyring.reload()).toBe(true);
    expect(dataKeys.size).toBe(0);
    expect(dataKeys.inspectMemory().every((byte) => byte === 0)).toBe(true);
    expect(keyring.current.keyId).not.toBe(oldKeyId);
    expect(keyring.open(oldKeyId, sealed.sealed)).toBe("sk_live_before_rotation");
    const after = await sealValue(keyring.current, "sk_live_after_rotation");
    expect(keyring.open(after.keyId, after.sealed)).toBe("sk_live_after_rotation");
    keyring.close();
  });

  it("keeps the keys in use when the key file cannot be read again", async () => {
    const dir = newDir();
    const keyring = await loadOrCreateSealingKeyring(dir);
    const sealed = await sealValue(keyring.current, "sk_live_kept");
    writeFileSync(sealingKeyPath(dir), "{ not json");
    expect(() => keyring.reload()).toThrow();
    expect(keyring.open(sealed.keyId, sealed.sealed)).toBe("sk_live_kept");
    keyring.close();
  });
});
