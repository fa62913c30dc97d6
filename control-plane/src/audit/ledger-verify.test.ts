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

  describe("a retired key", () => {
    const retired = generateKeyPairSync("ed25519");
    const current = generateKeyPairSync("ed25519");
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
    // Retired (and k_new made) at 06:00.
    const keys = published("2026-11-26T06:00:00.000Z");
    /** A chain whose rows carry `times`, in order. */
    const rowsAt = (times: string[]) => {
      const rows: LedgerRow[] = [];
      let prev = ZERO_HASH;
      for (const [i, at] of times.entries()) {
        const { hash: _hash, ...rest } = {
          ...chain(1)[0]!,
          seq: i + 1,
          action: `a${i + 1}`,
          prev_hash: prev,
          at,
        };
        prev = rowHash(rest as LedgerRow);
        rows.push({ ...rest, hash: prev } as LedgerRow);
      }
      return rows;
    };
    const signer = (rows: LedgerRow[]) => (seq: number, at: string, keyId: "k_old" | "k_new") => {
      const unsigned = {
        type: "checkpoint" as const,
        organisation_id: "org_a",
        seq,
        hash: rows[seq - 1]!.hash,
        at,
        key_id: keyId,
      };
      const privateKey = keyId === "k_old" ? retired.privateKey : current.privateKey;
      return {
        ...unsigned,
        signature: sign(null, checkpointSigningInput(unsigned), privateKey).toString("base64url"),
      };
    };
    const closed = (lines: unknown[]) => {
      const verifier = createLedgerVerifier({ keys: verifyingKeys(keys) });
      for (const line of lines) verifier.push(line as LedgerLine);
      verifier.requireClosingCheckpoint();
      return verifier.result();
    };
    // Rows 1-2 before the rotation at 06:00, rows 3-4 after it.
    const rows = rowsAt([
      "2026-11-26T04:00:00.000Z",
      "2026-11-26T04:00:00.000Z",
      "2026-11-26T07:00:00.000Z",
      "2026-11-26T07:00:00.000Z",
    ]);
    const signed = signer(rows);
    const before = signed(2, "2026-11-26T05:00:00.000Z", "k_old");

    it("keeps its checkpoints from before its retirement", () => {
      expect(verify([rows[0], rows[1], before], keys)).toMatchObject({ ok: true, last_checkpoint: before });
      expect(verify([rows[0], rows[1], before], keys)).not.toHaveProperty("ignored_checkpoints");
      // The new key signs the later rows.
      const after = signed(4, "2026-11-26T07:30:00.000Z", "k_new");
      expect(closed([rows[0], rows[1], before, rows[2], rows[3], after])).toMatchObject({
        ok: true,
        last_checkpoint: after,
      });
      // A retirement that does not read as a time publishes no key.
      expect(verify([rows[0], rows[1], before], published("soon"))).toMatchObject({
        ok: false,
        first_bad_seq: 2,
      });
    });

    it("vouches for nothing after its retirement: passed over and named, and an export it closes fails", () => {
      // Whether the checkpoint says when it was made or claims a time before the retirement (its
      // row is still after it).
      for (const at of ["2026-11-26T07:30:00.000Z", "2026-11-26T05:30:00.000Z", "not a time"]) {
        const late = signed(4, at, "k_old");
        const lines = [rows[0], rows[1], before, rows[2], rows[3], late];
        // A live ledger: the rows after `before` wait for a valid checkpoint.
        const live = verify(lines, keys);
        expect(live, at).toMatchObject({
          ok: true,
          last_checkpoint: before,
          ignored_checkpoints: [{ seq: 4, key_id: "k_old", at }],
        });
        expect(live.ignored_checkpoints![0]!.reason).toContain("after its retirement");
        // An export whose closing checkpoint it is: the rows after `before` are unsigned.
        const exported = closed(lines);
        expect(exported, at).toMatchObject({ ok: false, first_bad_seq: 3, last_checkpoint: before });
        expect(exported.problem).toContain("vouches for nothing");
      }
    });

    it("leaves the rows it covered to the next valid checkpoint (a replica slow to roll)", () => {
      const more = rowsAt([
        "2026-11-26T04:00:00.000Z",
        "2026-11-26T04:00:00.000Z",
        "2026-11-26T07:00:00.000Z",
        "2026-11-26T07:00:00.000Z",
        "2026-11-26T08:00:00.000Z",
      ]);
      const sign5 = signer(more);
      const stale = sign5(3, "2026-11-26T07:10:00.000Z", "k_old");
      const next = sign5(5, "2026-11-26T08:10:00.000Z", "k_new");
      const result = closed([more[0], more[1], more[2], stale, more[3], more[4], next]);
      expect(result).toMatchObject({ ok: true, rows: 5, last_checkpoint: next });
      expect(result.ignored_checkpoints?.map((c) => c.seq)).toEqual([3]);
      // The hash chain still binds the rows it covered: one changed breaks the chain at its seq.
      expect(
        closed([more[0], more[1], { ...more[2]!, action: "changed" }, stale, more[3], more[4], next]),
      ).toMatchObject({ ok: false, first_bad_seq: 3 });
    });

    it("compares with the latest row time read, not the last row's: a row dated back does not reopen it", () => {
      // A thief of the retired key appends a row dated before the retirement after rows dated
      // after it, then a checkpoint dated before the retirement.
      const backDated = rowsAt([
        "2026-11-26T04:00:00.000Z",
        "2026-11-26T04:00:00.000Z",
        "2026-11-26T07:00:00.000Z",
        "2026-11-26T07:00:00.000Z",
        "2026-11-26T05:00:00.000Z",
      ]);
      const forge = signer(backDated);
      const early = forge(2, "2026-11-26T05:00:00.000Z", "k_old");
      const forged = forge(5, "2026-11-26T05:30:00.000Z", "k_old");
      const lines = [backDated[0], backDated[1], early, backDated[2], backDated[3], backDated[4], forged];
      expect(verify(lines, keys)).toMatchObject({
        last_checkpoint: early,
        ignored_checkpoints: [
          { seq: 5, reason: expect.stringContaining("a row it covers was written after") },
        ],
      });
      expect(closed(lines)).toMatchObject({ ok: false, first_bad_seq: 3 });
    });

    it("counts a checkpoint after one signed by a key made after its retirement as after its retirement", () => {
      // Every row dated before the retirement, the forged checkpoint too: but k_new, made at the
      // retirement, signed seq 2 before it.
      const early = rowsAt([
        "2026-11-26T04:00:00.000Z",
        "2026-11-26T04:00:00.000Z",
        "2026-11-26T05:00:00.000Z",
      ]);
      const forge = signer(early);
      const byNew = forge(2, "2026-11-26T07:30:00.000Z", "k_new");
      const forged = forge(3, "2026-11-26T05:30:00.000Z", "k_old");
      const lines = [early[0], early[1], byNew, early[2], forged];
      expect(verify(lines, keys)).toMatchObject({
        last_checkpoint: byNew,
        ignored_checkpoints: [{ seq: 3, reason: expect.stringContaining("a key made after the retirement") }],
      });
      expect(closed(lines)).toMatchObject({ ok: false, first_bad_seq: 3 });
      // Before k_new signed anything, the same old-key checkpoint is old evidence.
      expect(closed([early[0], early[1], early[2], forged])).toMatchObject({
        ok: true,
        last_checkpoint: forged,
      });
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
