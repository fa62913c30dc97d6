// Deleting an organisation and changing its settings are judged under the organisation's members
// lock, by the caller's role as it is then (org.manage), with what is changed read in the same
// transaction: a demotion or removal landing at the same moment is either seen or waited for
// (DECISIONS "Teams"). And an invitation spent by someone who is a member already is audited.
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inAdvisoryLock } from "../src/db/transaction.ts";
import { createOrgsRepo } from "../src/orgs/orgs.repo.ts";
import { type HostedHarness, signUpOperator, startHosted } from "./hosted.ts";
import { lastInviteTokenFor, type Member, startTeam, type Team } from "./teams.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

async function auditOf(member: Member, action: string) {
  const answer = await member.browser.request("GET", `/api/audit?action=${action}`);
  expect(answer.statusCode, answer.body).toBe(200);
  return (answer.json().events as { action: string; detail: Record<string, unknown> }[]).filter(
    (event) => event.action === action,
  );
}

async function organisationName(team: Team): Promise<string> {
  return (await team.owner.browser.request("GET", "/api/orgs/settings")).json().organisation.name;
}

/** Whether some statement on the database waits for a lock another transaction holds (PostgreSQL). */
async function isSomeoneWaiting(): Promise<boolean> {
  const { rows } = await sql<{ n: string }>`select count(*) as n from pg_locks where not granted`.execute(
    h.plane.database.db,
  );
  return Number(rows[0]?.n ?? 0) > 0;
}

describe("the organisation's own changes, judged under the members lock", () => {
  it("refuses a delete by a member whose role may not, whatever the route judged", async () => {
    const team = await startTeam(h);
    const name = await organisationName(team);
    await expect(
      h.plane.services.orgs.deleteOrganisation(team.admin.operatorId, team.organisationId, name),
    ).rejects.toMatchObject({ code: "forbidden_role" });
    const settings = await team.owner.browser.request("GET", "/api/orgs/settings");
    expect(settings.statusCode, settings.body).toBe(200);
  });

  it("refuses a settings change by a member whose role may not, and writes nothing", async () => {
    const team = await startTeam(h);
    const name = await organisationName(team);
    await expect(
      h.plane.services.orgs.updateSettings(team.organisationId, `operator:${team.auditor.operatorId}`, {
        name: "Renamed by an auditor",
      }),
    ).rejects.toMatchObject({ code: "forbidden_role" });
    expect((await team.owner.browser.request("GET", "/api/orgs/settings")).json().organisation.name).toBe(
      name,
    );
    expect(await auditOf(team.owner, "setting_changed")).toEqual([]);
  });

  it("lets an owner's settings change through, audited", async () => {
    const team = await startTeam(h);
    const changed = await team.owner.browser.request("PATCH", "/api/orgs/settings", { name: "Renamed" });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json().organisation.name).toBe("Renamed");
    expect((await auditOf(team.owner, "setting_changed"))[0]?.detail).toMatchObject({
      setting: "name",
      to: "Renamed",
    });
  });

  it("waits for a demotion in flight, then refuses the demoted owner's delete", async () => {
    const team = await startTeam(h);
    const promoted = await team.owner.browser.request(
      "POST",
      `/api/orgs/members/${team.admin.operatorId}/role`,
      { role: "owner" },
    );
    expect(promoted.statusCode, promoted.body).toBe(200);
    const name = await organisationName(team);
    // Another owner's demotion, as members.service.ts makes it: under the members lock, not yet
    // committed while the delete arrives.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let demoting!: () => void;
    const isDemoting = new Promise<void>((resolve) => {
      demoting = resolve;
    });
    const demotion = inAdvisoryLock(h.plane.database.db, `members:${team.organisationId}`, async (trx) => {
      await createOrgsRepo(trx).updateMembershipRole(team.organisationId, team.admin.operatorId, "auditor");
      demoting();
      await gate;
    });
    await isDemoting;
    const deleting = team.admin.browser.request("DELETE", "/api/orgs", { confirm_name: name });
    if (h.plane.databaseKind === "postgres") {
      // The delete is past the route's checks (which read the role before the demotion committed)
      // and waits on the lock, or, without it, on the demoted membership's row.
      const until = Date.now() + 10_000;
      while (!(await isSomeoneWaiting()) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    } else {
      // PGlite has one connection: the delete waits for the demotion's transaction whatever it does.
      await new Promise((r) => setTimeout(r, 300));
    }
    release();
    await demotion;
    const answer = await deleting;
    expect(answer.statusCode, answer.body).toBe(403);
    expect(answer.json().error.code).toBe("forbidden_role");
    const settings = await team.owner.browser.request("GET", "/api/orgs/settings");
    expect(settings.statusCode, settings.body).toBe(200);
    expect(settings.json().organisation.name).toBe(name);
  });
});

describe("an invitation accepted by someone who is a member already", () => {
  it("is spent, keeps their role, and is audited member_joined with already_member", async () => {
    const team = await startTeam(h);
    const joiner = await signUpOperator(h, { label: "already" });
    const invited = await team.owner.browser.request("POST", "/api/orgs/members/invite", {
      email: joiner.email,
      role: "admin",
    });
    expect(invited.statusCode, invited.body).toBe(201);
    // They joined another way meanwhile (single sign-on, say) as an approver.
    const db = h.plane.database.db;
    const operator = await db
      .selectFrom("operators")
      .select("id")
      .where("email", "=", joiner.email)
      .executeTakeFirstOrThrow();
    await createOrgsRepo(db).insertMembership({
      organisationId: team.organisationId,
      operatorId: operator.id,
      role: "approver",
      createdAt: h.clock.now,
    });
    const accepted = await joiner.browser.request("POST", "/invite", {
      token: lastInviteTokenFor(h.inbox, joiner.email),
    });
    expect(accepted.statusCode, accepted.body).toBe(200);
    const joined = (await auditOf(team.owner, "member_joined")).filter(
      (event) => event.detail.email === joiner.email,
    );
    expect(joined).toHaveLength(1);
    expect(joined[0]!.detail).toMatchObject({
      operator_id: operator.id,
      role: "approver",
      already_member: true,
      invited_role: "admin",
    });
    const members = (await team.owner.browser.request("GET", "/api/orgs/members")).json().members as {
      email: string;
      role: string;
    }[];
    expect(members.find((member) => member.email === joiner.email)?.role).toBe("approver");
  });
});
