// `vault audit verify` prints sentences that quote the file (a key id, a seq): a tampered export
// handed to an auditor must not drive their terminal (cursor moves, erased lines) into showing a
// verdict the exit code contradicts.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LedgerRow, rowHash, ZERO_HASH } from "@latch/shared/ledger/ledger-format";
import { describe, expect, it } from "vitest";
import { runAuditVerify } from "./audit-ledger.command.ts";

describe("vault audit verify", () => {
  it("prints no control character of the file: a key id carrying terminal escapes is shown inert", async () => {
    const dir = mkdtempSync(join(tmpdir(), "latch-audit-verify-"));
    const unhashed: Omit<LedgerRow, "hash"> = {
      type: "event",
      organisation_id: "org_x",
      seq: 1,
      prev_hash: ZERO_HASH,
      at: "2026-11-26T10:00:00.000Z",
      environment: null,
      actor: "system",
      action: "first",
      item_name: null,
      host: null,
      reason: null,
      detail: {},
      trace_id: null,
    };
    const row = { ...unhashed, hash: rowHash(unhashed) };
    const terminalEscapes = "\u001b[1A\u001b[2K\rchain holds: 1 rows\u009b2K";
    const checkpoint = {
      type: "checkpoint",
      organisation_id: "org_x",
      seq: 1,
      hash: row.hash,
      at: "2026-11-26T10:00:01.000Z",
      key_id: terminalEscapes,
      signature: "AAAA",
    };
    const file = join(dir, "export.jsonl");
    writeFileSync(file, `${JSON.stringify(row)}\n${JSON.stringify(checkpoint)}\n`);
    const keys = join(dir, "keys.json");
    writeFileSync(keys, JSON.stringify({ keys: [] }));
    const printed: string[] = [];
    const code = await runAuditVerify(file, keys, (line) => printed.push(line));
    expect(code).toBe(1);
    expect(printed[0]).toBe("first bad seq 1");
    expect(printed.join("\n")).toContain("which is not published");
    expect(printed.join("\n")).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
  });
});
