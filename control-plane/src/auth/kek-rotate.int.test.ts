import { copyFileSync, cpSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newId } from "@latch/shared/ids";
import * as OTPAuth from "otpauth";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { testDatabase } from "../../test/database.ts";
import { runKekRotate } from "../cli/kek-rotate.command.ts";
import { type OpenDatabase, openDatabase } from "../db/database.ts";
import { addKeyringKey, loadOrCreateKeyring, stageKeyringKey } from "./kek.ts";
import { KekKeyringBehindError, refuseKeyringBehind, retireKek, rotateKek } from "./kek-rotate.ts";
import { KekRotationBusyError, withKekRotationLock } from "./kek-rotation-lock.repo.ts";
import { createOperatorsRepo } from "./operators.repo.ts";
import { createTotpService } from "./totp.service.ts";

let database: OpenDatabase;
const settleAtOnce = async () => undefined;
beforeAll(async () => {
  database = await testDatabase();
});

async function enrolledOperator(keyringFile: string, at: Date, on: OpenDatabase = database) {
  const id = newId("opr");
  await on.db
    .insertInto("operators")
    .values({ id, email: `${id}@example.test`, created_at: at })
    .execute();
  const totp = createTotpService({
    repo: createOperatorsRepo(on.db),
    keyring: loadOrCreateKeyring(keyringFile),
    now: () => at,
  });
  const { otpauth_url } = await totp.start(id, { isSessionReady: false, sessionId: "ses_enrol" });
  const app = OTPAuth.URI.parse(otpauth_url) as OTPAuth.TOTP;
  await totp.confirm(id, app.generate({ timestamp: at.getTime() }), {
    isSessionReady: false,
    sessionId: "ses_enrol",
  });
  return { id, app };
}

/** Whether `op`'s authenticator still verifies a minute later, read with the keyring in `file`. */
async function stillVerifies(
  file: string,
  op: { id: string; app: OTPAuth.TOTP },
  at: Date,
): Promise<{ usedBackupCode: boolean; totpStep?: number }> {
  const later = new Date(at.getTime() + 60_000);
  const totp = createTotpService({
    repo: createOperatorsRepo(database.db),
    keyring: loadOrCreateKeyring(file),
    now: () => later,
  });
  return totp.verify(op.id, op.app.generate({ timestamp: later.getTime() }));
}

async function keyIdOf(id: string): Promise<string | null> {
  const row = await database.db
    .selectFrom("operators")
    .select("totp_kek_id")
    .where("id", "=", id)
    .executeTakeFirstOrThrow();
  return row.totp_kek_id;
}

