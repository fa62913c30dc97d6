// A member removed (or leaving) loses the trusted clients (avt_) they hold in the removal's own
// transaction, so a failure of what runs after it commits (sessions, OAuth grants) cannot leave one
// live; and a trusted client is issued or rotated only to a member who still may (clients.write),
// read with their membership row held FOR SHARE: an issue racing a removal ends revoked or refused.
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runInTransaction } from "../src/db/transaction.ts";
import { isPostgresRun } from "./database.ts";
import { type HostedHarness, startHosted } from "./hosted.ts";
import { type Member, startTeam } from "./teams.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

const SECRET = "team-removal-atomic-0001";

async function stepUp(member: Member) {
  h.clock.advance(30_000);
  const code = member.totp.generate({ timestamp: h.clock.now.getTime() });
  const verified = await member.browser.request("POST", "/api/auth/totp/verify", { code });
  expect(verified.statusCode, verified.body).toBe(200);
}

async function issueTrusted(member: Member, name: string) {
  const issued = await member.browser.request("POST", "/api/clients/trusted", { name });
  expect(issued.statusCode, issued.body).toBe(201);
  return issued.json() as { client_id: string; token: string };
}

async function resolve(token: string) {
  return h.app.inject({
    method: "POST",
    url: "/runtime/resolve",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    payload: JSON.stringify({ item_name: "API_KEY" }),
  });
}

/** Makes every update of `operatorId`'s sessions fail: the after-commit hook of a removal throws. */
async function breakSessionsOf(operatorId: string): Promise<() => Promise<void>> {
  const name = `fail_sessions_${operatorId.replace(/[^a-z0-9]/gi, "").toLowerCase()}`;
  const db = h.plane.database.db;
  await sql
    .raw(
      `create function ${name}() returns trigger language plpgsql as $$ begin
         if new.operator_id = '${operatorId}' then raise exception 'sessions unavailable'; end if;
         return new; end $$`,
    )
    .execute(db);
  await sql
    .raw(`create trigger ${name} before update on operator_sessions for each row execute function ${name}()`)
    .execute(db);
  return async () => {
    await sql.raw(`drop trigger ${name} on operator_sessions`).execute(db);
    await sql.raw(`drop function ${name}()`).execute(db);
  };
}

describe("a member gone loses their trusted clients with the removal", () => {
  it("revokes them in the removal's transaction, even when the after-commit hooks fail", async () => {
    const team = await startTeam(h, SECRET);
    await stepUp(team.admin);
    const held = await issueTrusted(team.admin, "admin's runtime");
    const restore = await breakSessionsOf(team.admin.operatorId);
    try {
      await expect(
        h.plane.services.members.removeMember(
          {
            organisationId: team.organisationId,
            operatorId: team.owner.operatorId,
            actor: `operator:${team.owner.operatorId}`,
          },
          team.admin.operatorId,
        ),
      ).rejects.toThrow(/P0001 in update operator_sessions/);
    } finally {
      await restore();
    }
    expect(
      await h.plane.services.orgs.findMemberRole(team.organisationId, team.admin.operatorId),
    ).toBeUndefined();
    expect((await resolve(held.token)).statusCode).toBe(401);
    const rows = await h.plane.database.db
      .selectFrom("audit_events")
      .select(["actor", "detail"])
      .where("organisation_id", "=", team.organisationId)
      .where("action", "=", "client_revoked")
      .execute();
    expect(rows).toEqual([
      {
        actor: `operator:${team.owner.operatorId}`,
        detail: { client_id: held.client_id, reason: "member_removed" },
      },
    ]);
  });

  it("revokes them in the transaction of a member leaving, even when the after-commit hooks fail", async () => {
    const team = await startTeam(h, SECRET);
    await stepUp(team.admin);
    const held = await issueTrusted(team.admin, "admin's runtime");
    const restore = await breakSessionsOf(team.admin.operatorId);
    try {
      await expect(
        h.plane.services.members.leave({
          organisationId: team.organisationId,
          operatorId: team.admin.operatorId,
          actor: `operator:${team.admin.operatorId}`,
        }),
      ).rejects.toThrow(/P0001 in update operator_sessions/);
    } finally {
      await restore();
    }
    expect((await resolve(held.token)).statusCode).toBe(401);
  });
});

describe("issuing or rotating a trusted client judges the member in its own transaction", () => {
  it("refuses, 403, one issued or rotated for a member already removed, and writes nothing", async () => {
    const team = await startTeam(h, SECRET);
    await stepUp(team.admin);
    const held = await issueTrusted(team.owner, "owner's runtime");
    const removed = await team.owner.browser.request("DELETE", `/api/orgs/members/${team.admin.operatorId}`);
    expect(removed.statusCode, removed.body).toBe(200);
    const actor = `operator:${team.admin.operatorId}`;
    const { clients } = h.plane.services;
    await expect(
      clients.issueClient(team.organisationId, "trusted", { name: "late" }, actor),
    ).rejects.toMatchObject({ code: "forbidden" });
    await expect(clients.rotateClient(team.organisationId, held.client_id, actor)).rejects.toMatchObject({
      code: "forbidden",
    });
    // An auditor, demoted meanwhile say, may not either.
    await expect(
      clients.issueClient(team.organisationId, "trusted", {}, `operator:${team.auditor.operatorId}`),
    ).rejects.toMatchObject({ code: "forbidden_role" });
    expect((await resolve(held.token)).statusCode).toBe(200);
    const names = (await clients.listClients(team.organisationId)).map((row) => row.name);
    expect(names).not.toContain("late");
  });

  it.runIf(isPostgresRun())(
    "an issue racing the member's removal ends with no live avt_ for them",
    async () => {
      const team = await startTeam(h, SECRET);
      await stepUp(team.admin);
      const db = h.plane.database.db;
      const waiting = async () =>
        Number(
          (await sql<{ n: string }>`select count(*) as n from pg_locks where not granted`.execute(db)).rows[0]
            ?.n ?? 0,
        );
      let release!: () => void;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => {
        locked = resolve;
      });
      // Holds every insert into clients: the issue waits after its route's role check.
      const holder = runInTransaction(db, async (trx) => {
        await sql`lock table clients in share row exclusive mode`.execute(trx);
        locked();
        await released;
      });
      await isLocked;
      const issuing = team.admin.browser.request("POST", "/api/clients/trusted", { name: "racing" });
      while ((await waiting()) < 1) await new Promise((r) => setTimeout(r, 20));
      let isRemoved = false;
      const removing = team.owner.browser
        .request("DELETE", `/api/orgs/members/${team.admin.operatorId}`)
        .then((answer) => {
          isRemoved = true;
          return answer;
        });
      // The removal either commits first (no fix) or waits for the issue's membership row.
      for (let i = 0; i < 100 && !isRemoved && (await waiting()) < 2; i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
      release();
      await holder;
      const [issued, removed] = await Promise.all([issuing, removing]);
      expect(removed.statusCode, removed.body).toBe(200);
      if (issued.statusCode === 201) {
        expect((await resolve(issued.json().token as string)).statusCode).toBe(401);
      } else {
        expect(issued.statusCode, issued.body).toBe(403);
      }
      const live = (await h.plane.services.clients.listClients(team.organisationId)).filter(
        (row) => row.kind === "trusted" && row.revoked_at === null && row.issued_by === team.admin.operatorId,
      );
      expect(live).toEqual([]);
    },
    30_000,
  );
});
