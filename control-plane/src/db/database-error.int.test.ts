// Database errors leave the driver as DatabaseError: SQLSTATE and statement name, never the SQL,
// the parameters or the values PostgreSQL quotes in its message and detail.
import { newId } from "@latch/shared/ids";
import { sql } from "kysely";
import pino from "pino";
import { beforeAll, describe, expect, it } from "vitest";
import { newTestOrganisation, testDatabase } from "../../test/database.ts";
import { LogCapture } from "../../test/egress-harness.ts";
import { createAuditRepo } from "../audit/audit.repo.ts";
import type { OpenDatabase } from "./database.ts";
import { DatabaseError, statementName } from "./database-error.ts";

const CANARY = "CANARY_db_error_7f3a9c";

let database: OpenDatabase;
beforeAll(async () => {
  database = await testDatabase();
});

async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("the query succeeded");
}

/** The error as pino's default serializer writes it, which prints every enumerable field. */
function logged(error: unknown): string {
  const logs = new LogCapture();
  pino(logs).error({ err: error }, "query failed");
  return logs.text();
}

function expectNothingQuoted(error: unknown): void {
  const line = logged(error);
  expect(line).not.toContain(CANARY);
  // Kysely's SQL always quotes identifiers: `insert into "organisations"`, `from "audit_events"`.
  expect(line.toLowerCase()).not.toMatch(/into \\?"|from \\?"|\$1|::int|key \(/);
  expect(line).not.toMatch(/"(?:query|params|parameters|detail|where|internalQuery)"/);
}

describe("database errors carry their code and statement name only", () => {
  it("a unique violation (detail quotes the key) is 23505 in insert organisations", async () => {
    const id = newId("org");
    await database.db.insertInto("organisations").values({ id, name: "first" }).execute();
    const error = await failureOf(
      database.db.insertInto("organisations").values({ id, name: CANARY }).execute(),
    );
    expect(error).toBeInstanceOf(DatabaseError);
    expect(error).toMatchObject({ code: "23505", statement: "insert organisations" });
    expectNothingQuoted(error);
    expect(logged(error)).toContain("23505");
  });

  it("a foreign key violation from a real repo names audit_events, not the missing key", async () => {
    const error = await failureOf(
      createAuditRepo(database.db).insertAuditEvent({
        organisationId: `org_${CANARY}`,
        actor: "system",
        action: "test",
      }),
    );
    expect(error).toMatchObject({ code: "23503", statement: "insert audit_events" });
    expectNothingQuoted(error);
  });

  it("a NUL in a text parameter is 22021 in select audit_events", async () => {
    const org = await newTestOrganisation(database);
    const error = await failureOf(
      createAuditRepo(database.db).findAuditEvents(org, { itemName: `${CANARY}\u0000` }),
    );
    expect(error).toMatchObject({ code: "22021", statement: "select audit_events" });
    expectNothingQuoted(error);
  });

  it("a cast whose message quotes the value is 22P02 in a raw select", async () => {
    const error = await failureOf(sql`select ${CANARY}::int as n`.execute(database.db));
    expect(error).toMatchObject({ code: "22P02", statement: "raw select" });
    expect((error as Error).message).toBe("database error 22P02 in raw select");
    expectNothingQuoted(error);
  });

  it("inside a transaction: the error is safe and the transaction still rolls back", async () => {
    const id = newId("org");
    const error = await failureOf(
      database.db.transaction().execute(async (trx) => {
        await trx.insertInto("organisations").values({ id, name: "kept?" }).execute();
        await trx.insertInto("organisations").values({ id, name: CANARY }).execute();
      }),
    );
    expect(error).toMatchObject({ code: "23505", statement: "insert organisations" });
    expectNothingQuoted(error);
    const rows = await database.db.selectFrom("organisations").select("id").where("id", "=", id).execute();
    expect(rows).toEqual([]);
  });

  it("transactions that succeed still commit through the wrapped driver", async () => {
    const id = newId("org");
    await database.db.transaction().execute(async (trx) => {
      await trx.insertInto("organisations").values({ id, name: "committed" }).execute();
    });
    const rows = await database.db.selectFrom("organisations").select("name").where("id", "=", id).execute();
    expect(rows).toEqual([{ name: "committed" }]);
  });

  it("savepoints still reach the driver's own connection", async () => {
    const kept = newId("org");
    const undone = newId("org");
    const trx = await database.db.startTransaction().execute();
    await trx.insertInto("organisations").values({ id: kept, name: "kept" }).execute();
    const afterKept = await trx.savepoint("after_kept").execute();
    await afterKept.insertInto("organisations").values({ id: undone, name: "undone" }).execute();
    const rolledBack = await afterKept.rollbackToSavepoint("after_kept").execute();
    await rolledBack.releaseSavepoint("after_kept").execute();
    await trx.commit().execute();
    const rows = await database.db
      .selectFrom("organisations")
      .select("id")
      .where("id", "in", [kept, undone])
      .execute();
    expect(rows).toEqual([{ id: kept }]);
  });
});

describe("statementName", () => {
  it.each<[string, () => { compile(): Parameters<typeof statementName>[0] }, string]>([
    ["insert", () => database.db.insertInto("audit_events").values({} as never), "insert audit_events"],
    [
      "select with alias",
      () => database.db.selectFrom("organisations as o").select("o.id"),
      "select organisations",
    ],
    ["update", () => database.db.updateTable("organisations").set({ name: CANARY }), "update organisations"],
    [
      "delete",
      () => database.db.deleteFrom("organisations").where("id", "=", CANARY),
      "delete organisations",
    ],
    ["select without a table", () => database.db.selectNoFrom(sql<number>`1`.as("one")), "select"],
  ])("%s", (_case, build, expected) => {
    expect(statementName(build().compile())).toBe(expected);
  });

  it("raw sql is named by its first keyword only", () => {
    expect(statementName(sql`  update x set y = ${CANARY}`.compile(database.db))).toBe("raw update");
    expect(statementName(sql`${CANARY}`.compile(database.db))).toBe("raw");
  });
});
