// The control plane's side of the egress proxies' spent-ticket table (migration
// 2026-11-26T0100): fencing a ticket whose Execute did not answer, and the store's own id.
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";

export interface SpentTicketsRepo {
  /**
   * Spends `id` as a proxy would before dialing (INSERT ... ON CONFLICT DO NOTHING): true when
   * this insert won, so no proxy has run the ticket or ever will; false when a proxy spent it first.
   */
  insertFence(id: string, expiresAt: Date): Promise<boolean>;
  /** The `store:` row the migration wrote, which proxies on this table report in GetInfo. */
  findStoreId(): Promise<string | undefined>;
}

export function createSpentTicketsRepo(db: Kysely<Database>): SpentTicketsRepo {
  return {
    async insertFence(id, expiresAt) {
      const result = await db
        .insertInto("egress_spent_tickets")
        .values({ id, expires_at: expiresAt })
        .onConflict((c) => c.column("id").doNothing())
        .executeTakeFirst();
      return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
    },
    async findStoreId() {
      const row = await db
        .selectFrom("egress_spent_tickets")
        .select("id")
        .where("id", "like", "store:%")
        .executeTakeFirst();
      return row?.id;
    },
  };
}
