// An owner approving folder_standing for a folder at the moment an admin moves or stores a
// credential into it: the admin's check and write are one decision, so the approval either commits
// first and the admin is refused (as when no race is run), or waits for the write. PostgreSQL only:
// PGlite runs one transaction at a time, so there is no race to lose there.
import { type Kysely, sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isPostgresRun } from "../../test/database.ts";
import { type HostedHarness, startHosted } from "../../test/hosted.ts";
import { startTeam, type Team } from "../../test/teams.ts";
import type { Database } from "../db/schema.ts";

let h: HostedHarness;
let team: Team;
let names = 0;

describe.runIf(isPostgresRun())("putting a credential in a folder while an owner approves the folder", () => {
  beforeAll(async () => {
    h = await startHosted();
    team = await startTeam(h);
  }, 120_000);
  afterAll(async () => {
    await h?.close();
  });

  it("a move that ran while the approval was being written is refused as without the race", async () => {
    const environment = await apiKeyEnvironment();
    const name = `OUTSIDE_${++names}`;
    const stored = await team.admin.browser.request("POST", "/api/items", {
      name,
      value: "v-outside-123456",
      environment,
      allowed_hosts: ["api.latch.test"],
    });
    expect(stored.statusCode, stored.body).toBe(201);
    const id = stored.json().item.id as string;
    const move = () => team.admin.browser.request("POST", `/api/items/${id}/meta`, { folder_name: "apis" });

    const { raced, grantId } = await raceFolderApproval(move);
    try {
      const again = await move();
      expectStandingRefused(again);
      expect(raced.statusCode, raced.body).toBe(again.statusCode);
      expect(raced.json()).toEqual(again.json());
      const items = (await team.owner.browser.request("GET", "/api/items")).json().items;
      expect(items.find((i: { id: string }) => i.id === id).folder_name).toBeNull();
    } finally {
      await team.owner.browser.request("POST", `/api/grants/${grantId}/revoke`);
    }
  });

  it("a store into the folder that ran while the approval was being written is refused too", async () => {
    const environment = await apiKeyEnvironment();
    const name = `INSIDE_${++names}`;
    const store = () =>
      team.admin.browser.request("POST", "/api/items", {
        name,
        value: "v-inside-123456",
        environment,
        allowed_hosts: ["api.latch.test"],
        folder_name: "apis",
      });

    const { raced, grantId } = await raceFolderApproval(store);
    try {
      const again = await store();
      expectStandingRefused(again);
      expect(raced.statusCode, raced.body).toBe(again.statusCode);
      expect(raced.json()).toEqual(again.json());
      const items = (await team.owner.browser.request("GET", "/api/items")).json().items;
      expect(items.map((i: { name: string }) => i.name)).not.toContain(name);
    } finally {
      await team.owner.browser.request("POST", `/api/grants/${grantId}/revoke`);
    }
  });
});

type Answer = Awaited<ReturnType<Team["admin"]["browser"]["request"]>>;

/**
 * Runs `write` (the admin's) while the owner's folder_standing approval of "apis" has written its
 * grant row and not yet committed: the test holds the organisation's audit head row, which the
 * approval's transaction appends to after its UPDATE of the grant. Once the admin's request waits
 * too (on the approval, or, without the lock, on the audit head after its own write), the head is
 * let go and both commit. Answers the admin's response.
 */
async function raceFolderApproval(write: () => Promise<Answer>): Promise<{ raced: Answer; grantId: string }> {
  const db = h.plane.database.db;
  const grant = await team.requestGrant();
  const head = await holdAuditHead(db, team.organisationId);
  let approving: Promise<Answer> | undefined;
  let writing: Promise<Answer> | undefined;
  try {
    approving = team.owner.browser.request("POST", `/api/grants/${grant.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "apis",
    });
    await waitForLockWaiters(db, 1, approving);
    // The approval is written in its transaction and not committed: other sessions still read it
    // pending, and not yet bound to the folder (its activation binds it, in the same UPDATE).
    const row = await db
      .selectFrom("grants")
      .select(["status", "folder_id"])
      .where("id", "=", grant.grant_id)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe("pending");
    expect(row.folder_id).toBeNull();
    writing = write();
    await waitForLockWaiters(db, 2, writing);
  } finally {
    await head.release();
  }
  const approved = await approving;
  expect(approved.statusCode, approved.body).toBe(200);
  expect(approved.json().grant).toMatchObject({ status: "active", policy: "folder_standing" });
  return { raced: await writing, grantId: grant.grant_id };
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

async function apiKeyEnvironment(): Promise<string> {
  const items = (await team.admin.browser.request("GET", "/api/items")).json().items;
  return items.find((i: { name: string }) => i.name === "API_KEY").environment as string;
}

function expectStandingRefused(response: Answer) {
  expect(response.statusCode, response.body).toBe(403);
  const error = (response.json() as { error: Record<string, unknown> }).error;
  expect(error).toMatchObject({ code: "forbidden_role", role: "admin", required_roles: ["owner"] });
  expect(String(error.message)).toContain("standing approval of every credential in folder apis");
}
