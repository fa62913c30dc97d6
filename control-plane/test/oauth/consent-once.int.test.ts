// One consent decision per interaction, written whole: two POST /consent for the same interaction (a
// double click, two tabs, a replayed form) take one decision, and the second is answered as a used
// interaction is (404 not_found), approve or deny; a decision that fails part-way leaves no consent,
// no grant and no audit row of it, and the interaction can be answered again.
import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabase } from "../database.ts";
import { type Browser, type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import { consentUid, openAuthorize, pathOf, register } from "./oauth-flow.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

const REDIRECT = "http://127.0.0.1:33421/callback";

/** A ready owner, their organisation, a registered client and an authorization waiting on /consent. */
async function pendingConsent() {
  const op = await readyOperator(h, "owner");
  const organisationId = (await op.request("GET", "/api/auth/me")).json().organisation.id as string;
  const clientId = (await register(h.app, { client_name: "Twice agent", redirect_uris: [REDIRECT] })).json()
    .client_id as string;
  const uid = consentUid(await openAuthorize(op, clientId, REDIRECT));
  return { op, organisationId, clientId, uid };
}

const post = (op: Browser, uid: string, decision: "approve" | "deny") =>
  op.request("POST", "/consent", { uid, decision }, { accept: "application/json" });

/** The consents given for `clientId` and the operator's own `oauth_client_consented` rows there. */
async function recorded(organisationId: string, clientId: string) {
  const { db } = await testDatabase();
  const consents = await db
    .selectFrom("oauth_consents")
    .innerJoin("clients", "clients.id", "oauth_consents.client_row_id")
    .select(["oauth_consents.grant_id"])
    .where("clients.oauth_client_id", "=", clientId)
    .execute();
  const audited = await db
    .selectFrom("audit_events")
    .select("actor")
    .where("organisation_id", "=", organisationId)
    .where("action", "=", "oauth_client_consented")
    .where("actor", "like", "operator:%")
    .execute();
  const grants = await db
    .selectFrom("oauth_artifacts")
    .select("model")
    .where("model", "=", "Grant")
    .where("grant_id", "in", consents.length > 0 ? consents.map((c) => c.grant_id) : ["none"])
    .execute();
  return { consents: consents.length, audited: audited.length, grants: grants.length };
}

/** Grants' sign-in records (GrantSignIn) whose grant is gone: what a half-written decision leaves. */
async function orphanSignIns(): Promise<string[]> {
  const { db } = await testDatabase();
  const rows = await db
    .selectFrom("oauth_artifacts as s")
    .select("s.grant_id")
    .where("s.model", "=", "GrantSignIn")
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom("oauth_artifacts as g")
            .select("g.model")
            .where("g.model", "=", "Grant")
            .whereRef("g.grant_id", "=", "s.grant_id"),
        ),
      ),
    )
    .execute();
  return rows.map((r) => r.grant_id ?? "").sort();
}

describe("two answers to one interaction", () => {
  it("two approvals at once: one consent, one audit row, the other answered as a used interaction", async () => {
    const { op, organisationId, clientId, uid } = await pendingConsent();
    const answers = await Promise.all([post(op, uid, "approve"), post(op, uid, "approve")]);
    const statuses = answers.map((a) => a.statusCode).sort();
    expect(statuses, answers.map((a) => a.body).join(" | ")).toEqual([200, 404]);
    const refused = answers.find((a) => a.statusCode === 404)!;
    expect(refused.json().error.code).toBe("not_found");
    expect(await recorded(organisationId, clientId)).toEqual({ consents: 1, audited: 1, grants: 1 });

    // The winner's resume reaches the client with a code.
    const winner = answers.find((a) => a.statusCode === 200)!;
    const resumed = await op.request("GET", pathOf(winner.json().location));
    expect(String(resumed.headers.location)).toMatch(/^http:\/\/127\.0\.0\.1:33421\/callback\?code=/);
  });

  it("an approval replayed after it was answered: 404, nothing written twice", async () => {
    const { op, organisationId, clientId, uid } = await pendingConsent();
    expect((await post(op, uid, "approve")).statusCode).toBe(200);
    const replayed = await post(op, uid, "approve");
    expect(replayed.statusCode).toBe(404);
    expect(replayed.json().error.code).toBe("not_found");
    expect(await recorded(organisationId, clientId)).toEqual({ consents: 1, audited: 1, grants: 1 });
  });

  it("a deny and an approval at once: one decision; a deny taken first consents nothing", async () => {
    const { op, organisationId, clientId, uid } = await pendingConsent();
    const [denied, approved] = await Promise.all([post(op, uid, "deny"), post(op, uid, "approve")]);
    expect([denied.statusCode, approved.statusCode].sort()).toEqual([200, 404]);
    const after = await recorded(organisationId, clientId);
    if (denied.statusCode === 200) expect(after).toEqual({ consents: 0, audited: 0, grants: 0 });
    else expect(after).toEqual({ consents: 1, audited: 1, grants: 1 });
  });

  it("a deny answered once: a second deny, or an approval after it, is 404 and consents nothing", async () => {
    const { op, organisationId, clientId, uid } = await pendingConsent();
    expect((await post(op, uid, "deny")).statusCode).toBe(200);
    expect((await post(op, uid, "deny")).statusCode).toBe(404);
    expect((await post(op, uid, "approve")).statusCode).toBe(404);
    expect(await recorded(organisationId, clientId)).toEqual({ consents: 0, audited: 0, grants: 0 });
  });
});

describe("a decision that fails after its consent is written", () => {
  it("leaves no consent, grant or audit row, and the interaction can be answered again", async () => {
    const { op, organisationId, clientId, uid } = await pendingConsent();
    const { db } = await testDatabase();
    // The ledger refuses this organisation's consent row: a real failure after the consent write.
    const name = `fail_consent_${randomBytes(6).toString("hex")}`;
    await sql`create function ${sql.id(name)}() returns trigger language plpgsql as $$
      begin
        if new.organisation_id = ${sql.lit(organisationId)} and new.action = 'oauth_client_consented'
          and new.actor like 'operator:%' then
          raise exception 'injected ledger failure';
        end if;
        return new;
      end $$`.execute(db);
    await sql`create trigger ${sql.id(name)} before insert on audit_events
      for each row execute function ${sql.id(name)}()`.execute(db);
    const before = await orphanSignIns();
    try {
      const failed = await post(op, uid, "approve");
      expect(failed.statusCode).toBeGreaterThanOrEqual(500);
      expect(failed.body).not.toContain("injected");
      expect(await recorded(organisationId, clientId)).toEqual({ consents: 0, audited: 0, grants: 0 });
      expect(await orphanSignIns()).toEqual(before);
    } finally {
      await sql`drop trigger ${sql.id(name)} on audit_events`.execute(db);
      await sql`drop function ${sql.id(name)}()`.execute(db);
    }
    // Nothing was decided: the same interaction is answered now, once.
    const answered = await post(op, uid, "approve");
    expect(answered.statusCode, answered.body).toBe(200);
    expect(await recorded(organisationId, clientId)).toEqual({ consents: 1, audited: 1, grants: 1 });
  });
});
