// npm run bench:ledger: how many audit rows a second one organisation's ledger takes on PostgreSQL.
// Every agent call appends one row, and an organisation's rows are one hash chain: each append
// takes the organisation's row in audit_heads and holds it until its transaction commits (the WAL
// flushed), so appends of one organisation run one after another whatever the number of control
// planes. This measures that ceiling (the most calls a second one organisation can make) with
// `--concurrency` appenders on one organisation, then the same on as many organisations (one each),
// and PostgreSQL's CPU per append (its backends' CPU time from /proc: the server must run on this
// machine).
//
//   DATABASE_URL=postgres://... npm run bench:ledger -- [--concurrency 10] [--seconds 5]
import { parseArgs } from "node:util";
import { newId } from "@latch/shared/ids";
import { createAuditRepo } from "../control-plane/src/audit/audit.repo.ts";
import { openDatabase } from "../control-plane/src/db/database.ts";
import { pgBackendCpuMs, pgCpuBetween } from "./lib/pg-backend-cpu.ts";

const { values: args } = parseArgs({
  options: { concurrency: { type: "string", default: "10" }, seconds: { type: "string", default: "5" } },
});
const concurrency = Number(args.concurrency);
const seconds = Number(args.seconds);
const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) throw new Error("bench:ledger needs DATABASE_URL (a PostgreSQL on this machine)");

const database = await openDatabase({ databaseUrl, dataDir: "" });
const audit = createAuditRepo(database.db);
const backendCpuMs = () => pgBackendCpuMs(database.db);

async function appendFor(
  organisations: string[],
): Promise<{ rows: number; perSecond: number; pgCpuMs: number | undefined }> {
  const before = await backendCpuMs();
  const deadline = performance.now() + seconds * 1000;
  let rows = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      const organisationId = organisations[worker % organisations.length]!;
      while (performance.now() < deadline) {
        await audit.appendEvent({
          organisationId,
          actor: "system",
          action: "bench.ledger",
          detail: { worker },
        });
        rows++;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const after = await backendCpuMs();
  return { rows, perSecond: rows / elapsed, pgCpuMs: pgCpuBetween(before, after) };
}

async function newOrganisation(): Promise<string> {
  const id = newId("org");
  await database.db.insertInto("organisations").values({ id, name: "bench ledger" }).execute();
  return id;
}

const one = [await newOrganisation()];
const many = await Promise.all(Array.from({ length: concurrency }, newOrganisation));
await appendFor(one); // warm-up: connections, plans
for (const [label, organisations] of [
  ["one organisation", one],
  [`${concurrency} organisations`, many],
] as const) {
  const { rows, perSecond, pgCpuMs } = await appendFor(organisations);
  console.log(
    `${label}, ${concurrency} appenders: ${perSecond.toFixed(0)} rows/s (${rows} in ${seconds} s),` +
      ` PostgreSQL CPU ${pgCpuMs === undefined ? "- (not on this machine)" : `${(pgCpuMs / rows).toFixed(3)} ms`} per row`,
  );
}
await database.close();
