// An access token minted with a credential's old value is never cached after the change that
// replaced the value: a rotate or an edit takes the item's token lock, which a call holds from its
// exchange to storing the token, so the change drops what the call stored, after it. (A replace by
// name does not: a connect storing a new refresh token must not wait on a call's exchange; connect
// guards its own access token by the refresh token it stored.)
// PostgreSQL only: PGlite runs one transaction at a time, so there is no race to lose there.
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import { isPostgresRun, newTestOrganisation, testDatabase } from "../../test/database.ts";
import { testItemsService } from "../../test/items-service.ts";
import type { OpenDatabase } from "../db/database.ts";
import { createItemTokensRepo } from "./item-tokens.repo.ts";
import type { ItemsService } from "./items.service.ts";

let database: OpenDatabase;
let items: ItemsService;

describe.runIf(isPostgresRun())("a change of a credential while a call mints with it", () => {
  beforeAll(async () => {
    database = await testDatabase();
    items = await testItemsService(database.db, ["staging"]);
  });

  const changes: [string, (org: string, id: string) => Promise<unknown>][] = [
    ["a rotate", (org, id) => items.rotateItem(org, "operator", id, "v-new-value-0123456789")],
    [
      "an edit of the value",
      (org, id) => items.updateItem(org, "operator", id, { value: "v-new-0123456789" }),
    ],
  ];

  it.each(changes)("%s waits for the call's token to be stored, then drops it", async (_label, change) => {
    const org = await newTestOrganisation(database);
    const stored = await items.storeItem(org, "operator", {
      name: "MINTED_KEY",
      value: "v-old-0123456789",
      allowed_hosts: ["api.latch.test"],
    });
    let changing: Promise<unknown> | undefined;
    await items.inItemTokenLock(stored.id, async (locked) => {
      // The call has exchanged the old value; the change starts before it stores the token.
      changing = change(org, stored.id);
      const isWaiting = await waitForLockWaiter(changing);
      expect(isWaiting).toBe(true);
      await locked.upsertAccessToken(stored.id, org, {
        sealedValue: new Uint8Array([1, 2, 3]),
        sealingKeyId: "k",
        tokenLast4: "oken",
        expiresAt: new Date(Date.now() + 3_600_000),
        scope: "",
      });
    });
    await changing;
    const left = await createItemTokensRepo(database.db).findAccessToken(stored.id, new Date());
    expect(left).toBeUndefined();
  });
});

/** Whether a session waits on a lock (the change on the token lock) before `change` settles. */
async function waitForLockWaiter(change: Promise<unknown>): Promise<boolean> {
  let isSettled = false;
  void change.then(
    () => {
      isSettled = true;
    },
    () => {
      isSettled = true;
    },
  );
  for (let attempt = 0; attempt < 250; attempt++) {
    if (isSettled) return false;
    const { rows } = await sql<{ waiting: number }>`
      select count(*)::int as waiting from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock'`.execute(database.db);
    if ((rows[0]?.waiting ?? 0) >= 1) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return false;
}
