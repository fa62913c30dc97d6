// Need requests in the database. One answer wins by a conditional UPDATE (pending -> closed), and a
// new request is made under the organisation's request lock so spec 8's hourly count cannot race.
import type { Kysely } from "kysely";
import type { Database, NeedRequestRow } from "../db/schema.ts";
import {
  findRequestUsageSince,
  type RequestUsage,
  withOrganisationRequestLock,
} from "../limits/request-limit.repo.ts";

/**
 * A need request never expires, so an organisation whose agents keep asking could grow the inbox
 * without end: it lists the newest this many, as the pending approvals are listed.
 */
export const MAX_PENDING_NEEDS = 500;

/** A need request with the requesting client's name, when the agent is a client. */
export type NeedWithClient = NeedRequestRow & { client_label?: string | null };

export interface NeedsRepo {
  /** Runs `fn` in one transaction holding the organisation's request lock. */
  inOrganisationLock<T>(organisationId: string, fn: (repo: NeedsRepo) => Promise<T>): Promise<T>;
  /** Approval and collect requests since `since`, for spec 8's limit (call inside inOrganisationLock). */
  findRequestUsageSince(organisationId: string, since: Date): Promise<RequestUsage>;
  /** By host; a request without a host (null) by the name it asks for. */
  findPendingNeedOfAgent(scope: {
    organisationId: string;
    environment: string;
    host: string | null;
    suggestedName: string;
    agentId: string;
    /** Secret (collect) requests unless said. */
    kind?: "secret" | "connect";
  }): Promise<NeedRequestRow | undefined>;
  insertNeed(row: NeedRequestRow): Promise<void>;
  findNeedById(organisationId: string, id: string): Promise<NeedWithClient | undefined>;
  /** The inbox's pending requests, newest first, at most MAX_PENDING_NEEDS of them. */
  findPendingNeeds(organisationId: string): Promise<NeedWithClient[]>;
  /** pending -> `status`, only if still pending. True for the one caller that won. */
  /** Closes an agent's pending requests (its client was revoked); answers the rows it closed. */
  updateAgentNeedsClosed(organisationId: string, agentId: string, closedAt: Date): Promise<NeedRequestRow[]>;
  updateNeedClosed(
    organisationId: string,
    id: string,
    status: "fulfilled" | "denied" | "closed",
    closedAt: Date,
  ): Promise<boolean>;
  updateNeedItem(id: string, itemId: string): Promise<void>;
}

export function createNeedsRepo(db: Kysely<Database>): NeedsRepo {
  /** Need requests joined to the name of the client that asked (spec 2.5 client_name). */
  const selectNeeds = () =>
    db
      .selectFrom("need_requests")
      .leftJoin("clients", (join) =>
        join
          .onRef("clients.id", "=", "need_requests.agent_id")
          .onRef("clients.organisation_id", "=", "need_requests.organisation_id"),
      )
      .selectAll("need_requests")
      .select("clients.name as client_label");

  return {
    inOrganisationLock: (organisationId, fn) =>
      withOrganisationRequestLock(db, organisationId, (trx) => fn(createNeedsRepo(trx))),
    findRequestUsageSince: (organisationId, since) => findRequestUsageSince(db, organisationId, since),
    findPendingNeedOfAgent: (scope) =>
      db
        .selectFrom("need_requests")
        .selectAll()
        .where("organisation_id", "=", scope.organisationId)
        .where("environment", "=", scope.environment)
        .where((eb) =>
          scope.host === null
            ? eb.and([eb("host", "is", null), eb("suggested_name", "=", scope.suggestedName)])
            : eb("host", "=", scope.host),
        )
        .where("agent_id", "=", scope.agentId)
        .where("kind", "=", scope.kind ?? "secret")
        .where("status", "=", "pending")
        .executeTakeFirst(),
    async insertNeed(row) {
      await db.insertInto("need_requests").values(row).execute();
    },
    findNeedById: (organisationId, id) =>
      selectNeeds()
        .where("need_requests.organisation_id", "=", organisationId)
        .where("need_requests.id", "=", id)
        .executeTakeFirst(),
    findPendingNeeds: (organisationId) =>
      selectNeeds()
        .where("need_requests.organisation_id", "=", organisationId)
        .where("need_requests.status", "=", "pending")
        .orderBy("need_requests.created_at", "desc")
        .orderBy("need_requests.id", "desc")
        .limit(MAX_PENDING_NEEDS)
        .execute(),
    async updateNeedClosed(organisationId, id, status, closedAt) {
      const closed = await db
        .updateTable("need_requests")
        .set({ status, closed_at: closedAt })
        .where("organisation_id", "=", organisationId)
        .where("id", "=", id)
        .where("status", "=", "pending")
        .executeTakeFirst();
      return closed.numUpdatedRows === 1n;
    },
    updateAgentNeedsClosed: (organisationId, agentId, closedAt) =>
      db
        .updateTable("need_requests")
        .set({ status: "closed", closed_at: closedAt })
        .where("organisation_id", "=", organisationId)
        .where("agent_id", "=", agentId)
        .where("status", "=", "pending")
        .returningAll()
        .execute(),
    async updateNeedItem(id, itemId) {
      await db.updateTable("need_requests").set({ item_id: itemId }).where("id", "=", id).execute();
    },
  };
}
