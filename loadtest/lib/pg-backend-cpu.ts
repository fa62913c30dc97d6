// PostgreSQL's own CPU time for a benchmark: what the server's backends for one database spent,
// read from /proc, so only when the server runs on this machine (and /proc shows its processes).
import { readFileSync } from "node:fs";
import { type Kysely, sql } from "kysely";

/** CPU time (user + system, ms) of each backend of `db`'s database, by pid; empty where /proc cannot tell. */
export async function pgBackendCpuMs<DB>(db: Kysely<DB>): Promise<Map<number, number>> {
  const { rows } = await sql<{ pid: number }>`
    select pid from pg_stat_activity where datname = current_database()`.execute(db);
  const cpu = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      // utime and stime, in clock ticks of 10 ms (USER_HZ is 100 on Linux).
      cpu.set(pid, (Number(fields[11]) + Number(fields[12])) * 10);
    } catch {
      // Not on this machine, or the backend ended between the query and the read.
    }
  }
  return cpu;
}

/** The CPU the backends spent between two readings (a backend that started in between counts whole). */
export function pgCpuBetween(before: Map<number, number>, after: Map<number, number>): number | undefined {
  if (after.size === 0) return undefined;
  let total = 0;
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0);
  return total;
}
