// Connect states in the database: inserted at start, claimed once at the callback; and the agent
// a connect approves, read with its client row held for the callback's transaction.
import type { Kysely } from "kysely";
import type { ConnectStatesTable, Database } from "../db/schema.ts";

export type ConnectStateRow = Omit<ConnectStatesTable, "created_at">;

export interface ConnectRepo {
  /** Inserts a state; states that expired before `now` (used or not) are dropped on the way. */
  insertConnectState(row: ConnectStateRow, now: Date): Promise<void>;
  /**
   * Marks the state used and returns it, only while it is unused, unexpired and was started by
   * this session in this organisation: a conditional UPDATE, so a replayed or raced callback
   * finds nothing (single use across replicas).
   */
  updateConnectStateUsed(
    stateHash: string,
    binding: { organisationId: string; sessionId: string },
    now: Date,
  ): Promise<ConnectStateRow | undefined>;
  /**
   * The live agent (model client) `id` of the organisation in `environment`, its row locked
   * `FOR SHARE` until the transaction ends: a revoke (an UPDATE of that row) committed first is
   * seen, and one landing meanwhile waits, then revokes the approvals the transaction gave.
   */
  findLiveAgentForShare(
    organisationId: string,
    id: string,
    environment: string,
  ): Promise<{ id: string } | undefined>;
}

export function createConnectRepo(db: Kysely<Database>): ConnectRepo {
  return {
    async insertConnectState(row, now) {
      await db.deleteFrom("connect_states").where("expires_at", "<", now).execute();
      await db.insertInto("connect_states").values(row).execute();
    },
    async updateConnectStateUsed(stateHash, binding, now) {
      return db
        .updateTable("connect_states")
        .set({ used_at: now })
        .where("state_hash", "=", stateHash)
        .where("organisation_id", "=", binding.organisationId)
        .where("session_id", "=", binding.sessionId)
        .where("used_at", "is", null)
        .where("expires_at", ">", now)
        .returning([
          "state_hash",
          "organisation_id",
          "session_id",
          "provider",
          "item_id",
          "environment",
          "redirect_uri",
          "sealed_verifier",
          "sealing_key_id",
          "agent_client_id",
          "need_id",
          "expires_at",
          "used_at",
        ])
        .executeTakeFirst();
    },
    findLiveAgentForShare: (organisationId, id, environment) =>
      db
        .selectFrom("clients")
        .select("id")
        .where("organisation_id", "=", organisationId)
        .where("id", "=", id)
        .where("kind", "=", "model")
        .where("environment", "=", environment)
        .where("revoked_at", "is", null)
        .forShare()
        .executeTakeFirst(),
  };
}
