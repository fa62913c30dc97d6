// Single sign-on in the database: each organisation's connection (its client secret sealed), the
// sign-ins in flight (taken once by a DELETE, bound to the browser's cookie), and the account a
// first sign-in of a new address makes, with its membership, in one transaction.
import { sha256Hex } from "@latch/shared/crypto/hash";
import { type Kysely, sql } from "kysely";
import type { Database, SsoConnectionRow, SsoStateRow } from "../db/schema.ts";
import { inAdvisoryLock } from "../db/transaction.ts";

export interface ConnectionWrite {
  organisationId: string;
  issuer: string;
  clientId: string;
  /** A new secret, sealed; undefined keeps the stored one. */
  secret?: { sealed: Uint8Array; keyId: string; last4: string };
  emailDomains: string[];
  defaultRole: string;
  requireSso: boolean;
  /** The token of a new connection's TXT records; an existing connection keeps its own. */
  domainToken: string;
  at: Date;
}

/** A connection taken for its proven domains' daily check. */
export interface DomainRecheckRow {
  organisation_id: string;
  verified_domains: string[];
  domain_token: string;
  domain_misses: Record<string, number>;
}

export function createSsoRepo(db: Kysely<Database>) {
  return {
    findConnection: (organisationId: string): Promise<SsoConnectionRow | undefined> =>
      db
        .selectFrom("sso_connections")
        .selectAll()
        .where("organisation_id", "=", organisationId)
        .executeTakeFirst(),

    /** The connection of the organisation with this slug, with the organisation's name. */
    findConnectionBySlug: (slug: string) =>
      db
        .selectFrom("sso_connections")
        .innerJoin("organisations", "organisations.id", "sso_connections.organisation_id")
        .selectAll("sso_connections")
        .select(["organisations.name as organisation_name", "organisations.slug"])
        .where("organisations.slug", "=", slug)
        .executeTakeFirst(),

    /** Every connection that lists `domain` and proved it, with its organisation's slug. */
    findConnectionsForDomain: (domain: string) =>
      db
        .selectFrom("sso_connections")
        .innerJoin("organisations", "organisations.id", "sso_connections.organisation_id")
        .select([
          "sso_connections.organisation_id",
          "organisations.slug",
          "organisations.name",
          "sso_connections.require_sso",
        ])
        .where((eb) => eb(eb.val(domain), "=", eb.fn.any("sso_connections.verified_domains")))
        .execute(),

    /**
     * The organisations of this operator that require single sign-on of their address (its domain,
     * proven by the organisation): there they act only in a session begun with that sign-on.
     */
    async findRequiringOrganisationIds(operatorId: string): Promise<string[]> {
      const rows = await db
        .selectFrom("sso_connections")
        .innerJoin("memberships", "memberships.organisation_id", "sso_connections.organisation_id")
        .innerJoin("operators", "operators.id", "memberships.operator_id")
        .select("sso_connections.organisation_id")
        .where("memberships.operator_id", "=", operatorId)
        .where("sso_connections.require_sso", "=", true)
        .where(
          sql<boolean>`lower(substring(operators.email from '[^@]*$')) = any(sso_connections.verified_domains)`,
        )
        .execute();
      return rows.map((row) => row.organisation_id);
    },

    /**
     * The organisations that require single sign-on of this member's address (by its domain, when
     * they proved it).
     */
    findRequiringMembership: (operatorId: string, domain: string) =>
      db
        .selectFrom("sso_connections")
        .innerJoin("organisations", "organisations.id", "sso_connections.organisation_id")
        .innerJoin("memberships", "memberships.organisation_id", "sso_connections.organisation_id")
        .select(["organisations.slug", "organisations.name"])
        .where("memberships.operator_id", "=", operatorId)
        .where("sso_connections.require_sso", "=", true)
        .where((eb) => eb(eb.val(domain), "=", eb.fn.any("sso_connections.verified_domains")))
        .orderBy("organisations.slug")
        .execute(),

    async upsertConnection(write: ConnectionWrite): Promise<void> {
      // A proof vouches for the provider it was made for: another issuer or client (an owner's own
      // provider, say) starts with no proven domain and a new token, so its records are read anew.
      const isSameProvider = sql<boolean>`(sso_connections.issuer = ${write.issuer} and sso_connections.client_id = ${write.clientId})`;
      const common = {
        issuer: write.issuer,
        client_id: write.clientId,
        email_domains: write.emailDomains,
        default_role: write.defaultRole,
        require_sso: write.requireSso,
        updated_at: write.at,
      };
      // What an edit keeps of the proofs (an insert starts with none).
      const proofs = {
        // A domain taken off the list stops counting at once; listed again, it is checked again.
        verified_domains: sql<
          string[]
        >`case when ${isSameProvider} then array(select d from unnest(sso_connections.verified_domains) as d where d = any(${write.emailDomains}::text[])) else '{}'::text[] end`,
        domain_token: sql<string>`case when ${isSameProvider} then sso_connections.domain_token else ${write.domainToken} end`,
        domain_misses: sql<string>`case when ${isSameProvider} then sso_connections.domain_misses else '{}'::jsonb end`,
      };
      const secret = write.secret
        ? {
            sealed_client_secret: write.secret.sealed,
            sealing_key_id: write.secret.keyId,
            client_secret_last4: write.secret.last4,
          }
        : undefined;
      if (secret) {
        await db
          .insertInto("sso_connections")
          .values({
            organisation_id: write.organisationId,
            ...common,
            verified_domains: [],
            domain_token: write.domainToken,
            ...secret,
            created_at: write.at,
          })
          .onConflict((c) => c.column("organisation_id").doUpdateSet({ ...common, ...proofs, ...secret }))
          .execute();
        return;
      }
      await db
        .updateTable("sso_connections")
        .set({ ...common, ...proofs })
        .where("organisation_id", "=", write.organisationId)
        .execute();
    },

    /**
     * Counts `domains` as proven, those of them the connection still lists, and only while it is
     * the connection whose token was checked (`token`): one removed and made again meanwhile has
     * another token, which the records found do not prove.
     */
    async updateDomainsVerified(organisationId: string, token: string, domains: string[]): Promise<boolean> {
      const proven = sql<
        string[]
      >`array(select distinct d from unnest(verified_domains || ${domains}::text[]) as d where d = any(email_domains) order by d)`;
      const result = await db
        .updateTable("sso_connections")
        // Proven again: the checks that missed its record before count no more.
        .set({
          verified_domains: proven,
          domain_misses: sql<string>`domain_misses - ${domains}::text[]`,
        })
        .where("organisation_id", "=", organisationId)
        .where("domain_token", "=", token)
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },

    /**
     * Takes up to `limit` connections whose proven domains were not checked since `before`, and
     * marks them checked `at` in the same statement: a replica running the same round at the same
     * time skips the rows this one locked, and finds them checked after. `only`: these
     * organisations' connections alone.
     */
    async claimDomainRechecks(
      at: Date,
      before: Date,
      limit: number,
      only?: readonly string[],
    ): Promise<DomainRecheckRow[]> {
      const scope = only === undefined ? sql`true` : sql`organisation_id = any(${[...only]}::text[])`;
      const result = await sql<DomainRecheckRow>`
        update sso_connections set domains_checked_at = ${at}
        where organisation_id in (
          select organisation_id from sso_connections
          where cardinality(verified_domains) > 0
            and (domains_checked_at is null or domains_checked_at < ${before})
            and ${scope}
          order by domains_checked_at nulls first
          limit ${limit}
          for update skip locked)
        returning organisation_id, verified_domains, domain_token, domain_misses`.execute(db);
      return result.rows;
    },

    /**
     * Keeps what one check found: the misses in a row of each proven domain, and `lapsed` taken
     * off the proven ones; only while it is the connection whose token was checked, with the
     * misses the check started from (an owner who proved a domain again meanwhile reset them).
     */
    async recordDomainRecheck(
      organisationId: string,
      read: { token: string; misses: Record<string, number> },
      misses: Record<string, number>,
      lapsed: string[],
    ): Promise<boolean> {
      const result = await db
        .updateTable("sso_connections")
        .set({
          domain_misses: JSON.stringify(misses),
          verified_domains: sql<
            string[]
          >`array(select d from unnest(verified_domains) as d where not (d = any(${lapsed}::text[])) order by d)`,
        })
        .where("organisation_id", "=", organisationId)
        .where("domain_token", "=", read.token)
        .where(sql<boolean>`domain_misses = ${JSON.stringify(read.misses)}::jsonb`)
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },

    async deleteConnection(organisationId: string): Promise<boolean> {
      const result = await db
        .deleteFrom("sso_connections")
        .where("organisation_id", "=", organisationId)
        .executeTakeFirst();
      return result.numDeletedRows === 1n;
    },

    async insertState(
      row: Omit<SsoStateRow, "state_hash" | "browser_hash"> & { state: string; browserToken: string },
      now: Date,
    ) {
      await db.deleteFrom("sso_states").where("expires_at", "<", now).execute();
      const { state, browserToken, ...rest } = row;
      await db
        .insertInto("sso_states")
        .values({ ...rest, state_hash: sha256Hex(state), browser_hash: sha256Hex(browserToken) })
        .execute();
    },

    /**
     * Takes the live sign-in of `state` started by the browser holding `browserToken`, once. A state
     * carried to another browser finds nothing and is left alone for its own.
     */
    takeState: (state: string, browserToken: string, now: Date): Promise<SsoStateRow | undefined> =>
      db
        .deleteFrom("sso_states")
        .where("state_hash", "=", sha256Hex(state))
        .where("browser_hash", "=", sha256Hex(browserToken))
        .where("expires_at", ">", now)
        .returningAll()
        .executeTakeFirst(),

    /** The operator with this address, and whether it is a member of `organisationId`. */
    findOperatorByEmail: (email: string, organisationId: string) =>
      db
        .selectFrom("operators")
        .leftJoin("memberships", (join) =>
          join
            .onRef("memberships.operator_id", "=", "operators.id")
            .on("memberships.organisation_id", "=", organisationId),
        )
        .select(["operators.id", "memberships.role"])
        .where("operators.email", "=", email)
        .executeTakeFirst(),

    /**
     * A new account for `email` and its membership of the organisation, together or not at all,
     * under the address's lock (the one an email-code sign-up takes): false when the address has
     * an account by then, which is then not touched.
     */
    insertOperatorWithMembership: (
      operator: { id: string; email: string },
      membership: { organisationId: string; role: string },
      at: Date,
    ): Promise<boolean> =>
      inAdvisoryLock(db, `email:${operator.email}`, async (trx) => {
        const taken = await trx
          .selectFrom("operators")
          .select("id")
          .where("email", "=", operator.email)
          .executeTakeFirst();
        if (taken) return false;
        await trx
          .insertInto("operators")
          .values({ id: operator.id, email: operator.email, created_at: at })
          .execute();
        await trx
          .insertInto("memberships")
          .values({
            organisation_id: membership.organisationId,
            operator_id: operator.id,
            role: membership.role,
            created_at: at,
          })
          .execute();
        return true;
      }),
  };
}

export type SsoRepo = ReturnType<typeof createSsoRepo>;