describe("vault kek-rotate", () => {
  // On PostgreSQL each operator or job rotates with its own copy of kek.json: a second rotation
  // must not re-wrap the rows under a key the first's copy never gets. (The embedded database is
  // held by one process at a time already, and PGlite's one session would re-enter the lock.)
  it.skipIf(!process.env.DATABASE_URL)(
    "refuses a second hosted rotation while one holds the database's rotation lock",
    async () => {
      let entered!: () => void;
      let finish!: () => void;
      const isIn = new Promise<void>((resolve) => (entered = resolve));
      const first = withKekRotationLock(database.db, async () => {
        entered();
        await new Promise<void>((resolve) => (finish = resolve));
        return "first";
      });
      await isIn;
      let secondRan = false;
      await expect(
        withKekRotationLock(database.db, async () => {
          secondRan = true;
        }),
      ).rejects.toBeInstanceOf(KekRotationBusyError);
      expect(secondRan).toBe(false);
      finish();
      await expect(first).resolves.toBe("first");
      // Released: the next rotation runs.
      await expect(withKekRotationLock(database.db, async () => "next")).resolves.toBe("next");
    },
  );

  it("re-wraps every authenticator secret under a new key and retires the old one", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "latch-kek-")), "kek.json");
    const at = new Date();
    const operators = [await enrolledOperator(file, at), await enrolledOperator(file, at)];
    const oldKey = loadOrCreateKeyring(file).currentId;
    const lines: string[] = [];
    const report = await rotateKek(createOperatorsRepo(database.db), file, (l) => lines.push(l), {
      settle: settleAtOnce,
    });
    expect(report.keyId).not.toBe(oldKey);
    expect(report.retired).toEqual([oldKey]);
    expect(report.rewrapped).toBeGreaterThanOrEqual(2);
    expect(lines.join("\n")).toContain(`new key-encryption key ${report.keyId}`);
    expect(readFileSync(file, "utf8")).not.toContain(oldKey);
    for (const op of operators) {
      expect(await keyIdOf(op.id)).toBe(report.keyId);
      // The secret still verifies: same authenticator, later code.
      await expect(stillVerifies(file, op, at)).resolves.toEqual({
        usedBackupCode: false,
        totpStep: Math.floor((at.getTime() + 60_000) / 30_000),
      });
    }
  });

  it("finishes an interrupted rotation instead of starting another", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "latch-kek-")), "kek.json");
    const op = await enrolledOperator(file, new Date());
    const oldKey = loadOrCreateKeyring(file).currentId;
    // Interrupted after the new key was written, before any row moved.
    const newKey = addKeyringKey(file).currentId;
    expect(await keyIdOf(op.id)).toBe(oldKey);
    const lines: string[] = [];
    const report = await rotateKek(createOperatorsRepo(database.db), file, (l) => lines.push(l), {
      settle: settleAtOnce,
    });
    expect(lines[0]).toContain(`finishing an interrupted rotation to ${newKey}`);
    expect(report.keyId).toBe(newKey);
    expect(await keyIdOf(op.id)).toBe(newKey);
    expect(report.retired).toEqual([oldKey]);
  });

  it("takes along a write that wrapped under the old key and committed after the first pass", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "latch-kek-")), "kek.json");
    const at = new Date();
    const op = await enrolledOperator(file, at);
    const oldKey = loadOrCreateKeyring(file).currentId;
    const wrappedEarly = await database.db
      .selectFrom("operators")
      .select(["totp_secret", "totp_kek_id"])
      .where("id", "=", op.id)
      .executeTakeFirstOrThrow();
    // An authenticator confirmed just as the rotation began: wrapped under the old key, committed
    // while the rotation waits between its passes.
    const lateWrite = async () => {
      await database.db.updateTable("operators").set(wrappedEarly).where("id", "=", op.id).execute();
    };
    const report = await rotateKek(createOperatorsRepo(database.db), file, () => undefined, {
      settle: lateWrite,
    });
    expect(report.retired).toEqual([oldKey]);
    expect(await keyIdOf(op.id)).toBe(report.keyId);
    await expect(stillVerifies(file, op, at)).resolves.toMatchObject({ usedBackupCode: false });
  });

  it("hosted, in three steps: no replica meets a secret under a key its copy of the file lacks", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "latch-kek-")), "kek.json");
    const at = new Date();
    const op = await enrolledOperator(file, at);
    const oldKey = loadOrCreateKeyring(file).currentId;
    const repo = createOperatorsRepo(database.db);
    const hosted = { isHosted: true, settle: settleAtOnce };
    // Nothing staged: refused, nothing moved (the replicas could not open the new key).
    await expect(rotateKek(repo, file, () => undefined, hosted)).rejects.toThrow(/no key is staged/);
    expect(await keyIdOf(op.id)).toBe(oldKey);

    const staged = stageKeyringKey(file);
    expect(stageKeyringKey(file)).toBe(staged);
    // A replica given the staged file still wraps under the old key and opens the staged one.
    const replicaFile = join(mkdtempSync(join(tmpdir(), "latch-kek-replica-")), "kek.json");
    copyFileSync(file, replicaFile);
    expect(loadOrCreateKeyring(replicaFile).currentId).toBe(oldKey);

    const switched = await rotateKek(repo, file, () => undefined, hosted);
    expect(switched).toMatchObject({ keyId: staged, retired: [] });
    expect(await keyIdOf(op.id)).toBe(staged);
    // The replica (not rolled yet) opens the re-wrapped secret with its staged copy.
    await expect(stillVerifies(replicaFile, op, at)).resolves.toMatchObject({ usedBackupCode: false });
    expect(readFileSync(file, "utf8")).toContain(oldKey);

    const retired = await retireKek(repo, file, () => undefined, settleAtOnce);
    expect(retired.retired).toEqual([oldKey]);
    expect(readFileSync(file, "utf8")).not.toContain(oldKey);
  });

  it("refuses every step, before it changes anything, with a copy of kek.json that lacks a key the rows are under", async () => {
    const isHosted = Boolean(process.env.DATABASE_URL);
    // On PGlite the command opens the service's own database in DATA_DIR: a fresh one, holding
    // only this test's operator, so the current file is also shown to pass.
    const dataDir = mkdtempSync(join(tmpdir(), "latch-kek-behind-"));
    let on = database;
    if (!isHosted) {
      cpSync(inject("pgliteTemplate"), join(dataDir, "pgdata"), { recursive: true });
      on = await openDatabase({ dataDir, migrate: false });
    }
    const file = join(mkdtempSync(join(tmpdir(), "latch-kek-")), "kek.json");
    const at = new Date();
    const op = await enrolledOperator(file, at, on);
    const repo = createOperatorsRepo(on.db);
    // An operator keeps a copy of kek.json; another rotation then moves the rows to a key it lacks.
    const stale = join(mkdtempSync(join(tmpdir(), "latch-kek-stale-")), "kek.json");
    copyFileSync(file, stale);
    const rotated = await rotateKek(repo, file, () => undefined, { settle: settleAtOnce });
    const keyOf = async () =>
      (
        await on.db
          .selectFrom("operators")
          .select("totp_kek_id")
          .where("id", "=", op.id)
          .executeTakeFirstOrThrow()
      ).totp_kek_id;
    expect(await keyOf()).toBe(rotated.keyId);

    await expect(refuseKeyringBehind(repo, stale)).rejects.toBeInstanceOf(KekKeyringBehindError);
    // The shared PostgreSQL database holds other tests' rows under other keys too: the key is named
    // among the first few only where this test's row is the only one.
    await expect(refuseKeyringBehind(repo, stale)).rejects.toThrow(
      new RegExp(`does not hold key .*${isHosted ? "" : rotated.keyId}.*Nothing was changed`),
    );
    if (!isHosted) {
      await expect(refuseKeyringBehind(repo, file)).resolves.toBeUndefined();
      await on.close();
    }

    const before = readFileSync(stale, "utf8");
    const env = {
      NODE_ENV: "test",
      DATA_DIR: dataDir,
      KEK_KEYRING_FILE: stale,
      ...(isHosted ? { DATABASE_URL: process.env.DATABASE_URL } : {}),
    };
    const steps = isHosted ? (["stage", "rotate", "retire"] as const) : (["rotate"] as const);
    for (const step of steps) {
      const lines: string[] = [];
      await expect(
        runKekRotate(env, (line) => lines.push(line), step),
        step,
      ).rejects.toThrow(/does not hold key .*Nothing was changed/);
      // Nothing staged, added or retired in the copy, and nothing re-wrapped.
      expect(readFileSync(stale, "utf8"), step).toBe(before);
      expect(lines, step).toEqual([]);
    }
    if (isHosted) expect(await keyOf()).toBe(rotated.keyId);
  });
});
