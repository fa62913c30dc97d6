// `vault audit verify` prints sentences that quote the file (a key id, a seq): a tampered export
// handed to an auditor must not drive their terminal (cursor moves, erased lines) into showing a
// verdict the exit code contradicts.
import { generateKeyPairSync, sign } from "node:crypto";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  checkpointSigningInput,
  type LedgerCheckpoint,
  type LedgerLine,
  type LedgerRow,
  rowHash,
  ZERO_HASH,
} from "@latch/shared/ledger/ledger-format";
import { afterEach, describe, expect, it, vi } from "vitest";
import { runAuditVerify, writeLedgerExport } from "./audit-ledger.command.ts";

/** Rows 1 to `count` of org_cut, each checkpointed seq followed by its checkpoint signed with `key`. */
function signedExport(count: number, checkpointed: number[]) {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const lines: LedgerLine[] = [];
  let prev = ZERO_HASH;
  for (let seq = 1; seq <= count; seq++) {
    const unhashed: Omit<LedgerRow, "hash"> = {
      type: "event",
      organisation_id: "org_cut",
      seq,
      prev_hash: prev,
      at: `2026-11-26T10:00:0${seq}.000Z`,
      environment: null,
      actor: "system",
      action: `e${seq}`,
      item_name: null,
      host: null,
      reason: null,
      detail: {},
      trace_id: null,
    };
    prev = rowHash(unhashed);
    lines.push({ ...unhashed, hash: prev });
    if (checkpointed.includes(seq)) {
      const unsigned: Omit<LedgerCheckpoint, "signature"> = {
        type: "checkpoint",
        organisation_id: "org_cut",
        seq,
        hash: prev,
        at: `2026-11-26T11:00:0${seq}.000Z`,
        key_id: "k1",
      };
      lines.push({
        ...unsigned,
        signature: sign(null, checkpointSigningInput(unsigned), privateKey).toString("base64url"),
      });
    }
  }
  const keys = {
    keys: [
      { key_id: "k1", alg: "Ed25519", public_key: publicKey.export({ format: "jwk" }).x, created_at: "" },
    ],
  };
  return { lines, keys };
}

