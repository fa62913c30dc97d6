// Web Push subscriptions in the database: one row per operator and browser endpoint. An endpoint is
// never moved from one operator's row to another's: its URL is all another operator would need to
// take a device's row, and with it that device's notices (migration 2026-11-28T0100).
import { type Kysely, sql } from "kysely";
import type { Database } from "../db/schema.ts";

export interface PushSubscriptionRow {
  id: string;
  operator_id: string;
  endpoint: string;
  p256dh: string;
  auth: string;
  created_at: Date;
  last_pushed_at: Date | null;
  /** The session it was made in; null for one made before sessions were kept (pushed to as before). */
  session_id: string | null;
}

export interface PushRepo {
  /**
   * Stores the subscription; the operator's own subscription of that endpoint is replaced by this
   * one. Another operator's row of the same endpoint is left as it is.
   */
  upsertSubscription(row: PushSubscriptionRow): Promise<PushSubscriptionRow>;
  /**
   * The devices of `operatorIds` that may hear of `organisationId`'s requests: made in a session
   * still live, not one begun with another organisation's single sign-on, and, when the
   * organisation requires its single sign-on of the operator's address, one begun with it.
   */
  findSubscriptionsOf(operatorIds: readonly string[], organisationId: string): Promise<PushSubscriptionRow[]>;
  /** Deletes the operator's own subscription; false when it has none by that id. */
  deleteOwnSubscription(operatorId: string, id: string): Promise<boolean>;
  /** The push service said the endpoint is gone (404, 410). */
  deleteSubscription(id: string): Promise<void>;
  /** Keeps the operator's newest `keep` subscriptions, deleting the rest. */
  deleteOldestBeyond(operatorId: string, keep: number): Promise<void>;
  updatePushed(id: string, at: Date): Promise<void>;
}

export function createPushRepo(db: Kysely<Database>): PushRepo {
  return {
    async upsertSubscription(row) {
      return db
        .insertInto("push_subscriptions")
        .values(row)
        .onConflict((oc) =>
          oc.columns(["operator_id", "endpoint"]).doUpdateSet({
            id: row.id,
            p256dh: row.p256dh,
            auth: row.auth,
            created_at: row.created_at,
            last_pushed_at: null,
            session_id: row.session_id,
          }),
        )
        .returningAll()
        .executeTakeFirstOrThrow();
    },
    async findSubscriptionsOf(operatorIds, organisationId) {
      if (operatorIds.length === 0) return [];
      // A device signed out gets nothing: its session revoked (sign-out, ended by an administrator,
      // signed out everywhere) or gone. A session begun with an organisation's single sign-on acts
      // in that organisation alone (auth/sso-session.ts): its device hears of no other's requests,
      // or a provider run by a hostile owner could read another organisation's.
      // "Require SSO" as the session lookup judges it (auth/sessions.repo.ts): a member whose address
      // is in a domain the organisation proved acts there only in a session begun with its sign-on;
      // every route answers any other session 403 sso_required, so its device hears nothing either.
      return (
        db
          .selectFrom("push_subscriptions")
          .innerJoin("operators", "operators.id", "push_subscriptions.operator_id")
          .leftJoin("operator_sessions", "operator_sessions.id", "push_subscriptions.session_id")
          .selectAll("push_subscriptions")
          .where("push_subscriptions.operator_id", "in", [...operatorIds])
          .where((eb) =>
            eb.or([
              eb("operator_sessions.sso_organisation_id", "=", organisationId),
              eb.not(
                eb.exists(
                  eb
                    .selectFrom("sso_connections")
                    .select("sso_connections.organisation_id")
                    .where("sso_connections.organisation_id", "=", organisationId)
                    .where("sso_connections.require_sso", "=", true)
                    .where(
                      sql<boolean>`lower(substring(operators.email from '[^@]*$')) = any(sso_connections.verified_domains)`,
                    ),
                ),
              ),
            ]),
          )
          // A device that names no live session hears nothing (those made before sessions were
          // recorded were dropped: migration 2026-11-27T0900).
          .where("operator_sessions.id", "is not", null)
          .where("operator_sessions.revoked_at", "is", null)
          .where((eb) =>
            eb.or([
              eb("operator_sessions.sso_organisation_id", "is", null),
              eb("operator_sessions.sso_organisation_id", "=", organisationId),
            ]),
          )
          .execute()
      );
    },
    async deleteOwnSubscription(operatorId, id) {
      const deleted = await db
        .deleteFrom("push_subscriptions")
        .where("id", "=", id)
        .where("operator_id", "=", operatorId)
        .executeTakeFirst();
      return Number(deleted.numDeletedRows) > 0;
    },
    async deleteSubscription(id) {
      await db.deleteFrom("push_subscriptions").where("id", "=", id).execute();
    },
    async deleteOldestBeyond(operatorId, keep) {
      const kept = db
        .selectFrom("push_subscriptions")
        .select("id")
        .where("operator_id", "=", operatorId)
        .orderBy("created_at", "desc")
        .limit(keep);
      await db
        .deleteFrom("push_subscriptions")
        .where("operator_id", "=", operatorId)
        .where("id", "not in", kept)
        .execute();
    },
    async updatePushed(id, at) {
      await db.updateTable("push_subscriptions").set({ last_pushed_at: at }).where("id", "=", id).execute();
    },
  };
}
