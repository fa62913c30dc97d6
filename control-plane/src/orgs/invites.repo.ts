// Invitations in the database: only the SHA-256 of a token is stored; accepting and withdrawing
// are conditional UPDATEs, so of two uses of one token (two tabs, two replicas) exactly one wins.
import type { Kysely } from "kysely";
import type { Database, OrgInviteRow } from "../db/schema.ts";

/** An invitation with the names it is shown with: its organisation and who sent it. */
export type InviteWithNames = OrgInviteRow & {
  organisation_name: string;
  invited_by_email: string | null;
};

export interface InvitesRepo {
  insertInvite(invite: OrgInviteRow): Promise<void>;
  findInviteByTokenHash(tokenHash: string): Promise<InviteWithNames | undefined>;
  findInviteById(organisationId: string, id: string): Promise<InviteWithNames | undefined>;
  /** Invitations neither accepted nor withdrawn nor expired at `now`, newest first. */
  findPendingInvites(organisationId: string, now: Date): Promise<InviteWithNames[]>;
  /** Invitations sent since `since` and the oldest of them (50 a day per organisation). */
  countInvitesSince(organisationId: string, since: Date): Promise<{ count: number; oldest: Date | null }>;
  /** Marks it accepted, only if it is still open at `now`; true for the one caller that won. */
  updateInviteAccepted(id: string, operatorId: string, now: Date): Promise<boolean>;
  /** Marks it withdrawn, only if still open; true when it was. */
  updateInviteWithdrawn(organisationId: string, id: string, operatorId: string, now: Date): Promise<boolean>;
  /** Withdraws the open invitations a member sent (they are gone from the organisation). */
  updateInvitesWithdrawnBySender(
    organisationId: string,
    senderId: string,
    now: Date,
  ): Promise<WithdrawnInvite[]>;
  /** Withdraws the open invitations of one address (a new one replaces them). */
  updateInvitesWithdrawnForEmail(
    organisationId: string,
    email: string,
    operatorId: string,
    now: Date,
  ): Promise<WithdrawnInvite[]>;
}

/** An invitation a withdrawal closed, as its `invite_withdrawn` row names it. */
export interface WithdrawnInvite {
  id: string;
  email: string;
  role: string;
}

export function createInvitesRepo(db: Kysely<Database>): InvitesRepo {
  const selectInvites = () =>
    db
      .selectFrom("org_invites")
      .innerJoin("organisations", "organisations.id", "org_invites.organisation_id")
      .leftJoin("operators", "operators.id", "org_invites.invited_by")
      .selectAll("org_invites")
      .select(["organisations.name as organisation_name", "operators.email as invited_by_email"]);
  return {
    async insertInvite(invite) {
      await db.insertInto("org_invites").values(invite).execute();
    },
    findInviteByTokenHash: (tokenHash) =>
      selectInvites().where("org_invites.token_hash", "=", tokenHash).executeTakeFirst(),
    findInviteById: (organisationId, id) =>
      selectInvites()
        .where("org_invites.organisation_id", "=", organisationId)
        .where("org_invites.id", "=", id)
        .executeTakeFirst(),
    findPendingInvites: (organisationId, now) =>
      selectInvites()
        .where("org_invites.organisation_id", "=", organisationId)
        .where("org_invites.accepted_at", "is", null)
        .where("org_invites.withdrawn_at", "is", null)
        .where("org_invites.expires_at", ">", now)
        .orderBy("org_invites.created_at", "desc")
        .execute(),
    async countInvitesSince(organisationId, since) {
      const row = await db
        .selectFrom("org_invites")
        .select((eb) => [eb.fn.countAll<string>().as("n"), eb.fn.min("created_at").as("oldest")])
        .where("organisation_id", "=", organisationId)
        .where("created_at", ">", since)
        .executeTakeFirst();
      return { count: Number(row?.n ?? 0), oldest: (row?.oldest as Date | null | undefined) ?? null };
    },
    async updateInviteAccepted(id, operatorId, now) {
      const result = await db
        .updateTable("org_invites")
        .set({ accepted_at: now, accepted_by: operatorId })
        .where("id", "=", id)
        .where("accepted_at", "is", null)
        .where("withdrawn_at", "is", null)
        .where("expires_at", ">", now)
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    async updateInviteWithdrawn(organisationId, id, operatorId, now) {
      const result = await db
        .updateTable("org_invites")
        .set({ withdrawn_at: now, withdrawn_by: operatorId })
        .where("organisation_id", "=", organisationId)
        .where("id", "=", id)
        .where("accepted_at", "is", null)
        .where("withdrawn_at", "is", null)
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    updateInvitesWithdrawnBySender: (organisationId, senderId, now) =>
      db
        .updateTable("org_invites")
        .set({ withdrawn_at: now, withdrawn_by: senderId })
        .where("organisation_id", "=", organisationId)
        .where("invited_by", "=", senderId)
        .where("accepted_at", "is", null)
        .where("withdrawn_at", "is", null)
        .returning(["id", "email", "role"])
        .execute(),
    updateInvitesWithdrawnForEmail: (organisationId, email, operatorId, now) =>
      db
        .updateTable("org_invites")
        .set({ withdrawn_at: now, withdrawn_by: operatorId })
        .where("organisation_id", "=", organisationId)
        .where("email", "=", email)
        .where("accepted_at", "is", null)
        .where("withdrawn_at", "is", null)
        .returning(["id", "email", "role"])
        .execute(),
  };
}