/** Runs `vault audit verify` over `lines` (and the keys, written beside them). */
async function verifyLines(lines: LedgerLine[], keys: unknown) {
  const dir = mkdtempSync(join(tmpdir(), "latch-audit-verify-"));
  const file = join(dir, "export.jsonl");
  writeFileSync(file, lines.map((line) => `${JSON.stringify(line)}\n`).join(""));
  const keysFile = join(dir, "keys.json");
  writeFileSync(keysFile, JSON.stringify(keys));
  const printed: string[] = [];
  const code = await runAuditVerify(file, keysFile, (line) => printed.push(line));
  return { code, printed };
}

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

  it("holds for a whole export and names its organisation", async () => {
    const { lines, keys } = signedExport(5, [2, 5]);
    const { code, printed } = await verifyLines(lines, keys);
    expect(code).toBe(0);
    expect(printed[0]).toBe("chain holds: 5 rows of organisation org_cut, seq 1 to 5");
    expect(printed[1]).toContain("the last covers seq 5");
  });

  it("with --not-before, refuses an export cut back to an earlier checkpoint, which alone looks whole", async () => {
    const { lines, keys } = signedExport(5, [2, 5]);
    // Everything after the checkpoint of row 2: a chain that holds, ending in a valid checkpoint.
    const cut = lines.slice(0, lines.findIndex((line) => line.type === "checkpoint" && line.seq === 2) + 1);
    expect((await verifyLines(cut, keys)).code).toBe(0);
    const dir = mkdtempSync(join(tmpdir(), "latch-audit-verify-"));
    const file = join(dir, "export.jsonl");
    const keysFile = join(dir, "keys.json");
    writeFileSync(keysFile, JSON.stringify(keys));
    const run = async (exported: LedgerLine[], notBefore: string) => {
      writeFileSync(file, exported.map((line) => `${JSON.stringify(line)}\n`).join(""));
      const printed: string[] = [];
      const code = await runAuditVerify(file, keysFile, (line) => printed.push(line), {
        notBefore: new Date(notBefore),
      });
      return { code, printed };
    };
    // The reader knows the ledger holds a row written at 11:00:03, after the checkpoint of row 2 was
    // signed: any checkpoint covering that row was signed later, so the cut file is refused.
    const refused = await run(cut, "2026-11-26T11:00:03.000Z");
    expect(refused.code).toBe(1);
    expect(refused.printed.join("\n")).toContain(
      "the last checkpoint (seq 2) was signed at 2026-11-26T11:00:02.000Z",
    );
    expect((await run(lines, "2026-11-26T11:00:05.000Z")).code).toBe(0);
  });

  it("refuses an export cut short: its last rows are covered by no checkpoint", async () => {
    const { lines, keys } = signedExport(5, [2, 5]);
    // Rows 1 to 3: the checkpoint after row 2 holds, the closing one (after row 5) is gone.
    const cut = lines.slice(0, lines.findIndex((line) => line.type === "event" && line.seq === 3) + 1);
    const { code, printed } = await verifyLines(cut, keys);
    expect(code).toBe(1);
    expect(printed[0]).toBe("first bad seq 3");
    expect(printed[1]).toContain("the last signed seq is 2 and 1 row follows it unsigned");
    expect(printed[2]).toBe("the file's first line names organisation org_cut");
    expect(printed.join("\n")).not.toContain("chain holds");

    // Rows added after the closing checkpoint (anyone can hash a row) are not signed either.
    const more = signedExport(7, [2, 5]);
    const added = await verifyLines(more.lines, more.keys);
    expect(added.code).toBe(1);
    expect(added.printed[0]).toBe("first bad seq 6");
    expect(added.printed[1]).toContain("the last signed seq is 5 and 2 rows follow it unsigned");

    // No checkpoint at all.
    const none = signedExport(2, []);
    const unsigned = await verifyLines(none.lines, none.keys);
    expect(unsigned.code).toBe(1);
    expect(unsigned.printed[0]).toBe("first bad seq 1");
    expect(unsigned.printed[1]).toContain("no row is signed");
  });

  it("refuses an empty file: it is no ledger", async () => {
    const { keys } = signedExport(1, [1]);
    const { code, printed } = await verifyLines([], keys);
    expect(code).toBe(1);
    expect(printed).toEqual(["first bad seq 1", "the file holds no rows: it is not a ledger export"]);
  });

  it("names a checkpoint a retired key signed after its retirement as ignored, and refuses an export it closes", async () => {
    const { lines, keys } = signedExport(5, [2, 5]);
    // k1 retired between the checkpoint of seq 2 (11:00:02) and that of seq 5 (11:00:05).
    const retired = { keys: keys.keys.map((key) => ({ ...key, retired_at: "2026-11-26T11:00:03.000Z" })) };
    const { code, printed } = await verifyLines(lines, retired);
    expect(code).toBe(1);
    expect(printed[0]).toMatch(
      /^checkpoint of seq 5 ignored \(it vouches for nothing\): signed by key k1 after its retirement/,
    );
    expect(printed[1]).toBe("first bad seq 3");
    expect(printed[2]).toContain("closing checkpoint (seq 5) vouches for nothing");
  });
});

