// The access snapshot's fetched names (audit.repo.ts findFetchedNames): the same answer as a DISTINCT
// over every fetch row, with and without the index built while serving, and on PostgreSQL a plan
// that probes that index once per distinct (actor, name) instead of reading every call ever made.
import { CompiledQuery, type Kysely, type KyselyPlugin, sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import { isPostgresRun, newTestOrganisation, testDatabase } from "../../test/database.ts";
import type { OpenDatabase } from "../db/database.ts";
import { buildOnlineIndexes } from "../db/online-indexes.ts";
import type { Database } from "../db/schema.ts";
import { type AuditEvent, createAuditRepo } from "./audit.repo.ts";

let database: OpenDatabase;

beforeAll(async () => {
  database = await testDatabase();
  await buildOnlineIndexes(database.db, isPostgresRun());
});

/** What the access snapshot answered before the skip scan: every fetch row read, made distinct. */
async function everyRowDistinct(db: Kysely<Database>, organisationId: string) {
  const rows = await db
    .selectFrom("audit_events")
    .select(["actor", "item_name"])
    .distinct()
    .where("organisation_id", "=", organisationId)
    .where("action", "in", ["http_request", "resolved"])
    .where("item_name", "is not", null)
    .orderBy("actor")
    .orderBy("item_name")
    .execute();
  const names = new Map<string, string[]>();
  for (const row of rows) names.set(row.actor, [...(names.get(row.actor) ?? []), row.item_name ?? ""]);
  return names;
}

/** The statements `db` runs while `work` does, as sent (SQL and parameters). */
async function statementsOf(db: Kysely<Database>, work: (db: Kysely<Database>) => Promise<unknown>) {
  const seen: CompiledQuery[] = [];
  const plugin: KyselyPlugin = {
    transformQuery: (args) => {
      seen.push(db.getExecutor().compileQuery(args.node, args.queryId));
      return args.node;
    },
    transformResult: async (args) => args.result,
  };
  await work(db.withPlugin(plugin));
  return seen;
}

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Actual Rows": number;
  "Actual Loops": number;
  "Rows Removed by Filter"?: number;
  "Rows Removed by Index Recheck"?: number;
  Plans?: PlanNode[];
}

/** Every node of an EXPLAIN (ANALYZE, FORMAT JSON) plan. */
function nodesOf(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodesOf)];
}

/** The plan of `statement` as it ran, with its audit_events rows read (kept or filtered out). */
async function ranPlan(db: Kysely<Database>, statement: CompiledQuery) {
  const explained = await db.executeQuery<{ "QUERY PLAN": unknown }>(
    CompiledQuery.raw(`explain (analyze, format json) ${statement.sql}`, [...statement.parameters]),
  );
  const cell = explained.rows[0]?.["QUERY PLAN"];
  const plan = (typeof cell === "string" ? JSON.parse(cell) : cell) as { Plan: PlanNode }[];
  const nodes = nodesOf(plan[0]!.Plan);
  const onAudit = nodes.filter((node) => node["Relation Name"] === "audit_events");
  // EXPLAIN shows the rows removed per loop, as it shows the rows kept.
  const rowsRead = onAudit.reduce(
    (sum, node) =>
      sum +
      (node["Actual Rows"] +
        (node["Rows Removed by Filter"] ?? 0) +
        (node["Rows Removed by Index Recheck"] ?? 0)) *
        node["Actual Loops"],
    0,
  );
  const indexes = onAudit.filter((node) => node["Actual Loops"] > 0).map((node) => node["Index Name"]);
  const skipScanRan = nodes.some(
    (node) => node["Node Type"] === "Recursive Union" && node["Actual Loops"] > 0,
  );
  return { rowsRead, indexes, skipScanRan };
}

/** Runs `work` in a transaction that is rolled back, whatever it did. */
async function rolledBack(db: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<void>) {
  const undo = new Error("rolled back");
  await expect(
    db.transaction().execute(async (trx) => {
      await work(trx);
      throw undo;
    }),
  ).rejects.toBe(undo);
}

