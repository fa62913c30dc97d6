// The offline verifier on hostile files: whatever a line holds, the answer is a first bad seq,
// never a crash, and a keys document with junk in it verifies nothing it should not.
import { generateKeyPairSync, sign } from "node:crypto";
import {
  checkpointSigningInput,
  type LedgerLine,
  type LedgerRow,
  rowHash,
  ZERO_HASH,
} from "@latch/shared/ledger/ledger-format";
import { describe, expect, it } from "vitest";
import { createLedgerVerifier, verifyingKeys } from "./ledger-verify.ts";

function chain(count: number): LedgerRow[] {
  const rows: LedgerRow[] = [];
  let prev = ZERO_HASH;
  for (let seq = 1; seq <= count; seq++) {
    const row = {
      type: "event" as const,
      organisation_id: "org_a",
      seq,
      prev_hash: prev,
      at: "2026-11-26T04:00:00.000Z",
      environment: null,
      actor: "system",
      action: `a${seq}`,
      item_name: null,
      host: null,
      reason: null,
      detail: {},
      trace_id: null,
    };
    prev = rowHash(row);
    rows.push({ ...row, hash: prev });
  }
  return rows;
}

const verify = (lines: unknown[], keys?: Parameters<typeof verifyingKeys>[0]) => {
  const verifier = createLedgerVerifier({ keys: keys ? verifyingKeys(keys) : undefined });
  for (const line of lines) verifier.push(line as LedgerLine);
  return verifier.result();
};