// The keys document decides which checkpoint signatures count: fetched over plain http or through a
// redirect, anyone on the path swaps in their own key and a forged ledger verifies.
describe("vault audit verify --keys URL", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  /** An export in a file, and a loopback server giving its keys at /keys.json and a 302 at /moved. */
  async function served() {
    const { lines, keys } = signedExport(2, [2]);
    const dir = mkdtempSync(join(tmpdir(), "latch-audit-keys-url-"));
    const file = join(dir, "export.jsonl");
    writeFileSync(file, lines.map((line) => `${JSON.stringify(line)}\n`).join(""));
    const server = createServer((req, res) => {
      if (req.url === "/keys.json") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(keys));
        return;
      }
      res.writeHead(302, { location: "/keys.json" });
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const close = () => new Promise<void>((resolve) => server.close(() => resolve()));
    return { file, base, close };
  }

  it("refuses a plain http URL to a name that is not loopback, before any request", async () => {
    const { lines } = signedExport(2, [2]);
    const dir = mkdtempSync(join(tmpdir(), "latch-audit-keys-url-"));
    const file = join(dir, "export.jsonl");
    writeFileSync(file, lines.map((line) => `${JSON.stringify(line)}\n`).join(""));
    const fetched = vi.spyOn(globalThis, "fetch");
    for (const url of [
      "http://audit.example.com/.well-known/latch-audit-keys.json",
      "HTTP://10.0.0.5/keys.json",
      "http://127.0.0.1.evil.example/keys.json",
    ]) {
      await expect(runAuditVerify(file, url, () => {})).rejects.toThrow(
        /^--keys: .* is plain http; give the keys document's https URL/,
      );
    }
    expect(fetched).not.toHaveBeenCalled();
  });

  it("reads the keys from a loopback http URL (a test's or a local service's)", async () => {
    const { file, base, close } = await served();
    try {
      const printed: string[] = [];
      expect(await runAuditVerify(file, `${base}/keys.json`, (line) => printed.push(line))).toBe(0);
      expect(printed[1]).toContain("checkpoints verified");
    } finally {
      await close();
    }
  });

  it("refuses a redirect rather than following it, naming --keys", async () => {
    const { file, base, close } = await served();
    try {
      await expect(runAuditVerify(file, `${base}/moved`, () => {})).rejects.toThrow(
        /^--keys: http:\/\/127\.0\.0\.1:\d+ answered with a redirect \(HTTP 302\), which is not followed/,
      );
    } finally {
      await close();
    }
  });
});

// `vault audit export --output FILE`: the ledger is written whole to a new owner-only file and
// renamed over FILE; FILE's old mode, a symlink at FILE and a failed export change nothing of that.
describe("vault audit export --output FILE", () => {
  const exported = ['{"seq":1}\n', '{"seq":2}\n'];
  async function* lines(failAfter?: number) {
    for (const [index, line] of exported.entries()) {
      if (index === failAfter) throw new Error("the vault closed mid-export");
      yield line;
    }
  }
  const mode = (path: string) => statSync(path).mode & 0o777;

  it("leaves an existing 0644 FILE owner-only with the export in it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "latch-audit-export-"));
    const file = join(dir, "ledger.jsonl");
    writeFileSync(file, "an older export\n");
    chmodSync(file, 0o644);
    await writeLedgerExport(file, lines());
    expect(readFileSync(file, "utf8")).toBe(exported.join(""));
    expect(mode(file)).toBe(0o600);
    expect(readdirSync(dir)).toEqual(["ledger.jsonl"]);
  });

  it("does not write through a symlink at FILE: the link is replaced, its target kept as it was", async () => {
    const dir = mkdtempSync(join(tmpdir(), "latch-audit-export-"));
    const target = join(dir, "someone-elses.txt");
    writeFileSync(target, "not yours\n");
    chmodSync(target, 0o644);
    const file = join(dir, "ledger.jsonl");
    symlinkSync(target, file);
    await writeLedgerExport(file, lines());
    expect(readFileSync(target, "utf8")).toBe("not yours\n");
    expect(lstatSync(file).isSymbolicLink()).toBe(false);
    expect(readFileSync(file, "utf8")).toBe(exported.join(""));
    expect(mode(file)).toBe(0o600);
  });

  it("leaves FILE as it was, and no half file beside it, when the export fails", async () => {
    const dir = mkdtempSync(join(tmpdir(), "latch-audit-export-"));
    const file = join(dir, "ledger.jsonl");
    writeFileSync(file, "an older export\n");
    await expect(writeLedgerExport(file, lines(1))).rejects.toThrow("the vault closed mid-export");
    expect(readFileSync(file, "utf8")).toBe("an older export\n");
    expect(readdirSync(dir)).toEqual(["ledger.jsonl"]);

    const fresh = join(dir, "new.jsonl");
    await expect(writeLedgerExport(fresh, lines(1))).rejects.toThrow();
    expect(existsSync(fresh)).toBe(false);
  });
});
