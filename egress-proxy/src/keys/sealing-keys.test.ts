import { mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sealValue } from "@latch/shared/crypto/seal";
import { describe, expect, it } from "vitest";
import { loadOrCreateSealingKeyring, sealingKeyPath } from "./sealing-keys.ts";

describe("sealing keyring", () => {
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
});
