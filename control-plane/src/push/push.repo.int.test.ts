// Which devices hear of an organisation's requests (push.repo.ts findSubscriptionsOf), against the
// real database: "Require SSO" shuts a member's email-code session out of every route of the
// organisation (403 sso_required), so a device subscribed from that session hears nothing of it
// either: no agent, item, method, host or path of a request the member may not open. And an
// endpoint is kept per operator: another operator subscribing it cannot take the device's row.
import { PGlite } from "@electric-sql/pglite";
import { newId } from "@latch/shared/ids";
import { Kysely, PGliteDialect, sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import { newTestOrganisation, testDatabase } from "../../test/database.ts";
import type { OpenDatabase } from "../db/database.ts";
import { migrateTo, migrateToLatest } from "../db/migrate.ts";
import { createPushRepo } from "./push.repo.ts";

let database: OpenDatabase;
beforeAll(async () => {
  database = await testDatabase();
});

/** An organisation with a single sign-on connection listing `listed`, of which `verified` are proven. */
async function ssoOrganisation(options: { requireSso: boolean; listed: string[]; verified: string[] }) {
  const organisationId = await newTestOrganisation(database);
  const at = new Date();
  await database.db
    .insertInto("sso_connections")
    .values({
      organisation_id: organisationId,
      issuer: "https://idp.example.test",
      client_id: "latch",
      sealed_client_secret: Buffer.from("sealed"),
      sealing_key_id: "sk_test",
      client_secret_last4: "cret",
      email_domains: options.listed,
      require_sso: options.requireSso,
      verified_domains: options.verified,
      created_at: at,
      updated_at: at,
    })
    .execute();
  return organisationId;
}

/** A member of `organisationIds` at `domain`, and one device of theirs per kind of session. */
async function memberWithDevices(domain: string, organisationIds: string[], ssoOrganisationId: string) {
  const operatorId = newId("opr");
  const at = new Date();
  await database.db
    .insertInto("operators")
    .values({ id: operatorId, email: `${operatorId}@${domain}`, created_at: at })
    .execute();
  for (const organisationId of organisationIds) {
    await database.db
      .insertInto("memberships")
      .values({ organisation_id: organisationId, operator_id: operatorId, role: "approver", created_at: at })
      .execute();
  }
  const device = async (sso: string | null | "no session") => {
    let sessionId: string | null = null;
    if (sso !== "no session") {
      sessionId = newId("ses");
      await database.db
        .insertInto("operator_sessions")
        .values({
          id: sessionId,
          token_hash: newId("ses"),
          csrf_hash: newId("ses"),
          operator_id: operatorId,
          organisation_id: sso ?? organisationIds[0]!,
          is_mfa_passed: true,
          user_agent: null,
          created_at: at,
          last_seen_at: at,
          revoked_at: null,
          sso_organisation_id: sso,
        })
        .execute();
    }
    const id = newId("psh");
    await database.db
      .insertInto("push_subscriptions")
      .values({
        id,
        operator_id: operatorId,
        endpoint: `https://push.latch.test/push/${id}`,
        p256dh: "p256dh",
        auth: "auth",
        created_at: at,
        last_pushed_at: null,
        session_id: sessionId,
      })
      .execute();
    return id;
  };
  return {
    operatorId,
    emailCode: await device(null),
    ssoHere: await device(ssoOrganisationId),
    beforeSessions: await device("no session"),
  };
}

async function devicesHearing(operatorId: string, organisationId: string): Promise<string[]> {
  const rows = await createPushRepo(database.db).findSubscriptionsOf([operatorId], organisationId);
  return rows.map((row) => row.id).sort();
}

describe("findSubscriptionsOf under Require SSO", () => {
  it("pushes to a member whose proven domain it requires only on devices of its own sign-on", async () => {
    const organisationId = await ssoOrganisation({
      requireSso: true,
      listed: ["corp.test"],
      verified: ["corp.test"],
    });
    const elsewhere = await newTestOrganisation(database);
    const member = await memberWithDevices("corp.test", [organisationId, elsewhere], organisationId);
    expect(await devicesHearing(member.operatorId, organisationId)).toEqual([member.ssoHere]);
    // The same member's email-code device still hears of an organisation that requires nothing.
    expect(await devicesHearing(member.operatorId, elsewhere)).toEqual([member.emailCode]);
  });

  it("pushes to every live device when the address is not required: another domain, one only listed, or no requirement", async () => {
    const cases = [
      { requireSso: true, listed: ["corp.test"], verified: ["corp.test"], domain: "other.test" },
      { requireSso: true, listed: ["corp.test"], verified: [], domain: "corp.test" },
      { requireSso: false, listed: ["corp.test"], verified: ["corp.test"], domain: "corp.test" },
    ];
    for (const { domain, ...connection } of cases) {
      const organisationId = await ssoOrganisation(connection);
      const member = await memberWithDevices(domain, [organisationId], organisationId);
      expect(await devicesHearing(member.operatorId, organisationId), JSON.stringify(connection)).toEqual(
        [member.emailCode, member.ssoHere].sort(),
      );
    }
  });
});

describe("devices subscribed before sessions were recorded", () => {
  it("hear nothing, and the migration drops them; a device of a live session stays", async () => {
    const pglite = new PGlite();
    const db = new Kysely<unknown>({ dialect: new PGliteDialect({ pglite }) });
    try {
      await migrateTo(db, "2026-11-27T0100-grant-call-ticket");
      await sql`insert into operators (id, email, created_at) values ('opr_old', 'old@example.test', now())`.execute(
        db,
      );
      await sql`insert into push_subscriptions (id, operator_id, endpoint, p256dh, auth, session_id, created_at)
        values ('psh_before', 'opr_old', 'https://push.latch.test/a', 'k', 'a', null, now()),
               ('psh_session', 'opr_old', 'https://push.latch.test/b', 'k', 'a', 'ses_1', now())`.execute(db);
      await migrateToLatest(db);
      const left = await sql<{ id: string }>`select id from push_subscriptions order by id`.execute(db);
      expect(left.rows.map((row) => row.id)).toEqual(["psh_session"]);
    } finally {
      await db.destroy();
    }
  });
});

describe("an endpoint another operator subscribes", () => {
  it("is a row of its own: the device's operator keeps its row, its keys, and its notices", async () => {
    const organisationId = await newTestOrganisation(database);
    const victim = await memberWithDevices("victim.test", [organisationId], organisationId);
    const taker = await memberWithDevices("taker.test", [organisationId], organisationId);
    const repo = createPushRepo(database.db);
    const victimRow = await database.db
      .selectFrom("push_subscriptions")
      .selectAll()
      .where("id", "=", victim.emailCode)
      .executeTakeFirstOrThrow();
    const takerSession = await database.db
      .selectFrom("push_subscriptions")
      .select("session_id")
      .where("id", "=", taker.emailCode)
      .executeTakeFirstOrThrow();

    const taken = await repo.upsertSubscription({
      id: newId("psh"),
      operator_id: taker.operatorId,
      endpoint: victimRow.endpoint,
      p256dh: "the taker's key",
      auth: "the taker's secret",
      created_at: new Date(),
      last_pushed_at: null,
      session_id: takerSession.session_id,
    });
    expect(taken.operator_id).toBe(taker.operatorId);
    expect(taken.id).not.toBe(victim.emailCode);
    const kept = await database.db
      .selectFrom("push_subscriptions")
      .selectAll()
      .where("id", "=", victim.emailCode)
      .executeTakeFirstOrThrow();
    expect(kept).toEqual(victimRow);
    expect(await devicesHearing(victim.operatorId, organisationId)).toContain(victim.emailCode);
  });

  it("subscribed again by its own operator, replaces that operator's row (one row, the new keys)", async () => {
    const organisationId = await newTestOrganisation(database);
    const member = await memberWithDevices("again.test", [organisationId], organisationId);
    const before = await database.db
      .selectFrom("push_subscriptions")
      .selectAll()
      .where("id", "=", member.emailCode)
      .executeTakeFirstOrThrow();
    const again = await createPushRepo(database.db).upsertSubscription({
      ...before,
      id: newId("psh"),
      p256dh: "a new key",
      auth: "a new secret",
      created_at: new Date(),
    });
    const rows = await database.db
      .selectFrom("push_subscriptions")
      .select(["id", "p256dh"])
      .where("endpoint", "=", before.endpoint)
      .execute();
    expect(rows).toEqual([{ id: again.id, p256dh: "a new key" }]);
  });

  it("the migration keeps every subscription, and lets two operators hold one endpoint", async () => {
    const pglite = new PGlite();
    const db = new Kysely<unknown>({ dialect: new PGliteDialect({ pglite }) });
    try {
      await migrateTo(db, "2026-11-27T1830-client-issuer");
      await sql`insert into operators (id, email, created_at)
        values ('opr_a', 'a@example.test', now()), ('opr_b', 'b@example.test', now())`.execute(db);
      await sql`insert into push_subscriptions (id, operator_id, endpoint, p256dh, auth, session_id, created_at)
        values ('psh_a', 'opr_a', 'https://push.latch.test/a', 'k', 'a', 'ses_a', now())`.execute(db);
      await migrateToLatest(db);
      await sql`insert into push_subscriptions (id, operator_id, endpoint, p256dh, auth, session_id, created_at)
        values ('psh_b', 'opr_b', 'https://push.latch.test/a', 'k2', 'b', 'ses_b', now())`.execute(db);
      const rows = await sql<{ id: string }>`select id from push_subscriptions order by id`.execute(db);
      expect(rows.rows.map((row) => row.id)).toEqual(["psh_a", "psh_b"]);
      // Still one row per operator and endpoint.
      await expect(
        sql`insert into push_subscriptions (id, operator_id, endpoint, p256dh, auth, session_id, created_at)
          values ('psh_a2', 'opr_a', 'https://push.latch.test/a', 'k', 'a', 'ses_a', now())`.execute(db),
      ).rejects.toThrow();
      // Down again: one row per endpoint, the newest.
      await migrateTo(db, "2026-11-27T1830-client-issuer");
      const left = await sql<{ id: string }>`select id from push_subscriptions order by id`.execute(db);
      expect(left.rows.map((row) => row.id)).toEqual(["psh_b"]);
    } finally {
      await db.destroy();
    }
  });
});
