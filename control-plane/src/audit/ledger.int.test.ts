// The ledger against a real database (PGlite, and PostgreSQL with DATABASE_URL): each row's hash
// recomputed from the documented canonical form, linkage, one chain per organisation, the trigger,
// tampering found at its seq, checkpoints, and two replicas appending at once.
import { createHash, generateKeyPairSync, randomUUID, sign } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { canonicalJson } from "@latch/shared/ledger/canonical-json";
import { type LedgerLine, type LedgerRow, ZERO_HASH } from "@latch/shared/ledger/ledger-format";
import { Kysely, PGliteDialect, sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import { isPostgresRun, newTestOrganisation, testDatabase } from "../../test/database.ts";
import { type OpenDatabase, openDatabase } from "../db/database.ts";
import { migrateTo, migrateToLatest } from "../db/migrate.ts";
import type { Database } from "../db/schema.ts";
import { type AuditRepo, createAuditRepo } from "./audit.repo.ts";
import {
  AuditKeysUnreadableError,
  auditKeysPath,
  auditSigningKey,
  openAuditKeys,
  rotateAuditKeys,
} from "./audit-keys.ts";
import { createLedgerRepo } from "./ledger.repo.ts";
import { createLedgerService, type LedgerService } from "./ledger.service.ts";
import { createLedgerVerifier, verifyingKeys } from "./ledger-verify.ts";

let database: OpenDatabase;
let audit: AuditRepo;
let ledger: LedgerService;
let dataDir: string;

beforeAll(async () => {
  database = await testDatabase();
  audit = createAuditRepo(database.db);
  dataDir = mkdtempSync(join(tmpdir(), "latch-ledger-"));
  ledger = await ledgerOn(database.db);
});

async function ledgerOn(db: Kysely<Database>): Promise<LedgerService> {
  const keys = await openAuditKeys(dataDir);
  return createLedgerService({
    repo: createLedgerRepo(db),
    signer: keys.signer,
    publishedKeys: keys.published,
    now: () => new Date(),
  });
}

async function exported(organisationId: string, sinceSeq = 0): Promise<LedgerLine[]> {
  const lines: LedgerLine[] = [];
  for await (const line of ledger.exportLedger(organisationId, sinceSeq)) lines.push(line);
  return lines;
}

const rowsOf = (lines: LedgerLine[]) => lines.filter((l): l is LedgerRow => l.type === "event");

/** As a third party would, from ARCHITECTURE.md alone: SHA-256 over the JCS of the row without hash. */
function recomputed(row: LedgerRow): string {
  const { hash: _hash, ...rest } = row;
  return createHash("sha256").update(canonicalJson(rest), "utf8").digest("hex");
}

/** Runs `fn` on one connection with triggers off: a database superuser editing behind the trigger. */
async function behindTheTrigger(fn: (trx: Kysely<Database>) => Promise<unknown>): Promise<void> {
  await database.db.transaction().execute(async (trx) => {
    await sql`set local session_replication_role = replica`.execute(trx);
    await fn(trx);
  });
}

describe("the audit ledger", () => {
  it("chains each organisation's rows from seq 1, and every hash recomputes from the canonical form", async () => {
    const org = await newTestOrganisation(database);
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "first" });
    await audit.insertAuditEvent({
      organisationId: org,
      environment: "production",
      actor: "agent:cli_1",
      action: "http_request",
      itemName: "ÉTÉ_KEY \u{1F600}",
      host: "api.example.com",
      // Text that slipped past the edge is kept, with U+FFFD for what PostgreSQL and JCS refuse.
      reason: "nul\u0000 and lone \ud800 surrogate",
      detail: {
        path: "/v1/x\u2028y",
        origin_status: 200,
        big: 1e21,
        small: 5e-324,
        fraction: 0.1 + 0.2,
        negative_zero: -0,
        nested: { z: [true, null, "\u0007"], a: "\u20ac" },
        "\ufb33": 1,
        "\r": 2,
      },
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
    });
    await audit.insertAuditEvent({
      organisationId: org,
      actor: "system",
      action: "third",
      traceId: "not-a-trace",
    });

    const rows = rowsOf(await exported(org));
    expect(rows.map((r) => r.seq)).toEqual([1, 2, 3]);
    expect(rows[0]!.prev_hash).toBe(ZERO_HASH);
    expect(rows[1]!.prev_hash).toBe(rows[0]!.hash);
    expect(rows[2]!.prev_hash).toBe(rows[1]!.hash);
    for (const row of rows) expect(recomputed(row)).toBe(row.hash);
    expect(rows[1]).toMatchObject({
      reason: "nul\ufffd and lone \ufffd surrogate",
      trace_id: "4bf92f3577b34da6a3ce929d0e0e4736",
      detail: { big: 1e21, small: 5e-324, fraction: 0.30000000000000004 },
    });
    expect(rows[2]!.trace_id).toBeNull();
    expect(rows[0]!.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect((await ledger.verify(org)).ok).toBe(true);
  });

  it("keeps organisations apart: each chain starts at seq 1, and a row moved across is found", async () => {
    const a = await newTestOrganisation(database);
    const b = await newTestOrganisation(database);
    for (let i = 0; i < 3; i++) {
      await audit.insertAuditEvent({ organisationId: a, actor: "system", action: `a${i}` });
      await audit.insertAuditEvent({ organisationId: b, actor: "system", action: `b${i}` });
    }
    const rowsA = rowsOf(await exported(a));
    const rowsB = rowsOf(await exported(b));
    expect(rowsA.map((r) => [r.seq, r.action])).toEqual([
      [1, "a0"],
      [2, "a1"],
      [3, "a2"],
    ]);
    expect(rowsB.map((r) => [r.seq, r.action])).toEqual([
      [1, "b0"],
      [2, "b1"],
      [3, "b2"],
    ]);
    expect(rowsB[0]!.prev_hash).toBe(ZERO_HASH);

    // b's row 2 pasted into a's file in place of a's row 2: the organisation gives it away.
    const verifier = createLedgerVerifier();
    for (const line of [rowsA[0]!, rowsB[1]!, rowsA[2]!]) verifier.push(line);
    expect(verifier.result()).toMatchObject({ ok: false, first_bad_seq: 2 });
  });

  it("refuses UPDATE, DELETE and TRUNCATE of the ledger and its checkpoints", async () => {
    const org = await newTestOrganisation(database);
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "kept" });
    await exported(org); // signs a checkpoint
    const refused = async (statement: Promise<unknown>) => {
      const error = await statement.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toMatchObject({ code: "42501" });
    };
    await refused(
      database.db
        .updateTable("audit_events")
        .set({ actor: "someone else" })
        .where("organisation_id", "=", org)
        .execute(),
    );
    await refused(database.db.deleteFrom("audit_events").where("organisation_id", "=", org).execute());
    await refused(sql`truncate audit_events`.execute(database.db));
    await refused(database.db.deleteFrom("audit_checkpoints").where("organisation_id", "=", org).execute());
    await refused(
      sql`update audit_checkpoints set signature = 'x' where organisation_id = ${org}`.execute(database.db),
    );
    // Naming another organisation in latch.delete_organisation opens nothing here.
    await refused(
      database.db.transaction().execute(async (trx) => {
        await sql`select set_config('latch.delete_organisation', 'org_other', true)`.execute(trx);
        await trx.deleteFrom("audit_events").where("organisation_id", "=", org).execute();
      }),
    );
    expect(rowsOf(await exported(org))).toHaveLength(1);
  });

  it("refuses a delete that names the organisation while it still exists, and any move of the head but forward", async () => {
    const org = await newTestOrganisation(database);
    for (let i = 1; i <= 3; i++)
      await audit.insertAuditEvent({ organisationId: org, actor: "system", action: `e${i}` });
    await exported(org); // signs a checkpoint
    const refused = async (statement: (trx: Kysely<Database>) => Promise<unknown>) => {
      const error = await database.db
        .transaction()
        .execute(async (trx) => {
          await sql`select set_config('latch.delete_organisation', ${org}, true)`.execute(trx);
          await statement(trx);
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error).toMatchObject({ code: "42501" });
    };
    // Cutting the chain's end and setting the head back, as its own organisation's deletion would.
    await refused((trx) =>
      trx.deleteFrom("audit_events").where("organisation_id", "=", org).where("seq", ">", 1).execute(),
    );
    await refused((trx) => trx.deleteFrom("audit_checkpoints").where("organisation_id", "=", org).execute());
    await refused((trx) =>
      trx.updateTable("audit_heads").set({ seq: 1 }).where("organisation_id", "=", org).execute(),
    );
    await refused((trx) =>
      trx
        .updateTable("audit_heads")
        .set({ seq: 4, prev_hash: ZERO_HASH })
        .where("organisation_id", "=", org)
        .execute(),
    );
    await refused((trx) => trx.deleteFrom("audit_heads").where("organisation_id", "=", org).execute());
    await refused((trx) => sql`truncate audit_heads`.execute(trx));
    const fresh = await newTestOrganisation(database);
    await refused((trx) =>
      trx
        .insertInto("audit_heads")
        .values({ organisation_id: fresh, seq: 7, prev_hash: ZERO_HASH, hash: ZERO_HASH, at: new Date() })
        .execute(),
    );
    expect(rowsOf(await exported(org))).toHaveLength(3);
    expect(await ledger.verify(org)).toMatchObject({ ok: true, rows: 3 });
  });

  it("deletes a whole organisation's ledger with the organisation, and nothing of another's", async () => {
    const doomed = await newTestOrganisation(database);
    const kept = await newTestOrganisation(database);
    await audit.insertAuditEvent({ organisationId: doomed, actor: "system", action: "x" });
    await audit.insertAuditEvent({ organisationId: kept, actor: "system", action: "y" });
    await exported(doomed);
    const { createOrgsRepo } = await import("../orgs/orgs.repo.ts");
    await createOrgsRepo(database.db).deleteOrganisation(doomed);
    const left = await database.db
      .selectFrom("audit_events")
      .select("organisation_id")
      .where("organisation_id", "in", [doomed, kept])
      .execute();
    expect(left.map((r) => r.organisation_id)).toEqual([kept]);
    expect(
      await database.db
        .selectFrom("audit_checkpoints")
        .selectAll()
        .where("organisation_id", "=", doomed)
        .execute(),
    ).toEqual([]);
    expect((await ledger.verify(kept)).ok).toBe(true);
  });

  it("never lets a deleted organisation's id be used again: its ledger cannot be deleted and made anew", async () => {
    // The review's laundering, as the app's role: delete the organisation (its ledger goes with it),
    // insert it again and append its rows from seq 1 less the one to hide, re-hashed.
    const org = await newTestOrganisation(database);
    for (const action of ["one", "EMBARRASSING", "three"])
      await audit.insertAuditEvent({ organisationId: org, actor: "system", action });
    await ledger.checkpointAll();
    const kept = rowsOf(await exported(org)).filter((row) => row.action !== "EMBARRASSING");
    const error = await database.db
      .transaction()
      .execute(async (trx) => {
        const copy = await trx
          .selectFrom("organisations")
          .selectAll()
          .where("id", "=", org)
          .executeTakeFirstOrThrow();
        await sql`select set_config('latch.delete_organisation', ${org}, true)`.execute(trx);
        await trx.deleteFrom("organisations").where("id", "=", org).execute();
        await trx.insertInto("organisations").values(copy).execute();
        let prevHash = ZERO_HASH;
        for (const [i, row] of kept.entries()) {
          const { hash: _hash, ...unhashed } = { ...row, seq: i + 1, prev_hash: prevHash };
          const hash = recomputed({ ...unhashed, hash: "" } as LedgerRow);
          if (i === 0) {
            await trx
              .insertInto("audit_heads")
              .values({ organisation_id: org, seq: 1, prev_hash: ZERO_HASH, hash, at: new Date(row.at) })
              .execute();
          } else {
            await sql`update audit_heads set seq = seq + 1, prev_hash = hash, hash = ${hash}
              where organisation_id = ${org}`.execute(trx);
          }
          await trx
            .insertInto("audit_events")
            .values({
              organisation_id: org,
              seq: i + 1,
              prev_hash: prevHash,
              hash,
              at: new Date(row.at),
              actor: row.actor,
              action: row.action,
              detail: JSON.stringify(row.detail),
            })
            .execute();
          prevHash = hash;
        }
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toMatchObject({ code: "42501", statement: "insert organisations" });
    // Refused at the re-insert, so the whole transaction is undone: the ledger is as it was.
    expect(rowsOf(await exported(org)).map((row) => row.action)).toEqual(["one", "EMBARRASSING", "three"]);
    expect(await ledger.verify(org)).toMatchObject({ ok: true, rows: 3, last_checkpoint: { seq: 3 } });

    // Deleted for real, the organisation goes with its rows and its id stays used.
    const { createOrgsRepo } = await import("../orgs/orgs.repo.ts");
    await createOrgsRepo(database.db).deleteOrganisation(org);
    expect(
      await database.db.selectFrom("audit_events").select("seq").where("organisation_id", "=", org).execute(),
    ).toEqual([]);
    const refused = async (statement: Promise<unknown>) => {
      const failure = await statement.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(failure).toMatchObject({ code: "42501" });
    };
    await refused(database.db.insertInto("organisations").values({ id: org, name: "Again" }).execute());
    // Nor renamed into it, nor freed by editing the list of deleted ids.
    const other = await newTestOrganisation(database);
    await refused(
      database.db.updateTable("organisations").set({ id: org }).where("id", "=", other).execute(),
    );
    await refused(database.db.deleteFrom("deleted_organisations").where("id", "=", org).execute());
    await refused(
      database.db
        .updateTable("deleted_organisations")
        .set({ id: "org_freed" })
        .where("id", "=", org)
        .execute(),
    );
    await refused(sql`truncate deleted_organisations`.execute(database.db));
    expect(
      await database.db.selectFrom("deleted_organisations").select("id").where("id", "=", org).execute(),
    ).toEqual([{ id: org }]);
  });

  it("trusts no checkpoint a published key did not sign as the start of the growth check", async () => {
    const org = await newTestOrganisation(database);
    for (let i = 1; i <= 3; i++)
      await audit.insertAuditEvent({ organisationId: org, actor: "system", action: `e${i}` });
    await exported(org); // a genuine checkpoint at seq 3
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "e4" });
    // Row 4 rewritten behind the trigger's back, and a checkpoint of it inserted (an insert is all
    // the app's role needs) so that the check would start after it.
    await behindTheTrigger((trx) =>
      trx
        .updateTable("audit_events")
        .set({ action: "rewritten" })
        .where("organisation_id", "=", org)
        .where("seq", "=", 4)
        .execute(),
    );
    const head = await createLedgerRepo(database.db).findHead(org);
    const genuine = (await createLedgerRepo(database.db).findLastCheckpoint(org))!;
    await database.db
      .insertInto("audit_checkpoints")
      .values({
        organisation_id: org,
        seq: 4,
        hash: head!.hash,
        at: new Date(),
        key_id: genuine.key_id,
        signature: sign(null, Buffer.from("forged"), generateKeyPairSync("ed25519").privateKey).toString(
          "base64url",
        ),
      })
      .execute();
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "e5" });

    const round = await ledger.checkpointAll();
    expect(round.refused).toBeGreaterThanOrEqual(1);
    await expect(
      ledger.signCheckpoint(org, (await createLedgerRepo(database.db).findHead(org))!),
    ).rejects.toMatchObject({
      code: "ledger_broken",
      message: expect.stringContaining("does not verify with key"),
    });
    expect((await createLedgerRepo(database.db).findLastCheckpoint(org))?.seq).toBe(4);
    expect(await ledger.verify(org)).toMatchObject({ ok: false, first_bad_seq: 4 });
  });

  it("finds a row changed, removed or re-hashed behind the trigger's back at its seq", async () => {
    const org = await newTestOrganisation(database);
    for (let i = 1; i <= 5; i++)
      await audit.insertAuditEvent({ organisationId: org, actor: "system", action: `e${i}` });
    expect(await ledger.verify(org)).toMatchObject({ ok: true, rows: 5, last_seq: 5 });

    await behindTheTrigger((trx) =>
      trx
        .updateTable("audit_events")
        .set({ reason: "edited" } as never)
        .where("organisation_id", "=", org)
        .where("seq", "=", 3)
        .execute(),
    );
    expect(await ledger.verify(org)).toMatchObject({ ok: false, first_bad_seq: 3, rows: 5, last_seq: 5 });

    // The edited row's own hash made to match: the next row's prev_hash no longer does.
    const third = rowsOf(await exported(org))[2]!;
    await behindTheTrigger((trx) =>
      trx
        .updateTable("audit_events")
        .set({ hash: recomputed(third) } as never)
        .where("organisation_id", "=", org)
        .where("seq", "=", 3)
        .execute(),
    );
    expect(await ledger.verify(org)).toMatchObject({ ok: false, first_bad_seq: 4 });
  });

  it("finds rows cut from the middle or the end of the chain", async () => {
    const org = await newTestOrganisation(database);
    for (let i = 1; i <= 4; i++)
      await audit.insertAuditEvent({ organisationId: org, actor: "system", action: `e${i}` });
    await behindTheTrigger((trx) =>
      trx.deleteFrom("audit_events").where("organisation_id", "=", org).where("seq", "=", 4).execute(),
    );
    expect(await ledger.verify(org)).toMatchObject({ ok: false, first_bad_seq: 4, last_seq: 3 });
    await behindTheTrigger((trx) =>
      trx.deleteFrom("audit_events").where("organisation_id", "=", org).where("seq", "=", 2).execute(),
    );
    expect(await ledger.verify(org)).toMatchObject({ ok: false, first_bad_seq: 2 });
  });

  it("finds a row put beyond the chain's head, which would silence the organisation's next append", async () => {
    const org = await newTestOrganisation(database);
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "e1" });
    const [first] = rowsOf(await exported(org));
    const extra = { ...first!, seq: 2, prev_hash: first!.hash, action: "forged", at: first!.at };
    const { hash: _hash, ...unhashed } = extra;
    const forged = { ...extra, hash: recomputed({ ...unhashed, hash: "" } as LedgerRow) };
    await behindTheTrigger((trx) =>
      trx
        .insertInto("audit_events")
        .values({
          organisation_id: org,
          seq: 2,
          prev_hash: forged.prev_hash,
          hash: forged.hash,
          at: new Date(forged.at),
          actor: forged.actor,
          action: forged.action,
          detail: JSON.stringify(forged.detail ?? {}),
        })
        .execute(),
    );
    expect(await ledger.verify(org)).toMatchObject({
      ok: false,
      first_bad_seq: 2,
      problem: expect.stringContaining("beyond the chain's head"),
    });
  });

  it("signs no export over a row put beyond the chain's head, nor over a chain cut at its end", async () => {
    const published = async () => verifyingKeys((await openAuditKeys(dataDir)).published());
    /** The offline check of an export, as `vault audit verify --keys` runs it. */
    const offline = async (lines: LedgerLine[]) => {
      const verifier = createLedgerVerifier({ keys: await published() });
      for (const line of lines) verifier.push(line);
      verifier.requireClosingCheckpoint();
      return verifier.result();
    };
    const repo = createLedgerRepo(database.db);

    // A row inserted after the head (an INSERT, which no trigger refuses): not appended, never signed.
    const org = await newTestOrganisation(database);
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "e1" });
    const [first] = rowsOf(await exported(org)); // a checkpoint at seq 1
    const extra = { ...first!, seq: 2, prev_hash: first!.hash, action: "forged" };
    const forged = { ...extra, hash: recomputed(extra) };
    await database.db
      .insertInto("audit_events")
      .values({
        organisation_id: org,
        seq: 2,
        prev_hash: forged.prev_hash,
        hash: forged.hash,
        at: new Date(forged.at),
        actor: forged.actor,
        action: forged.action,
        detail: JSON.stringify(forged.detail),
      })
      .execute();
    const lines = await exported(org);
    expect(lines.at(-1)).toMatchObject({ type: "event", seq: 2, action: "forged" });
    expect((await repo.findLastCheckpoint(org))?.seq).toBe(1);
    expect(await offline(lines)).toMatchObject({ ok: false, first_bad_seq: 2 });

    // Rows cut from the end behind the trigger's back: the rows left are not signed as the chain.
    const cut = await newTestOrganisation(database);
    await audit.insertAuditEvent({ organisationId: cut, actor: "system", action: "e1" });
    await exported(cut); // a checkpoint at seq 1
    for (let i = 2; i <= 3; i++)
      await audit.insertAuditEvent({ organisationId: cut, actor: "system", action: `e${i}` });
    await behindTheTrigger((trx) =>
      trx.deleteFrom("audit_events").where("organisation_id", "=", cut).where("seq", "=", 3).execute(),
    );
    const cutLines = await exported(cut);
    expect(cutLines.at(-1)).toMatchObject({ type: "event", seq: 2 });
    expect((await repo.findLastCheckpoint(cut))?.seq).toBe(1);
    expect(await offline(cutLines)).toMatchObject({ ok: false, first_bad_seq: 2 });
    await expect(
      ledger.signCheckpoint(cut, { seq: 2, hash: rowsOf(cutLines)[1]!.hash }),
    ).rejects.toMatchObject({
      code: "ledger_broken",
    });

    // A chain that holds is signed up to a row behind its head, when rows were appended since.
    const growing = await newTestOrganisation(database);
    for (let i = 1; i <= 3; i++)
      await audit.insertAuditEvent({ organisationId: growing, actor: "system", action: `e${i}` });
    const rows: LedgerLine[] = [];
    for await (const line of repo.exportLines(growing)) rows.push(line);
    const signed = await ledger.signCheckpoint(growing, { seq: 2, hash: rows[1]!.hash });
    expect(signed).toMatchObject({ seq: 2, hash: rows[1]!.hash });
  });

  it("signs no rewritten history whose checkpoints were deleted, once the plane had checked the chain", async () => {
    const org = await newTestOrganisation(database);
    for (let i = 1; i <= 3; i++)
      await audit.insertAuditEvent({ organisationId: org, actor: "system", action: `e${i}` });
    const before = await exported(org); // a checkpoint at seq 3
    expect(before.at(-1)).toMatchObject({ type: "checkpoint", seq: 3 });
    // Behind the triggers: every checkpoint deleted, seq 2 rewritten and the chain re-hashed from
    // it, the head set to match. The rows then hold from seq 1, as a first checkpoint would see them.
    const [, second, third] = rowsOf(before);
    const rewritten = { ...second!, action: "rewritten" };
    rewritten.hash = recomputed(rewritten);
    const rehashed = { ...third!, prev_hash: rewritten.hash };
    rehashed.hash = recomputed(rehashed);
    await behindTheTrigger(async (trx) => {
      await trx.deleteFrom("audit_checkpoints").where("organisation_id", "=", org).execute();
      for (const row of [rewritten, rehashed]) {
        await trx
          .updateTable("audit_events")
          .set({ action: row.action, prev_hash: row.prev_hash, hash: row.hash } as never)
          .where("organisation_id", "=", org)
          .where("seq", "=", row.seq)
          .execute();
      }
      await trx
        .updateTable("audit_heads")
        .set({ prev_hash: rehashed.prev_hash, hash: rehashed.hash } as never)
        .where("organisation_id", "=", org)
        .execute();
    });
    const repo = createLedgerRepo(database.db);
    await ledger.checkpointAll();
    expect(await repo.findLastCheckpoint(org)).toBeUndefined();
    const after = await exported(org);
    expect(after.at(-1)).toMatchObject({ type: "event", seq: 3, action: "e3" });
    expect(rowsOf(after)[1]).toMatchObject({ action: "rewritten" });
    expect(await repo.findLastCheckpoint(org)).toBeUndefined();
    const verifier = createLedgerVerifier({
      keys: verifyingKeys((await openAuditKeys(dataDir)).published()),
    });
    for (const line of after) verifier.push(line);
    verifier.requireClosingCheckpoint();
    expect(verifier.result()).toMatchObject({ ok: false, first_bad_seq: 1 });
  });

  it("signs no checkpoint over rows changed since the last one: a rewritten chain never comes out signed", async () => {
    const org = await newTestOrganisation(database);
    for (let i = 1; i <= 3; i++)
      await audit.insertAuditEvent({ organisationId: org, actor: "system", action: `e${i}` });
    await exported(org); // a checkpoint at seq 3
    const repo = createLedgerRepo(database.db);
    for (let i = 4; i <= 5; i++)
      await audit.insertAuditEvent({ organisationId: org, actor: "system", action: `e${i}` });
    await behindTheTrigger((trx) =>
      trx
        .updateTable("audit_events")
        .set({ action: "rewritten" })
        .where("organisation_id", "=", org)
        .where("seq", "=", 4)
        .execute(),
    );
    const round = await ledger.checkpointAll();
    expect(round.refused).toBeGreaterThanOrEqual(1);
    expect((await repo.findLastCheckpoint(org))?.seq).toBe(3);
    // The export comes out as it is, with no checkpoint signed over the change.
    const lines = await exported(org);
    expect(lines.at(-1)).toMatchObject({ type: "event", seq: 5 });
    expect((await repo.findLastCheckpoint(org))?.seq).toBe(3);
    // A chain whose rows after the checkpoint hold is signed as before.
    const clean = await newTestOrganisation(database);
    await audit.insertAuditEvent({ organisationId: clean, actor: "system", action: "ok" });
    await ledger.checkpointAll();
    expect((await repo.findLastCheckpoint(clean))?.seq).toBe(1);
  });

  it("signs a checkpoint at the end of an export, which verifies with the published key and fails with another", async () => {
    const org = await newTestOrganisation(database);
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "one" });
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "two" });
    const lines = await exported(org);
    const checkpoint = lines.at(-1)!;
    expect(checkpoint).toMatchObject({
      type: "checkpoint",
      organisation_id: org,
      seq: 2,
      hash: rowsOf(lines)[1]!.hash,
    });
    // A second export with nothing new signs nothing more; the stored checkpoint comes after its row.
    expect(await exported(org)).toEqual(lines);

    const published = (await openAuditKeys(dataDir)).published();
    const good = createLedgerVerifier({ keys: verifyingKeys(published) });
    for (const line of lines) good.push(line);
    expect(good.result()).toMatchObject({ ok: true, rows: 2, last_seq: 2, last_checkpoint: checkpoint });

    // The same key id, another key: the signature does not verify.
    const { publicKey } = generateKeyPairSync("ed25519");
    const other = {
      keys: published.keys.map((k) => ({ ...k, public_key: publicKey.export({ format: "jwk" }).x! })),
    };
    const bad = createLedgerVerifier({ keys: verifyingKeys(other) });
    for (const line of lines) bad.push(line);
    expect(bad.result()).toMatchObject({ ok: false, first_bad_seq: 2, last_checkpoint: null });

    // A checkpoint forged by another key over the real hash names a key nobody published.
    const forger = generateKeyPairSync("ed25519").privateKey;
    const forged = {
      ...checkpoint,
      key_id: "forged",
      signature: sign(null, Buffer.from("x"), forger).toString("base64url"),
    };
    const third = createLedgerVerifier({ keys: verifyingKeys(published) });
    for (const line of [...lines.slice(0, -1), forged]) third.push(line as LedgerLine);
    expect(third.result()).toMatchObject({ ok: false, first_bad_seq: 2 });
  });

  it("ends an export with the checkpoint an hourly round signed while it read, at its last row or beyond", async () => {
    const repo = createLedgerRepo(database.db);
    const keys = await openAuditKeys(dataDir);
    /**
     * Three rows, exported by a service whose `atLookup`th checkpoint lookup first runs
     * `meanwhile(org)` (the first is the export's own, the second the one before it signs).
     */
    async function racingExport(meanwhile: (org: string) => Promise<unknown>, atLookup = 1) {
      const org = await newTestOrganisation(database);
      for (let i = 1; i <= 3; i++)
        await audit.insertAuditEvent({ organisationId: org, actor: "system", action: `e${i}` });
      // A live ledger whose newest rows no checkpoint covers yet still verifies.
      expect(await ledger.verify(org)).toMatchObject({ ok: true, rows: 3, last_checkpoint: null });
      let lookups = 0;
      const racing = createLedgerService({
        repo: {
          ...repo,
          // The export has read its rows and looks for a checkpoint: the round runs now.
          async findLastCheckpoint(organisationId) {
            lookups += 1;
            if (lookups === atLookup) await meanwhile(organisationId);
            return repo.findLastCheckpoint(organisationId);
          },
          // The signer's look for the checkpoint it grows from.
          async findLastCheckpoints(organisationId, limit) {
            lookups += 1;
            if (lookups === atLookup) await meanwhile(organisationId);
            return repo.findLastCheckpoints(organisationId, limit);
          },
        },
        signer: keys.signer,
        publishedKeys: keys.published,
        now: () => new Date(),
      });
      const lines: LedgerLine[] = [];
      for await (const line of racing.exportLedger(org)) lines.push(line);
      const verifier = createLedgerVerifier({ keys: verifyingKeys(keys.published()) });
      for (const line of lines) verifier.push(line);
      verifier.requireClosingCheckpoint();
      return { lines, verified: verifier.result() };
    }
    /** The hourly round, for this organisation alone. */
    const hourlyRound = async (org: string) => ledger.signCheckpoint(org, (await repo.findHead(org))!);

    // The round signs the last row the export read.
    const atLast = await racingExport(hourlyRound);
    expect(atLast.lines.at(-1)).toMatchObject({ type: "checkpoint", seq: 3 });
    expect(atLast.verified).toMatchObject({ ok: true, rows: 3, last_seq: 3 });

    // Rows are appended and the round signs them, after the export read its rows, or while it
    // checks them before signing (its signature over seq 3 is then refused).
    const appendAndSign = async (org: string) => {
      for (let i = 4; i <= 5; i++)
        await audit.insertAuditEvent({ organisationId: org, actor: "system", action: `e${i}` });
      await hourlyRound(org);
    };
    for (const atLookup of [1, 2]) {
      const beyond = await racingExport(appendAndSign, atLookup);
      expect(beyond.lines.map((line) => [line.type, line.seq]).slice(-3), `lookup ${atLookup}`).toEqual([
        ["event", 4],
        ["event", 5],
        ["checkpoint", 5],
      ]);
      expect(beyond.verified).toMatchObject({ ok: true, rows: 5, last_seq: 5 });
    }
  });

  it("keeps verifying old checkpoints after the key is rotated", async () => {
    const org = await newTestOrganisation(database);
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "before rotation" });
    const before = await exported(org);
    const rotation = await rotateAuditKeys(dataDir);
    const rotated = await ledgerOn(database.db);
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "after rotation" });
    const lines: LedgerLine[] = [];
    for await (const line of rotated.exportLedger(org)) lines.push(line);
    expect(lines.slice(0, 2)).toEqual(before);
    expect(lines.at(-1)).toMatchObject({ type: "checkpoint", seq: 2, key_id: rotation.newKeyId });
    expect(await rotated.verify(org)).toMatchObject({ ok: true, rows: 2 });
    expect((await openAuditKeys(dataDir)).published().keys).toHaveLength(2);
  });

  it("passes over a checkpoint a retired key signs over rows after its retirement, and keeps its older ones", async () => {
    const keysDir = mkdtempSync(join(tmpdir(), "latch-ledger-retired-"));
    const keys = await openAuditKeys(keysDir);
    // A copy of the signing key taken before the rotation (a backup, a leaked Secret).
    const stolen = JSON.parse(readFileSync(auditKeysPath(keysDir), "utf8"));
    const service = createLedgerService({
      repo: createLedgerRepo(database.db),
      signer: keys.signer,
      publishedKeys: keys.published,
      now: () => new Date(),
    });
    const org = await newTestOrganisation(database);
    const repo = createLedgerRepo(database.db);
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "before rotation" });
    const before = await service.signCheckpoint(org, (await repo.findHead(org))!);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const rotation = await rotateAuditKeys(keysDir);
    await new Promise((resolve) => setTimeout(resolve, 20));
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "after rotation" });
    const thief = createLedgerService({
      repo,
      signer: { signingKey: () => auditSigningKey(stolen) },
      publishedKeys: keys.published,
      now: () => new Date(),
    });
    const forged = await thief.signCheckpoint(org, (await repo.findHead(org))!);
    expect(forged.key_id).toBe(before.key_id);
    expect(forged.key_id).not.toBe(rotation.newKeyId);
    // It vouches for nothing: seq 2 waits for a valid checkpoint, as a live ledger's newest rows do.
    expect(await service.verify(org)).toMatchObject({
      ok: true,
      last_checkpoint: before,
      ignored_checkpoints: [{ seq: 2, key_id: before.key_id }],
    });
    // The next valid checkpoint covers seq 2 through the chain.
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "later" });
    const next = await service.signCheckpoint(org, (await repo.findHead(org))!);
    expect(next.key_id).toBe(rotation.newKeyId);
    expect(await service.verify(org)).toMatchObject({ ok: true, rows: 3, last_checkpoint: next });
    // The published document says when that key was retired.
    expect(keys.published().keys.find((key) => key.key_id === before.key_id)).toHaveProperty("retired_at");
  });

  it("signs nothing with a key from memory when the key file cannot be read: the export goes out unsigned", async () => {
    const keysDir = mkdtempSync(join(tmpdir(), "latch-ledger-unreadable-"));
    const keys = await openAuditKeys(keysDir);
    const repo = createLedgerRepo(database.db);
    const service = createLedgerService({
      repo,
      signer: keys.signer,
      publishedKeys: keys.published,
      now: () => new Date(),
    });
    const org = await newTestOrganisation(database);
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "before" });
    // A rotation left a file this plane cannot read (a directory in its place: root reads a
    // root-owned 0600 file, the test may run as root).
    await rotateAuditKeys(keysDir);
    const path = auditKeysPath(keysDir);
    const rotated = readFileSync(path, "utf8");
    rmSync(path);
    mkdirSync(path);
    await expect(service.checkpointAll()).rejects.toBeInstanceOf(AuditKeysUnreadableError);
    const lines: LedgerLine[] = [];
    for await (const line of service.exportLedger(org)) lines.push(line);
    expect(lines.map((line) => line.type)).toEqual(["event"]);
    expect(await repo.findLastCheckpoint(org)).toBeUndefined();
    // Readable again: the new key signs, and the ledger verifies with the published keys.
    rmSync(path, { recursive: true });
    writeFileSync(path, rotated, { mode: 0o600 });
    await service.checkpointAll();
    const verifier = createLedgerVerifier({ keys: verifyingKeys(keys.published()) });
    for await (const line of service.exportLedger(org)) verifier.push(line);
    verifier.requireClosingCheckpoint();
    expect(verifier.result()).toMatchObject({ ok: true, rows: 1, last_checkpoint: { seq: 1 } });
    expect(verifier.result()).not.toHaveProperty("ignored_checkpoints");
  });

  it("keeps verifying a retired key's checkpoints and signs after the rotation with the new key", async () => {
    const keysDir = mkdtempSync(join(tmpdir(), "latch-ledger-retired-"));
    const keys = await openAuditKeys(keysDir);
    const service = createLedgerService({
      repo: createLedgerRepo(database.db),
      signer: keys.signer,
      publishedKeys: keys.published,
      now: () => new Date(),
    });
    const repo = createLedgerRepo(database.db);
    const org = await newTestOrganisation(database);
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "before rotation" });
    const before = await service.signCheckpoint(org, (await repo.findHead(org))!);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const rotation = await rotateAuditKeys(keysDir);
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "after rotation" });
    // The same service, not restarted, signs with the new key.
    const after = await service.signCheckpoint(org, (await repo.findHead(org))!);
    expect(after.key_id).toBe(rotation.newKeyId);
    expect(await service.verify(org)).toMatchObject({ ok: true, rows: 2, last_checkpoint: after });
    expect(before.key_id).not.toBe(after.key_id);
  });

  it("signs the hourly checkpoints for every head no checkpoint covers", async () => {
    const org = await newTestOrganisation(database);
    await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "hourly" });
    await ledger.checkpointAll();
    const checkpoint = await createLedgerRepo(database.db).findLastCheckpoint(org);
    expect(checkpoint).toMatchObject({ seq: 1 });
    expect((await ledger.verify(org)).last_checkpoint).toEqual(checkpoint);
  });

  it("signs every other head in the round however many ledgers it leaves unsigned", async () => {
    // More ledgers than one read of heads, each refused: its checkpoint names no published key.
    const refusedOrgs: string[] = [];
    for (let i = 0; i < 101; i++) {
      const org = await newTestOrganisation(database);
      await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "e1" });
      const { hash } = (await createLedgerRepo(database.db).findHead(org))!;
      await database.db
        .insertInto("audit_checkpoints")
        .values({
          organisation_id: org,
          seq: 1,
          hash,
          at: new Date(),
          key_id: "unpublished",
          signature: "AAAA",
        })
        .execute();
      await audit.insertAuditEvent({ organisationId: org, actor: "system", action: "e2" });
      refusedOrgs.push(org);
    }
    // A ledger that holds, whose id comes after all of theirs.
    const clean = `org_zzzz${randomUUID().replaceAll("-", "")}`;
    await database.db.insertInto("organisations").values({ id: clean, name: "Last" }).execute();
    await audit.insertAuditEvent({ organisationId: clean, actor: "system", action: "hourly" });
    const round = await ledger.checkpointAll();
    expect(await createLedgerRepo(database.db).findLastCheckpoint(clean)).toMatchObject({ seq: 1 });
    expect(round.refused).toBeGreaterThanOrEqual(refusedOrgs.length);
    expect(await createLedgerRepo(database.db).findLastCheckpoint(refusedOrgs[0]!)).toMatchObject({
      seq: 1,
      key_id: "unpublished",
    });
  });

  it("resumes an export after since_seq", async () => {
    const org = await newTestOrganisation(database);
    for (let i = 1; i <= 3; i++)
      await audit.insertAuditEvent({ organisationId: org, actor: "system", action: `e${i}` });
    const rest = await exported(org, 2);
    expect(rest.map((l) => [l.type, l.seq])).toEqual([
      ["event", 3],
      ["checkpoint", 3],
    ]);
  });

  it("appends from many connections at once without a gap or a fork", async () => {
    const org = await newTestOrganisation(database);
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        audit.insertAuditEvent({ organisationId: org, actor: "system", action: `c${i}` }),
      ),
    );
    const rows = rowsOf(await exported(org));
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(await ledger.verify(org)).toMatchObject({ ok: true, rows: 40 });
  });

  it.runIf(isPostgresRun())("keeps one chain when two replicas (two pools) append at once", async () => {
    const second = await openDatabase({
      databaseUrl: process.env.DATABASE_URL,
      dataDir: tmpdir(),
      migrate: false,
    });
    try {
      const org = await newTestOrganisation(database);
      const other = await newTestOrganisation(database);
      const replicas = [createAuditRepo(database.db), createAuditRepo(second.db)];
      await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          replicas[i % 2]!.insertAuditEvent({
            organisationId: i % 3 === 0 ? other : org,
            actor: `replica:${i % 2}`,
            action: `r${i}`,
          }),
        ),
      );
      const rows = rowsOf(await exported(org));
      expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
      expect(new Set(rows.map((r) => r.actor))).toEqual(new Set(["replica:0", "replica:1"]));
      expect(await ledger.verify(org)).toMatchObject({ ok: true, rows: 40 });
      expect(await ledger.verify(other)).toMatchObject({ ok: true, rows: 20 });
    } finally {
      await second.close();
    }
  });
});

