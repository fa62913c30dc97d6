// The audit signing keys: rotations that race keep every key published, a retired key is
// published with its retirement, and a running plane signs with the new key without a restart.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { auditKeysPath, openAuditKeys, rotateAuditKeys } from "./audit-keys.ts";

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
});
