// Operator sessions in the database: only the SHA-256 of the session token and of its CSRF token
// are stored; revoking is a conditional UPDATE.
import { randomBytes } from "node:crypto";
import { sha256Hex } from "@latch/shared/crypto/hash";
import { newId } from "@latch/shared/ids";
import type { Kysely } from "kysely";
import type { Database, OperatorSessionRow, VerifiedMethod } from "../db/schema.ts";

/**
 * How long a session that passed its email code but not the authenticator step lives: long enough
 * to wait out the authenticator's 15-minute lock and go on, never more; the next sign-in asks the
 * mailbox again (spec 3.3).
 */
export const PENDING_SESSION_MS = 30 * 60_000;

/** A live session and the operator's role in the organisation it acts in (null: none). */
export interface LiveSession {
  session: OperatorSessionRow;
  role: string | null;
  /**
   * The slug of the organisation the session acts in when that organisation requires single
   * sign-on of this operator's address and the session did not begin with it: it may not act there.
   */
  ssoRequiredSlug: string | null;
}

export interface NewSession {
  session: OperatorSessionRow;
  token: string;
  csrfToken: string;
}

export function createSessionsRepo(db: Kysely<Database>) {
  return {
    /**
     * A new session: pending (the second step still to pass), or, with `verified`, ready at once (a
     * passkey sign-in, which is both steps in one; single sign-on, whose provider owns them).
     */
    async insertSession(
      operatorId: string,
      organisationId: string | null,
      userAgent: string | undefined,
      now: Date,
      /** A whole sign-in, and when the person was last verified (null: not known, no step-up). */
      verified?: { method: VerifiedMethod; at: Date | null },
      /** A single sign-on: the session acts in this organisation only. */
      ssoOrganisationId?: string,
    ): Promise<NewSession> {
      const token = randomBytes(32).toString("base64url");
      const csrfToken = randomBytes(24).toString("base64url");
      const session = {
        id: newId("ses"),
        token_hash: sha256Hex(token),
        csrf_hash: sha256Hex(csrfToken),
        operator_id: operatorId,
        organisation_id: organisationId,
        is_mfa_passed: verified !== undefined,
        user_agent: userAgent?.slice(0, 200) ?? null,
        created_at: now,
        last_seen_at: now,
        revoked_at: null,
        verified_at: verified?.at ?? null,
        verified_method: verified?.method ?? null,
        // A new session has spent no authenticator step of its own (a sign-in's code is verified
        // by POST /api/auth/totp/verify, which records it).
        verified_totp_step: null,
        sso_organisation_id: ssoOrganisationId ?? null,
      };
      await db.insertInto("operator_sessions").values(session).execute();
      return { session, token, csrfToken };
    },
    /**
     * The live session a cookie's token belongs to, with the operator's role in the organisation
     * it acts in. A session whose operator is no longer a member there (removed, or left in another
     * browser) acts in no organisation: membership is read on every request, never remembered.
     */
    async findLiveSessionByToken(token: string, now: Date): Promise<LiveSession | undefined> {
      const row = await db
        .selectFrom("operator_sessions")
        .leftJoin("memberships", (join) =>
          join
            .onRef("memberships.organisation_id", "=", "operator_sessions.organisation_id")
            .onRef("memberships.operator_id", "=", "operator_sessions.operator_id"),
        )
        // "Require SSO" (DECISIONS "Passkeys and single sign-on"): the organisation's connection,
        // when it requires single sign-on of an address in its domains, those it proved
        // (sso/domain-records.ts): a domain merely listed is required of nobody.
        .innerJoin("operators", "operators.id", "operator_sessions.operator_id")
        .leftJoin("sso_connections", (join) =>
          join
            .onRef("sso_connections.organisation_id", "=", "operator_sessions.organisation_id")
            .on("sso_connections.require_sso", "=", true),
        )
        .leftJoin("organisations", "organisations.id", "sso_connections.organisation_id")
        .selectAll("operator_sessions")
        .select([
          "memberships.role",
          "operators.email",
          "sso_connections.verified_domains",
          "organisations.slug",
        ])
        .where("operator_sessions.token_hash", "=", sha256Hex(token))
        .where("operator_sessions.revoked_at", "is", null)
        .executeTakeFirst();
      if (!row) return undefined;
      // Past its email code but not its authenticator: it lives as long as a sign-in takes, so one
      // code read from a mailbox does not buy the second step (or a lock of the account) for ever.
      if (!row.is_mfa_passed && now.getTime() - row.created_at.getTime() > PENDING_SESSION_MS) {
        return undefined;
      }
      const { role, email, verified_domains: domains, slug, ...session } = row;
      const domain = email.slice(email.lastIndexOf("@") + 1);
      const isSsoRequired =
        Boolean(role) &&
        Array.isArray(domains) &&
        domains.includes(domain) &&
        session.sso_organisation_id !== session.organisation_id;
      // A single sign-on session acts in its own organisation or nowhere, whatever moved it.
      const isConfined =
        session.sso_organisation_id === null || session.sso_organisation_id === session.organisation_id;
      const actsThere = Boolean(role) && isConfined;
      return {
        session: { ...session, organisation_id: actsThere ? session.organisation_id : null },
        role: actsThere ? role : null,
        ssoRequiredSlug: isSsoRequired ? (slug ?? null) : null,
      };
    },
    async updateSessionSeen(id: string, now: Date) {
      await db.updateTable("operator_sessions").set({ last_seen_at: now }).where("id", "=", id).execute();
    },
    /**
     * The session proved its user (`method`, at `at`): past the second step, and fresh for a
     * step-up. `totpStep`: the authenticator code's time step, when that was the proof.
     */
    async updateSessionVerified(id: string, method: VerifiedMethod, at: Date, totpStep?: number) {
      await db
        .updateTable("operator_sessions")
        .set({
          is_mfa_passed: true,
          verified_at: at,
          verified_method: method,
          verified_totp_step: totpStep ?? null,
        })
        .where("id", "=", id)
        .where("revoked_at", "is", null)
        .execute();
    },
    /**
     * A pending session passed its second step: verified as updateSessionVerified records it, and
     * under a new token and CSRF token. Whoever knew the pending session's (the otp/verify answer, a
     * cookie planted in the operator's browser) must not hold the ready one: a session fixed before
     * the authenticator step would otherwise carry the operator's code to its planter. Answers the
     * new tokens, or undefined when the session ended or became ready meanwhile (nothing changed).
     */
    async updateSessionReady(
      id: string,
      method: VerifiedMethod,
      at: Date,
      totpStep?: number,
    ): Promise<{ token: string; csrfToken: string } | undefined> {
      const token = randomBytes(32).toString("base64url");
      const csrfToken = randomBytes(24).toString("base64url");
      const result = await db
        .updateTable("operator_sessions")
        .set({
          token_hash: sha256Hex(token),
          csrf_hash: sha256Hex(csrfToken),
          is_mfa_passed: true,
          verified_at: at,
          verified_method: method,
          verified_totp_step: totpStep ?? null,
        })
        .where("id", "=", id)
        .where("revoked_at", "is", null)
        .where("is_mfa_passed", "=", false)
        .executeTakeFirst();
      return result.numUpdatedRows === 1n ? { token, csrfToken } : undefined;
    },
    /**
     * The session acts in another organisation. A session begun with single sign-on never moves
     * out of its organisation (its provider vouches for that one alone): false, nothing changed.
     */
    async updateSessionOrganisation(id: string, organisationId: string | null): Promise<boolean> {
      const result = await db
        .updateTable("operator_sessions")
        .set({ organisation_id: organisationId })
        .where("id", "=", id)
        .where((eb) =>
          eb.or([
            eb("sso_organisation_id", "is", null),
            eb("sso_organisation_id", "=", organisationId ?? ""),
          ]),
        )
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    async updateSessionRevoked(id: string, now: Date): Promise<boolean> {
      const result = await db
        .updateTable("operator_sessions")
        .set({ revoked_at: now })
        .where("id", "=", id)
        .where("revoked_at", "is", null)
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    /** The operator a session (live or not) belongs to, or undefined for an unknown id. */
    async findSessionOperatorId(id: string): Promise<string | undefined> {
      const row = await db
        .selectFrom("operator_sessions")
        .select("operator_id")
        .where("id", "=", id)
        .executeTakeFirst();
      return row?.operator_id;
    },
    /** Ends every live session of the operator; how many. */
    async updateSessionsRevokedOf(operatorId: string, now: Date): Promise<number> {
      const result = await db
        .updateTable("operator_sessions")
        .set({ revoked_at: now })
        .where("operator_id", "=", operatorId)
        .where("revoked_at", "is", null)
        .executeTakeFirst();
      return Number(result.numUpdatedRows);
    },
    /** Ends every other live session of the operator (sign out everywhere else). */
    async updateOtherSessionsRevoked(operatorId: string, keepId: string, now: Date): Promise<number> {
      const result = await db
        .updateTable("operator_sessions")
        .set({ revoked_at: now })
        .where("operator_id", "=", operatorId)
        .where("id", "!=", keepId)
        .where("revoked_at", "is", null)
        .executeTakeFirst();
      return Number(result.numUpdatedRows);
    },
    /**
     * A member left or was removed: their sessions acting in the organisation move to `toId` (one
     * they still belong to, or none). Their access there ends with this update. A session that
     * organisation's single sign-on made is ended instead: it acts there alone, and its provider
     * vouches for no other organisation of the same person (sso-session.ts).
     */
    async updateSessionsLeavingOrganisation(
      operatorId: string,
      organisationId: string,
      toId: string | null,
      now: Date,
    ): Promise<void> {
      await db
        .updateTable("operator_sessions")
        .set({ revoked_at: now, organisation_id: null })
        .where("operator_id", "=", operatorId)
        .where("sso_organisation_id", "=", organisationId)
        .where("revoked_at", "is", null)
        .execute();
      await db
        .updateTable("operator_sessions")
        .set({ organisation_id: toId })
        .where("operator_id", "=", operatorId)
        .where("organisation_id", "=", organisationId)
        .where("sso_organisation_id", "is", null)
        .execute();
    },
    /** Each operator's first and last access through sessions acting in this organisation. */
    findAccessByOperator: (organisationId: string) =>
      db
        .selectFrom("operator_sessions")
        .select((eb) => [
          "operator_id",
          eb.fn.min("created_at").as("first_access_at"),
          eb.fn.max("last_seen_at").as("last_access_at"),
        ])
        .where("organisation_id", "=", organisationId)
        .groupBy("operator_id")
        .execute(),
    findSessionsInOrganisation: (organisationId: string) =>
      db
        .selectFrom("operator_sessions")
        .innerJoin("operators", "operators.id", "operator_sessions.operator_id")
        .select([
          "operator_sessions.id",
          "operator_sessions.operator_id",
          "operators.email",
          "operator_sessions.user_agent",
          "operator_sessions.created_at",
          "operator_sessions.last_seen_at",
          "operator_sessions.is_mfa_passed",
        ])
        .where("operator_sessions.organisation_id", "=", organisationId)
        .where("operator_sessions.revoked_at", "is", null)
        .orderBy("operator_sessions.created_at", "desc")
        .execute(),
  };
}

export type SessionsRepo = ReturnType<typeof createSessionsRepo>;
