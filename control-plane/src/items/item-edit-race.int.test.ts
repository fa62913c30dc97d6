// Two edits of one credential at once: the later merges against what the earlier wrote, so it
// never writes back a field it read before (an owner's narrowing undone, a credential moved back
// into a folder agents hold a standing approval of, unchecked). PostgreSQL only: PGlite runs one
// transaction at a time, so there is no race to lose there.
import { type Kysely, sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isPostgresRun } from "../../test/database.ts";
import { type HostedHarness, startHosted } from "../../test/hosted.ts";
import { startTeam, type Team } from "../../test/teams.ts";
import type { Database } from "../db/schema.ts";

let h: HostedHarness;
let team: Team;
let names = 0;

type Answer = Awaited<ReturnType<Team["owner"]["browser"]["request"]>>;

describe.runIf(isPostgresRun())("two edits of one credential at once", () => {
  beforeAll(async () => {
    h = await startHosted();
    team = await startTeam(h);
  }, 120_000);
  afterAll(async () => {
    await h?.close();
  });

  it("an owner's narrowing survives an admin's edit of another field made meanwhile", async () => {
    const id = await storeItem({ allowed_hosts: ["api.latch.test", "old-compromised.example.com"] });
    const { first, second } = await raceEdits(
      () =>
        team.owner.browser.request("POST", `/api/items/${id}/meta`, { allowed_hosts: ["api.latch.test"] }),
      () => team.admin.browser.request("POST", `/api/items/${id}/meta`, { username: "someone" }),
    );
    expect(first.statusCode, first.body).toBe(200);
    expect(second.statusCode, second.body).toBe(200);
    expect(await itemOf(id)).toMatchObject({ allowed_hosts: ["api.latch.test"], username: "someone" });
  });

  it("a credential moved out of a standing folder is not moved back by an edit made meanwhile", async () => {
    const grant = await team.requestGrant();
    const approved = await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "apis",
      scope: "credential",
    });
    expect(approved.json().grant).toMatchObject({ status: "active", policy: "folder_standing" });
    try {
      const id = await storeItem({ allowed_hosts: ["api.latch.test"], folder_name: "apis" });
      const { first, second } = await raceEdits(
        () => team.owner.browser.request("POST", `/api/items/${id}/meta`, { folder_name: null }),
        () =>
          team.admin.browser.request("POST", `/api/items/${id}/meta`, {
            allowed_hosts: ["api.latch.test", "evil.example.com"],
          }),
      );
      expect(first.statusCode, first.body).toBe(200);
      // Out of the folder by then: the admin's widening is judged on the item as it is.
      expect(second.statusCode, second.body).toBe(200);
      expect(await itemOf(id)).toMatchObject({
        folder_name: null,
        allowed_hosts: ["api.latch.test", "evil.example.com"],
      });
    } finally {
      await team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/revoke`);
    }
  });
});

async function storeItem(fields: Record<string, unknown>): Promise<string> {
  const stored = await team.owner.browser.request("POST", "/api/items", {
    name: `RACED_${++names}`,
    value: "v-raced-0123456789",
    environment: "staging",
    ...fields,
  });
  expect(stored.statusCode, stored.body).toBe(201);
  return stored.json().item.id as string;
}

async function itemOf(id: string): Promise<Record<string, unknown>> {
  const items = (await team.owner.browser.request("GET", "/api/items")).json().items;
  return items.find((i: { id: string }) => i.id === id);
}

/**
 * Runs `first` until it has written the item and waits to append its audit row (the test holds
 * the organisation's audit head), then `second`, which must wait too (on the item, or without the
 * row lock on the audit head after its own write); then lets both go.
 */
async function raceEdits(
  first: () => Promise<Answer>,
  second: () => Promise<Answer>,
): Promise<{ first: Answer; second: Answer }> {
  const db = h.plane.database.db;
  const head = await holdAuditHead(db, team.organisationId);
  let firstAnswer: Promise<Answer> | undefined;
  let secondAnswer: Promise<Answer> | undefined;
  try {
    firstAnswer = first();
    await waitForLockWaiters(db, 1, firstAnswer);
    secondAnswer = second();
    await waitForLockWaiters(db, 2, secondAnswer);
  } finally {
    await head.release();
  }
  return { first: await firstAnswer, second: await secondAnswer };
}

/** Locks the organisation's audit head row in a transaction of its own until `release`. */
async function holdAuditHead(
  db: Kysely<Database>,
  organisationId: string,
): Promise<{ release(): Promise<void> }> {
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let locked = () => {};
  const isLocked = new Promise<void>((resolve) => {
    locked = resolve;
  });
  const holding = db.transaction().execute(async (trx) => {
    await trx
      .selectFrom("audit_heads")
      .select("seq")
      .where("organisation_id", "=", organisationId)
      .forUpdate()
      .executeTakeFirstOrThrow();
    locked();
    await released;
  });
  await Promise.race([isLocked, holding]);
  return {
    async release() {
      release();
      await holding;
    },
  };
}

/** Waits until `count` sessions of this database wait on a lock; fails if `request` answers first. */
async function waitForLockWaiters(db: Kysely<Database>, count: number, request: Promise<Answer>) {
  let answered: Answer | undefined;
  void request.then((answer) => {
    answered = answer;
  });
  for (let attempt = 0; attempt < 500; attempt++) {
    if (answered) throw new Error(`answered ${answered.statusCode} before waiting: ${answered.body}`);
    const { rows } = await sql<{ waiting: number }>`
      select count(*)::int as waiting from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock'`.execute(db);
    if ((rows[0]?.waiting ?? 0) >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`fewer than ${count} sessions ever waited on a lock`);
}
