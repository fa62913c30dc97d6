// The audit signing keys: rotations that race keep every key published, a retired key is
// published with its retirement, a running plane signs with the new key without a restart, and
// one that cannot read the file signs with no key from memory.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AuditKeysUnreadableError, auditKeysPath, openAuditKeys, rotateAuditKeys } from "./audit-keys.ts";

describe("the audit signing keys", () => {
  it("keeps every key when rotations run at once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "latch-audit-keys-"));
    const first = (await openAuditKeys(dir)).signer.signingKey().keyId;
    const rotations = await Promise.all([rotateAuditKeys(dir), rotateAuditKeys(dir), rotateAuditKeys(dir)]);
    const published = (await openAuditKeys(dir)).published().keys.map((key) => key.key_id);
    expect(new Set(published)).toEqual(new Set([first, ...rotations.map((r) => r.newKeyId)]));
    // One key signs: every other has lost its private half.
    const stored = JSON.parse(readFileSync(auditKeysPath(dir), "utf8")) as {
      keys: { private_key?: string }[];
    };
    expect(stored.keys.filter((key) => key.private_key !== undefined)).toHaveLength(1);
  });

  it("publishes a retired key's retirement, and signs with the new key at once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "latch-audit-keys-"));
    const keys = await openAuditKeys(dir);
    const old = keys.signer.signingKey().keyId;
    expect(keys.published().keys[0]).not.toHaveProperty("retired_at");
    const at = new Date("2026-11-26T06:00:00.000Z");
    const rotation = await rotateAuditKeys(dir, at);
    expect(keys.published().keys).toEqual([
      expect.not.objectContaining({ retired_at: expect.anything() }),
      expect.objectContaining({ key_id: old, retired_at: "2026-11-26T06:00:00.000Z" }),
    ]);
    // The plane opened before the rotation signs the next checkpoint with the new key.
    expect(keys.signer.signingKey().keyId).toBe(rotation.newKeyId);
  });

  it("signs nothing when the key file cannot be read, and says which file and why, never what it holds", async () => {
    const dir = mkdtempSync(join(tmpdir(), "latch-audit-keys-"));
    const keys = await openAuditKeys(dir);
    const old = keys.signer.signingKey().keyId;
    const atStart = keys.published();
    // A rotation the plane has not read yet leaves a file it cannot read (root-owned, 0600, for a
    // plane running as another user; the tests may run as root, who reads anything: a directory
    // in its place, then a file that is not JSON, fail the read alike).
    const rotation = await rotateAuditKeys(dir, new Date("2026-11-26T06:00:00.000Z"));
    const path = auditKeysPath(dir);
    const rotated = readFileSync(path, "utf8");
    const secrets = (JSON.parse(rotated) as { keys: { private_key?: string }[] }).keys
      .map((key) => key.private_key)
      .filter((key) => key !== undefined);
    rmSync(path);
    mkdirSync(path);
    const heard: AuditKeysUnreadableError[] = [];
    let refused: unknown;
    try {
      keys.signer.signingKey();
    } catch (error) {
      refused = error;
    }
    // Not the start-time key, which the file now retires: no checkpoint at all.
    expect(refused).toBeInstanceOf(AuditKeysUnreadableError);
    expect(refused).toMatchObject({
      code: "audit_keys_unreadable",
      file: path,
      reason: expect.stringContaining("EISDIR"),
    });
    expect((refused as Error).message).toContain(path);
    // The published keys: the last ones read, and the caller hears why.
    expect(keys.published((error) => heard.push(error))).toEqual(atStart);
    expect(heard).toHaveLength(1);

    rmSync(path, { recursive: true });
    writeFileSync(path, `${rotated.slice(0, 200)} cut short`, { mode: 0o600 });
    let unparsable: unknown;
    try {
      keys.signer.signingKey();
    } catch (error) {
      unparsable = error;
    }
    expect(unparsable).toMatchObject({ code: "audit_keys_unreadable", reason: "not valid JSON" });
    for (const secret of [...secrets, rotated.slice(0, 200)]) {
      expect((unparsable as Error).message).not.toContain(secret);
      expect(JSON.stringify(unparsable)).not.toContain(secret);
    }

    // Readable again: the new key signs, and both are published.
    writeFileSync(path, rotated, { mode: 0o600 });
    expect(keys.signer.signingKey().keyId).toBe(rotation.newKeyId);
    expect(keys.published().keys.map((key) => key.key_id)).toEqual([rotation.newKeyId, old]);
  });
});