describe("the names each actor fetched", () => {
  let organisationId: string;
  const longName = `${"\u{1F511}".repeat(255)}K`;

  beforeAll(async () => {
    organisationId = await newTestOrganisation(database);
    const otherOrganisation = await newTestOrganisation(database);
    const audit = createAuditRepo(database.db);
    const rows: AuditEvent[] = [
      { organisationId, actor: "agent:cli_a", action: "http_request", itemName: "API_KEY" },
      { organisationId, actor: "agent:cli_a", action: "http_request", itemName: "API_KEY" },
      { organisationId, actor: "agent:cli_a", action: "resolved", itemName: "B_KEY" },
      { organisationId, actor: "agent:cli_a", action: "http_request", itemName: "a" },
      { organisationId, actor: "agent:cli_a", action: "http_request", itemName: "Z" },
      { organisationId, actor: "agent:cli_a", action: "http_request", itemName: "z" },
      // A host-only call that found no credential has no name.
      { organisationId, actor: "agent:cli_a", action: "http_request" },
      { organisationId, actor: "trusted:cli_b", action: "resolved", itemName: "LINE\u2028SEPARATED" },
      { organisationId, actor: "trusted:cli_b", action: "resolved", itemName: "x'); drop table items; --" },
      { organisationId, actor: "trusted:cli_b", action: "resolved", itemName: "100%_\\" },
      { organisationId, actor: "trusted:cli_b", action: "resolved", itemName: longName },
      { organisationId, actor: "trusted:cli_b", action: "http_request", itemName: longName },
      // Other actions name credentials too, and are not fetches.
      { organisationId, actor: "agent:cli_a", action: "grant_requested", itemName: "NOT_FETCHED" },
      { organisationId, actor: "operator:op_one", action: "item_created", itemName: "API_KEY" },
      { organisationId, actor: "agent:cli_c", action: "need_requested", itemName: "WANTED" },
      { organisationId, actor: "agent:cli_c", action: "http_request", itemName: "" },
      { organisationId, actor: "agent:cli_d", action: "http_request", itemName: "ONLY" },
      // Another organisation's fetches, by the same actor string.
      { organisationId: otherOrganisation, actor: "agent:cli_a", action: "http_request", itemName: "THEIRS" },
    ];
    for (const row of rows) await audit.insertAuditEvent(row);
  });

  it("are what a DISTINCT over every fetch row answers", async () => {
    const fetched = await createAuditRepo(database.db).findFetchedNames(organisationId);
    expect(fetched).toEqual(await everyRowDistinct(database.db, organisationId));
    expect(fetched.get("agent:cli_a")).toEqual(expect.arrayContaining(["API_KEY", "B_KEY", "a", "Z", "z"]));
    expect(fetched.get("agent:cli_a")).toHaveLength(5);
    expect(fetched.get("trusted:cli_b")).toHaveLength(4);
    expect(fetched.get("trusted:cli_b")).toContain(longName);
    expect(fetched.get("trusted:cli_b")).toContain("LINE\u2028SEPARATED");
    expect(fetched.get("agent:cli_c")).toEqual([""]);
    expect(fetched.get("agent:cli_d")).toEqual(["ONLY"]);
    expect(fetched.has("operator:op_one")).toBe(false);
    expect([...fetched.values()].flat()).not.toContain("THEIRS");
    expect([...fetched.values()].flat()).not.toContain("NOT_FETCHED");
  });

  it("are none for an organisation that fetched nothing", async () => {
    const empty = await newTestOrganisation(database);
    expect(await createAuditRepo(database.db).findFetchedNames(empty)).toEqual(new Map());
  });

  it("are read by one statement, by the skip scan while the index is valid", async () => {
    const statements = await statementsOf(database.db, (db) =>
      createAuditRepo(db).findFetchedNames(organisationId),
    );
    expect(statements).toHaveLength(1);
    expect((await ranPlan(database.db, statements[0]!)).skipScanRan).toBe(true);
  });

  it("are the same, read once with DISTINCT, while the index is not valid (being built, or failed)", async () => {
    await rolledBack(database.db, async (trx) => {
      // What an unfinished CREATE INDEX CONCURRENTLY leaves, seen by this transaction only.
      await sql`update pg_catalog.pg_index set indisvalid = false
        where indexrelid = to_regclass('audit_events_fetched_names')`.execute(trx);
      const statements = await statementsOf(trx, (db) =>
        createAuditRepo(db).findFetchedNames(organisationId),
      );
      expect((await ranPlan(trx, statements[0]!)).skipScanRan).toBe(false);
      expect(await createAuditRepo(trx).findFetchedNames(organisationId)).toEqual(
        await everyRowDistinct(trx, organisationId),
      );
    });
  });
});

describe.runIf(isPostgresRun())("the fetched names of a long-lived organisation", () => {
  const ROWS = 200_000;
  const PAIRS = 20;

  it("cost one index probe per distinct (actor, name), not a read of every call row", async () => {
    const { db } = database;
    const organisationId = await newTestOrganisation(database);
    try {
      // 200,000 calls by 4 clients of 5 credentials, among other rows; the chain's hashes do not
      // matter to this read.
      await sql`
        insert into audit_events (organisation_id, seq, prev_hash, hash, actor, action, item_name)
        select ${organisationId}, n, repeat('0', 64), repeat('0', 64),
               'agent:cli_' || (n % 4), case when n % 7 = 0 then 'resolved' else 'http_request' end,
               'KEY_' || (n % ${PAIRS / 4}::int)
        from generate_series(1, ${ROWS}::int) n`.execute(db);
      await sql`
        insert into audit_events (organisation_id, seq, prev_hash, hash, actor, action, item_name)
        select ${organisationId}, n, repeat('0', 64), repeat('0', 64), 'agent:cli_0', 'grant_requested', 'OTHER'
        from generate_series(${ROWS + 1}::int, ${ROWS + 20_000}::int) n`.execute(db);
      await sql`analyze audit_events`.execute(db);

      const statements = await statementsOf(db, (scoped) =>
        createAuditRepo(scoped).findFetchedNames(organisationId),
      );
      const plan = await ranPlan(db, statements[0]!);
      // A probe reads one row; the whole read stays within a few per pair, against 200,000.
      expect(plan.rowsRead).toBeLessThan(PAIRS * 4);
      expect(plan.indexes).toContain("audit_events_fetched_names");

      const fetched = await createAuditRepo(db).findFetchedNames(organisationId);
      expect([...fetched.values()].flat()).toHaveLength(PAIRS);
      expect(fetched).toEqual(await everyRowDistinct(db, organisationId));
    } finally {
      // Ledger rows go only with their organisation (migrations 2026-11-26T2320-ledger-guards.ts).
      await db.transaction().execute(async (trx) => {
        await sql`select set_config('latch.delete_organisation', ${organisationId}, true)`.execute(trx);
        await trx.deleteFrom("organisations").where("id", "=", organisationId).execute();
      });
    }
  }, 120_000);
});
