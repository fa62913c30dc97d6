// The ledger as an auditor meets it: the hosted API's export and verify, a row changed behind the
// trigger's back named at its seq by GET /api/audit/verify and by a real `vault audit verify`
// process (with the keys fetched from the service's well-known URL, and with another key), and the
// local vault's own chain exported by `vault audit export` and checked the same way.
import { spawn } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LedgerLine } from "@latch/shared/ledger/ledger-format";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Browser, type HostedHarness, readyOperator, startHosted } from "./hosted.ts";

const VAULT = new URL("../src/cli/vault.ts", import.meta.url).pathname;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function vault(args: string[], env: Record<string, string>, stdin = ""): Promise<Run> {
  const child = spawn(process.execPath, [VAULT, ...args], { env, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  child.stdin.end(stdin);
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
}

const parseLines = (text: string) =>
  text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as LedgerLine);

let h: HostedHarness;
let url: string;
let op: Browser;
let dir: string;
let cliEnv: Record<string, string>;
/** The hosted export before anything was tampered with. */
const good = () => join(dir, "hosted.jsonl");

beforeAll(async () => {
  h = await startHosted();
  url = await h.app.listen({ host: "127.0.0.1", port: 0 });
  op = await readyOperator(h, "ledger");
  dir = mkdtempSync(join(tmpdir(), "latch-ledger-cli-"));
  const { DATABASE_URL: _db, ...inherited } = process.env;
  cliEnv = { ...(inherited as Record<string, string>), DATA_DIR: join(dir, "vault"), LOG_LEVEL: "warn" };
});

afterAll(async () => {
  await h.close();
});

describe("the hosted ledger", () => {
  it("exports JSON Lines with a closing checkpoint, verifies, and names the seq of a row changed behind the trigger", async () => {
    for (const name of ["ONE_KEY", "TWO_KEY", "THREE_KEY"]) {
      const created = await op.request("POST", "/api/items", {
        name,
        value: "not-a-real-secret-value",
        environment: "staging",
        allowed_hosts: ["api.latch.test"],
      });
      expect(created.statusCode).toBe(201);
    }
    const exported = await op.request("GET", "/api/audit/ledger");
    expect(exported.statusCode).toBe(200);
    expect(exported.headers["content-type"]).toBe("application/jsonl; charset=utf-8");
    const lines = parseLines(exported.body);
    const rows = lines.filter((l) => l.type === "event");
    expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => i + 1));
    expect(lines.at(-1)).toMatchObject({ type: "checkpoint", seq: rows.length });
    const organisationId = rows[0]!.organisation_id;

    const verified = (await op.request("GET", "/api/audit/verify")).json();
    expect(verified).toMatchObject({
      ok: true,
      rows: rows.length,
      last_seq: rows.length,
      last_checkpoint: lines.at(-1),
    });
    expect(verified.first_bad_seq).toBeUndefined();

    const keysUrl = `${url}/.well-known/latch-audit-keys.json`;
    const keys = await fetch(keysUrl);
    expect(keys.status).toBe(200);
    const keysDocument = (await keys.json()) as { keys: Record<string, unknown>[] };
    expect(keysDocument.keys[0]).toMatchObject({
      alg: "Ed25519",
      key_id: (lines.at(-1) as { key_id: string }).key_id,
    });

    writeFileSync(good(), exported.body);
    const checked = await vault(["audit", "verify", good(), "--keys", keysUrl], cliEnv);
    expect(checked.code, checked.stderr).toBe(0);
    expect(checked.stdout).toContain(`chain holds: ${rows.length} rows`);
    expect(checked.stdout).toContain(`checkpoints verified; the last covers seq ${rows.length}`);
    const unkeyed = await vault(["audit", "verify", good()], cliEnv);
    expect(unkeyed.code).toBe(0);
    expect(unkeyed.stdout).toContain("checkpoint signatures were not checked");

    // The same key ids published with other keys: the checkpoint does not verify.
    const other = join(dir, "other-keys.json");
    writeFileSync(
      other,
      JSON.stringify({
        keys: keysDocument.keys.map((k: Record<string, unknown>) => ({
          ...k,
          public_key: generateKeyPairSync("ed25519").publicKey.export({ format: "jwk" }).x,
        })),
      }),
    );
    const wrongKey = await vault(["audit", "verify", good(), "--keys", other], cliEnv);
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stdout).toContain(`first bad seq ${rows.length}`);

    // A database superuser edits row 2 with the trigger off.
    await h.plane.database.db.transaction().execute(async (trx) => {
      await sql`set local session_replication_role = replica`.execute(trx);
      await sql`update audit_events set item_name = 'SOMETHING_ELSE' where organisation_id = ${organisationId} and seq = 2`.execute(
        trx,
      );
    });
    const found = (await op.request("GET", "/api/audit/verify")).json();
    expect(found).toMatchObject({ ok: false, first_bad_seq: 2, rows: rows.length });
    expect(found.problem).toContain("seq 2");

    const tampered = join(dir, "tampered.jsonl");
    writeFileSync(tampered, (await op.request("GET", "/api/audit/ledger")).body);
    const caught = await vault(["audit", "verify", tampered, "--keys", keysUrl], cliEnv);
    expect(caught.code).toBe(1);
    expect(caught.stdout.split("\n")[0]).toBe("first bad seq 2");
  });

  it("names the line of a file edited by hand, and refuses a keys file that is not one", async () => {
    const rows = parseLines((await op.request("GET", "/api/audit/ledger")).body);
    const edited = rows.map((line) =>
      line.type === "event" && line.seq === 3 ? { ...line, actor: "nobody" } : line,
    );
    const file = join(dir, "edited.jsonl");
    writeFileSync(file, edited.map((l) => JSON.stringify(l)).join("\n"));
    const run = await vault(["audit", "verify", file], cliEnv);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain("first bad seq 2"); // row 2 was already changed in the database
    const notJson = join(dir, "not-keys.json");
    writeFileSync(notJson, "<html>");
    const refused = await vault(["audit", "verify", file, "--keys", notJson], cliEnv);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("not a keys document");
  });

  it("resumes an export after since_seq and refuses a since_seq that is not a seq", async () => {
    const tail = parseLines((await op.request("GET", "/api/audit/ledger?since_seq=2")).body);
    expect(tail[0]).toMatchObject({ type: "event", seq: 3 });
    expect((await op.request("GET", "/api/audit/ledger?since_seq=-1")).statusCode).toBe(400);
    expect((await op.request("GET", "/api/audit/ledger?since_seq=abc")).statusCode).toBe(400);
  });
});