describe("the cost and the history of the ledger", () => {
  it("appends in one database statement", async () => {
    const org = await newTestOrganisation(database);
    let statements = 0;
    const counted = database.db.withPlugin({
      transformQuery: (args) => {
        statements += 1;
        return args.node;
      },
      transformResult: async (args) => args.result,
    });
    await createAuditRepo(counted).insertAuditEvent({
      organisationId: org,
      actor: "system",
      action: "first",
    });
    await createAuditRepo(counted).insertAuditEvent({
      organisationId: org,
      actor: "system",
      action: "second",
    });
    expect(statements).toBe(2);
    expect(await ledger.verify(org)).toMatchObject({ ok: true, rows: 2 });
  });

  it("as the database's one writer, chains rows it hashes itself exactly as the database would", async () => {
    const org = await newTestOrganisation(database);
    let statements = 0;
    const counted = database.db.withPlugin({
      transformQuery: (args) => {
        statements += 1;
        return args.node;
      },
      transformResult: async (args) => args.result,
    });
    const sole = createAuditRepo(counted, { isSoleWriter: true });
    const event = (action: string) => ({
      organisationId: org,
      environment: "default",
      actor: "agent:k6",
      action,
      itemName: "ÉTÉ_KEY \u{1F600}",
      host: "api.example.com",
      reason: "nul\u0000 kept as U+FFFD",
      detail: { path: "/v1/x", origin_status: 200, fraction: 0.1 + 0.2, nested: { z: [true, null] } },
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
    });
    // The first append learns the head from the database; the next ones know it.
    await sole.insertAuditEvent(event("first"));
    await sole.insertAuditEvent(event("second"));
    // Sixteen at once: one at a time, each from the head the one before wrote.
    await Promise.all(Array.from({ length: 16 }, (_, i) => sole.insertAuditEvent(event(`burst-${i}`))));
    expect(statements).toBe(18);
    // Another writer after all (a transaction elsewhere): the known head is stale, the next append
    // finds out in its one statement and appends as the database computes it instead.
    await createAuditRepo(database.db).insertAuditEvent(event("elsewhere"));
    await sole.insertAuditEvent(event("after"));
    await sole.insertAuditEvent(event("after again"));

    const rows = rowsOf(await exported(org));
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
    for (const [i, row] of rows.entries()) {
      expect(recomputed(row)).toBe(row.hash);
      expect(row.prev_hash).toBe(i === 0 ? ZERO_HASH : rows[i - 1]!.hash);
      if (i > 0) expect(row.at >= rows[i - 1]!.at).toBe(true);
    }
    expect(rows.map((r) => r.action).slice(-3)).toEqual(["elsewhere", "after", "after again"]);
    expect(rows[1]).toMatchObject({
      reason: "nul\ufffd kept as U+FFFD",
      detail: { fraction: 0.30000000000000004 },
    });
    expect((await ledger.verify(org)).ok).toBe(true);
  });

  it("chains the rows written before the ledger existed, when the migration runs", async () => {
    const pglite = new PGlite();
    const db = new Kysely<Database>({ dialect: new PGliteDialect({ pglite }) });
    try {
      await migrateTo(db as unknown as Kysely<unknown>, "2026-11-25T1100-connect-states");
      await sql`insert into organisations (id, name) values ('org_old', 'Old'), ('org_older', 'Older')`.execute(
        db,
      );
      for (const [org, action] of [
        ["org_old", "a"],
        ["org_older", "x"],
        ["org_old", "b"],
        ["org_old", "c"],
      ]) {
        await sql`insert into audit_events (organisation_id, actor, action, detail, at)
          values (${org}, 'system', ${action}, '{"n": 1.5, "s": "é"}'::jsonb, '2026-01-02 03:04:05.678912+00')`.execute(
          db,
        );
      }
      await migrateToLatest(db as unknown as Kysely<unknown>);
      const old = await ledgerOn(db);
      const lines: LedgerLine[] = [];
      for await (const line of old.exportLedger("org_old")) lines.push(line);
      expect(rowsOf(lines).map((r) => [r.seq, r.action, r.at])).toEqual([
        [1, "a", "2026-01-02T03:04:05.678Z"],
        [2, "b", "2026-01-02T03:04:05.678Z"],
        [3, "c", "2026-01-02T03:04:05.678Z"],
      ]);
      for (const row of rowsOf(lines)) expect(recomputed(row)).toBe(row.hash);
      // The next append continues the chain from the migrated head.
      await createAuditRepo(db).insertAuditEvent({ organisationId: "org_old", actor: "system", action: "d" });
      expect(await old.verify("org_old")).toMatchObject({ ok: true, rows: 4 });
      expect(await old.verify("org_older")).toMatchObject({ ok: true, rows: 1 });
    } finally {
      await db.destroy();
    }
  });
});
