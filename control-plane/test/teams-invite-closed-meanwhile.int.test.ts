// An invitation closed while its acceptance waited for the organisation's members lock
// (invites.service.ts accept): spent by another tab, or gone with its organisation, while the
// sender lost the right to invite. The answer is the invitation as it is now (409 invite_used, 404
// gone), never a 500, and the ledger gets no `invite_withdrawn` row for a withdrawal that did not
// happen. PostgreSQL shows the race; on PGlite (one connection) the acceptance reads the
// invitation after the lock's transaction, and the same answers hold.
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inAdvisoryLock } from "../src/db/transaction.ts";
import { createInvitesRepo } from "../src/orgs/invites.repo.ts";
import { createOrgsRepo } from "../src/orgs/orgs.repo.ts";
import { type Browser, type HostedHarness, signUpOperator, startHosted } from "./hosted.ts";
import { joinAs, lastInviteTokenFor } from "./teams.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

/** Whether some statement on the database waits for a lock another transaction holds (PostgreSQL). */
async function isSomeoneWaiting(): Promise<boolean> {
  const { rows } = await sql<{ n: string }>`select count(*) as n from pg_locks where not granted`.execute(
    h.plane.database.db,
  );
  return Number(rows[0]?.n ?? 0) > 0;
}

/**
 * Holds the organisation's members lock while `change` runs in its transaction, sends `request`
 * meanwhile, and commits once the request waits on the lock; the request's answer.
 */
async function whileLocked<T>(
  organisationId: string,
  change: (trx: Parameters<Parameters<typeof inAdvisoryLock>[2]>[0]) => Promise<void>,
  request: () => Promise<T>,
): Promise<T> {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let changed!: () => void;
  const isChanged = new Promise<void>((resolve) => {
    changed = resolve;
  });
  const holding = inAdvisoryLock(h.plane.database.db, `members:${organisationId}`, async (trx) => {
    await change(trx);
    changed();
    await gate;
  });
  await isChanged;
  const answering = request();
  if (h.plane.databaseKind === "postgres") {
    const until = Date.now() + 10_000;
    while (!(await isSomeoneWaiting()) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  } else {
    await new Promise((r) => setTimeout(r, 300));
  }
  release();
  await holding;
  return answering;
}

async function withdrawnRows(owner: Browser, inviteId: string) {
  const events = (await owner.request("GET", "/api/audit?action=invite_withdrawn")).json().events as {
    detail: { invite_id?: string };
  }[];
  return events.filter((event) => event.detail.invite_id === inviteId);
}

describe("an invitation closed while its acceptance waited", () => {
  it("spent by another tab as its sender was demoted: 409 invite_used, and no invite_withdrawn row", async () => {
    const { browser: owner } = await signUpOperator(h, { label: "owner" });
    const organisationId = (await owner.request("GET", "/api/auth/me")).json().organisation.id as string;
    const admin = await joinAs(h, owner, "admin");
    const invitee = await signUpOperator(h, { label: "invitee" });
    const sent = await admin.browser.request("POST", "/api/orgs/members/invite", {
      email: invitee.email,
      role: "admin",
    });
    expect(sent.statusCode, sent.body).toBe(201);
    const inviteId = sent.json().invite.id as string;
    const token = lastInviteTokenFor(h.inbox, invitee.email);
    const { id: inviteeId } = await h.plane.database.db
      .selectFrom("operators")
      .select("id")
      .where("email", "=", invitee.email)
      .executeTakeFirstOrThrow();
    // Another tab's acceptance commits, then the sender is demoted, while this one waits.
    const answer = await whileLocked(
      organisationId,
      async (trx) => {
        const at = new Date();
        expect(await createInvitesRepo(trx).updateInviteAccepted(inviteId, inviteeId, at)).toBe(true);
        await createOrgsRepo(trx).insertMembership({
          organisationId,
          operatorId: inviteeId,
          role: "admin",
          createdAt: at,
        });
        await createOrgsRepo(trx).updateMembershipRole(organisationId, admin.operatorId, "approver");
      },
      () => invitee.browser.request("POST", "/invite", { token }),
    );
    expect(answer.statusCode, answer.body).toBe(409);
    expect(answer.json().error.code).toBe("invite_used");
    expect(await withdrawnRows(owner, inviteId)).toEqual([]);
  });

  it("gone with its organisation: 404 with a sentence, never a 500", async () => {
    const { browser: owner } = await signUpOperator(h, { label: "owner" });
    const organisationId = (await owner.request("GET", "/api/auth/me")).json().organisation.id as string;
    const invitee = await signUpOperator(h, { label: "invitee" });
    const sent = await owner.request("POST", "/api/orgs/members/invite", {
      email: invitee.email,
      role: "approver",
    });
    expect(sent.statusCode, sent.body).toBe(201);
    const token = lastInviteTokenFor(h.inbox, invitee.email);
    const answer = await whileLocked(
      organisationId,
      (trx) => createOrgsRepo(trx).deleteOrganisation(organisationId),
      () => invitee.browser.request("POST", "/invite", { token }),
    );
    expect(answer.statusCode, answer.body).toBe(404);
    expect(answer.json().error.code).toBe("not_found");
    expect(answer.json().error.message).toContain("invitation");
  });
});