describe("the local vault's ledger", () => {
  it("is the same chain: vault audit export, then vault audit verify with the vault's published keys", async () => {
    for (const name of ["LOCAL_ONE", "LOCAL_TWO"]) {
      const stored = await vault(["set", name, "--host", "api.latch.test"], cliEnv, "a-local-value-1234\n");
      expect(stored.code, stored.stderr).toBe(0);
    }
    const file = join(dir, "local.jsonl");
    const exported = await vault(["audit", "export", "--output", file], cliEnv);
    expect(exported.code, exported.stderr).toBe(0);
    const lines = parseLines(readFileSync(file, "utf8"));
    expect(lines.filter((l) => l.type === "event").map((l) => l.seq)).toEqual([1, 2]);
    expect(lines.at(-1)).toMatchObject({ type: "checkpoint", seq: 2, organisation_id: "org_local" });

    // The local vault publishes its keys at the same well-known path; here from its key file.
    const { openAuditKeys } = await import("../src/audit/audit-keys.ts");
    const keysFile = join(dir, "local-keys.json");
    writeFileSync(keysFile, JSON.stringify((await openAuditKeys(join(dir, "vault"))).published()));
    const checked = await vault(["audit", "verify", file, "--keys", keysFile], cliEnv);
    expect(checked.code, checked.stdout + checked.stderr).toBe(0);
    expect(checked.stdout).toContain("chain holds: 2 rows");

    const cut = join(dir, "local-cut.jsonl");
    writeFileSync(cut, readFileSync(file, "utf8").split("\n").slice(1).join("\n"));
    const caught = await vault(["audit", "verify", cut, "--keys", keysFile], cliEnv);
    expect(caught.code).toBe(1);
  });
});
