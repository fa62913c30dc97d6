// Single use of tickets: a ticket id is spent the first time any proxy replica sees it.
import pg from "pg";

export interface ReplayStore {
  /** True when `id` was unspent and is now spent; false when it had been spent before. */
  spend(id: string, expiresAtMs: number): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * One replica's memory. Enough when a single proxy serves the tickets (npm start, vault serve);
 * entries are kept until the ticket would have expired anyway, then swept.
 */
export function createMemoryReplayStore(now: () => number = Date.now): ReplayStore {
  const spent = new Map<string, number>();
  let lastSweep = now();
  return {
    async spend(id, expiresAtMs) {
      const t = now();
      if (t - lastSweep > 10_000) {
        for (const [key, expiry] of spent) if (expiry < t) spent.delete(key);
        lastSweep = t;
      }
      if (spent.has(id)) return false;
      spent.set(id, expiresAtMs);
      return true;
    },
    async close() {
      spent.clear();
    },
  };
}

/**
 * Shared across replicas through PostgreSQL: the primary key makes the first INSERT win, so two
 * replicas handed the same ticket at the same instant cannot both spend it. Give the proxy a
 * database role that can touch this one table only.
 */
export async function createPostgresReplayStore(connectionString: string): Promise<ReplayStore> {
  const pool = new pg.Pool({ connectionString, max: 8 });
  try {
    await pool.query(
      `CREATE TABLE IF NOT EXISTS egress_spent_tickets (
         id text PRIMARY KEY,
         expires_at timestamptz NOT NULL
       )`,
    );
  } catch (error) {
    // Two replicas starting together race on IF NOT EXISTS; the loser sees the winner's table.
    const code = (error as { code?: string }).code;
    if (code !== "23505" && code !== "42P07") {
      await pool.end();
      throw error;
    }
  }
  let lastSweep = 0;
  return {
    async spend(id, expiresAtMs) {
      const result = await pool.query(
        "INSERT INTO egress_spent_tickets (id, expires_at) VALUES ($1, to_timestamp($2 / 1000.0)) ON CONFLICT (id) DO NOTHING",
        [id, expiresAtMs],
      );
      if (Date.now() - lastSweep > 60_000) {
        lastSweep = Date.now();
        pool
          .query("DELETE FROM egress_spent_tickets WHERE expires_at < now() - interval '1 minute'")
          .catch(() => {});
      }
      return result.rowCount === 1;
    },
    close: () => pool.end(),
  };
}