describe("the offline ledger verifier", () => {
  it("holds for a well-formed chain and names the first bad seq of a broken one", () => {
    expect(verify(chain(3))).toMatchObject({ ok: true, rows: 3, last_seq: 3 });
    const rows = chain(3);
    expect(verify([rows[0], { ...rows[1]!, seq: 7 }, rows[2]])).toMatchObject({
      ok: false,
      first_bad_seq: 2,
    });
    expect(verify(rows.slice(1))).toMatchObject({ ok: false, first_bad_seq: 1 });
    expect(verify([{ ...rows[0]!, prev_hash: "f".repeat(64) }])).toMatchObject({
      ok: false,
      first_bad_seq: 1,
    });
  });

  it("answers junk lines with a bad seq, never a crash", () => {
    const rows = chain(2);
    let deep: unknown = "x";
    for (let i = 0; i < 100_000; i++) deep = [deep];
    for (const [i, junk] of [
      null,
      42,
      "text",
      {},
      { type: "event" },
      { ...rows[1]!, detail: deep },
      { ...rows[1]!, action: "\ud800" },
    ].entries()) {
      const result = verify([rows[0], junk]);
      expect(result.ok, `junk line ${i}`).toBe(false);
      expect(result.first_bad_seq).toBe(2);
    }
  });

  it("checks a checkpoint's signature only against a published Ed25519 key", () => {
    const rows = chain(2);
    const { privateKey, publicKey } = generateKeyPairSync("ed25519");
    const unsigned = {
      type: "checkpoint" as const,
      organisation_id: "org_a",
      seq: 2,
      hash: rows[1]!.hash,
      at: "2026-11-26T05:00:00.000Z",
      key_id: "k1",
    };
    const checkpoint = {
      ...unsigned,
      signature: sign(null, checkpointSigningInput(unsigned), privateKey).toString("base64url"),
    };
    const published = {
      keys: [
        {
          key_id: "k1",
          alg: "Ed25519" as const,
          public_key: publicKey.export({ format: "jwk" }).x!,
          created_at: "",
        },
      ],
    };
    expect(verify([...rows, checkpoint], published)).toMatchObject({ ok: true, last_checkpoint: checkpoint });
    const junkKeys = {
      keys: [{ key_id: "k1", alg: "Ed25519" as const, public_key: "not-a-key", created_at: "" }],
    };
    expect(verify([...rows, checkpoint], junkKeys)).toMatchObject({ ok: false, first_bad_seq: 2 });
    expect(verify([...rows, { ...checkpoint, at: "2027-01-01T00:00:00.000Z" }], published)).toMatchObject({
      ok: false,
      first_bad_seq: 2,
    });
    // Without keys the place and the hash are still checked.
    expect(verify([...rows, { ...checkpoint, hash: rows[0]!.hash }])).toMatchObject({
      ok: false,
      first_bad_seq: 2,
    });
    expect(verify([rows[0], { ...checkpoint }])).toMatchObject({ ok: false, first_bad_seq: 2 });
  });

  it("refuses a retired key's checkpoint after its retirement and keeps its older ones", () => {
    // Rows 1-2 before the rotation at 06:00, rows 3-4 after it.
    const rows = chain(4).map((row) => ({ ...row }));
    let prev = ZERO_HASH;
    for (const [i, row] of rows.entries()) {
      const { hash: _hash, ...rest } = {
        ...row,
        prev_hash: prev,
        at: i < 2 ? "2026-11-26T04:00:00.000Z" : "2026-11-26T07:00:00.000Z",
      };
      prev = rowHash(rest as LedgerRow);
      rows[i] = { ...rest, hash: prev } as LedgerRow;
    }
    const retired = generateKeyPairSync("ed25519");
    const current = generateKeyPairSync("ed25519");
    const signed = (seq: number, at: string, keyId: string, privateKey: typeof retired.privateKey) => {
      const unsigned = {
        type: "checkpoint" as const,
        organisation_id: "org_a",
        seq,
        hash: rows[seq - 1]!.hash,
        at,
        key_id: keyId,
      };
      return {
        ...unsigned,
        signature: sign(null, checkpointSigningInput(unsigned), privateKey).toString("base64url"),
      };
    };
    const published = (retiredAt: string) => ({
      keys: [
        {
          key_id: "k_new",
          alg: "Ed25519" as const,
          public_key: current.publicKey.export({ format: "jwk" }).x!,
          created_at: "2026-11-26T06:00:00.000Z",
        },
        {
          key_id: "k_old",
          alg: "Ed25519" as const,
          public_key: retired.publicKey.export({ format: "jwk" }).x!,
          created_at: "2026-11-01T00:00:00.000Z",
          retired_at: retiredAt,
        },
      ],
    });
    const keys = published("2026-11-26T06:00:00.000Z");
    const before = signed(2, "2026-11-26T05:00:00.000Z", "k_old", retired.privateKey);
    // Old evidence: signed before the retirement, over rows from before it.
    expect(verify([rows[0], rows[1], before], keys)).toMatchObject({ ok: true, last_checkpoint: before });
    // The new key signs the later rows.
    const after = signed(4, "2026-11-26T07:30:00.000Z", "k_new", current.privateKey);
    expect(verify([rows[0], rows[1], before, rows[2], rows[3], after], keys)).toMatchObject({
      ok: true,
      last_checkpoint: after,
    });
    // A thief holding the retired key signs the later rows: refused, whether the checkpoint says
    // when it was made or claims a time before the retirement (its row is still after it).
    for (const at of ["2026-11-26T07:30:00.000Z", "2026-11-26T05:30:00.000Z", "not a time"]) {
      const forged = signed(4, at, "k_old", retired.privateKey);
      const result = verify([rows[0], rows[1], before, rows[2], rows[3], forged], keys);
      expect(result, at).toMatchObject({ ok: false, first_bad_seq: 4, last_checkpoint: before });
      expect(result.problem).toContain("after its retirement");
    }
    // A retirement that does not read as a time publishes no key.
    expect(verify([rows[0], rows[1], before], published("soon"))).toMatchObject({
      ok: false,
      first_bad_seq: 2,
    });
  });

  it("asks an export, not a live ledger, to end with a checkpoint of its last row", () => {
    const rows = chain(3);
    const checkpoint = {
      type: "checkpoint" as const,
      organisation_id: "org_a",
      seq: 2,
      hash: rows[1]!.hash,
      at: "2026-11-26T05:00:00.000Z",
      key_id: "k1",
      signature: "AAAA",
    };
    const closed = (lines: unknown[]) => {
      const verifier = createLedgerVerifier();
      for (const line of lines) verifier.push(line as LedgerLine);
      verifier.requireClosingCheckpoint();
      return { ...verifier.result(), organisation: verifier.organisation() };
    };
    // A live ledger's newest rows wait for the hourly checkpoint: GET /api/audit/verify holds.
    expect(verify([rows[0], rows[1], checkpoint, rows[2]])).toMatchObject({ ok: true, last_seq: 3 });
    expect(closed([rows[0], rows[1], checkpoint, rows[2]])).toMatchObject({
      ok: false,
      first_bad_seq: 3,
      organisation: "org_a",
    });
    expect(closed([rows[0], rows[1], checkpoint])).toMatchObject({ ok: true, last_seq: 2 });
    expect(closed(rows)).toMatchObject({ ok: false, first_bad_seq: 1 });
    expect(closed([])).toMatchObject({ ok: false, first_bad_seq: 1, organisation: undefined });
    // A chain already broken keeps its first bad seq.
    expect(closed([rows[0], { ...rows[1]!, action: "changed" }, rows[2]])).toMatchObject({
      ok: false,
      first_bad_seq: 2,
    });
  });
});
