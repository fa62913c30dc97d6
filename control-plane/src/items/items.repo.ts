// Items in the database: sealed values, metadata, and the lookups the call path needs.
import type { Kysely, Transaction } from "kysely";
import { NO_FIRST_APPROVAL } from "../db/first-approval.ts";
import type { Database, ItemRow, ItemUpdate, NewItem } from "../db/schema.ts";
import { lockItemTokens } from "./item-tokens.repo.ts";
import type { ItemView } from "./items.schemas.ts";

export type ItemWithFolder = ItemRow & { folder_name: string | null };

export interface ItemsRepo {
  insertItem(item: NewItem): Promise<void>;
  /** Replaces value and metadata of the item with this name, or inserts it (the local `vault set`). */
  upsertItemByName(item: NewItem): Promise<{ id: string; isNew: boolean }>;
  findItemByName(
    organisationId: string,
    environment: string,
    name: string,
  ): Promise<ItemWithFolder | undefined>;
  findItemById(organisationId: string, id: string): Promise<ItemWithFolder | undefined>;
  /**
   * The item as it is now, its row locked until the caller's transaction ends (call inside it): an
   * edit merges against this row and writes it back, so two edits at once take turns and the later
   * one sees what the earlier wrote (no stale field written back, no move judged on an old folder).
   * FOR NO KEY UPDATE: it does not wait on, nor hold up, a grant written for the item.
   */
  findItemByIdForUpdate(organisationId: string, id: string): Promise<ItemWithFolder | undefined>;
  findItemsByHost(organisationId: string, environment: string, host: string): Promise<ItemWithFolder[]>;
  findItems(organisationId: string, environments: readonly string[]): Promise<ItemWithFolder[]>;
  deleteItem(organisationId: string, id: string): Promise<boolean>;
  updateItem(organisationId: string, id: string, change: ItemUpdate): Promise<void>;
  /**
   * Takes the item's token lock (item-tokens.repo.ts) until the caller's transaction ends (call
   * inside it, before any lock on the item's row, in the order a call takes them): a call that
   * minted an access token with the item's old value stores it before this change drops it, never
   * after.
   */
  lockItemTokens(itemId: string): Promise<void>;
  /** Records a use; written only when the stored time is older than `olderThan` (or unset). */
  updateItemUsed(id: string, at: Date, olderThan: Date): Promise<void>;
  /** The folder's id, or undefined when no folder has that name yet. */
  findFolderId(organisationId: string, environment: string, name: string): Promise<string | undefined>;
  /**
   * Whether an agent holds an active folder_standing approval of the folder, decided under locks
   * held until the caller's transaction ends (call inside it): the folder's row, so that an
   * approval bound to the folder after this read waits for the caller to commit; and every pending
   * or active approval already bound to it, so that an approval being activated meanwhile is
   * waited for and then read as it committed. A move or store into the folder checked here is
   * one decision with its write (PostgreSQL; PGlite runs one transaction at a time anyway).
   */
  findFolderStandingForUpdate(organisationId: string, folderId: string): Promise<boolean>;
  /**
   * Revokes the item's active item_standing approvals that hold for any host (no scope host: the
   * whole credential): an edit widened where the credential goes, so its agents ask again and the
   * two-person rule applies again (DECISIONS "Teams"). A host-scoped one covers only its own host,
   * which a host added elsewhere does not reach. The item's pending and active standing approvals
   * are locked first (call inside the edit's transaction), so one being activated meanwhile is
   * waited for and revoked as it committed. Answers the revoked ones.
   */
  updateWholeItemStandingRevoked(
    organisationId: string,
    itemId: string,
    now: Date,
    revokedBy: string | null,
  ): Promise<{ id: string; agent_id: string; environment: string }[]>;
  /**
   * Revokes the item's active approvals of the whole credential, whatever their policy (a one-call
   * or 8-hour approval, or a standing one): no named call and no scope host, so each covers every
   * host the item lists. A replace by name (the local `vault set`) widened where the credential
   * goes, and the operator approved the narrower one. An approval of one named call keeps its host
   * and stays; one already expired reaches nothing and stays as it is. The item's pending and
   * active approvals are locked first (call inside the replace's transaction), so one being
   * approved meanwhile is waited for and revoked as it committed. Answers the revoked ones.
   */
  updateWholeItemApprovalsRevoked(
    organisationId: string,
    itemId: string,
    now: Date,
    revokedBy: string | null,
  ): Promise<{ id: string; agent_id: string; environment: string }[]>;
  /**
   * The two-person rule (DECISIONS "Teams"): forgets the first approvals of the item's pending
   * grants that a second member's confirmation would make item_standing approvals of the whole
   * credential (the same line as updateWholeItemStandingRevoked: no scope host once confirmed), as
   * orgs.repo.ts `updateFirstApprovalsVoided` forgets a removed member's. An edit widened where the
   * credential goes: the first member approved the narrower one, so a second member's approval is
   * the first again. Call in the edit's transaction, before the revoke: a confirmation committed
   * meanwhile is then active, and revoked. Answers how many were forgotten.
   */
  updateWholeItemFirstApprovalsVoided(organisationId: string, itemId: string): Promise<number>;
  /** The folder's id, created on first use. */
  findOrInsertFolder(
    organisationId: string,
    environment: string,
    name: string,
    newId: string,
  ): Promise<string>;
}

export function toItemView(row: ItemWithFolder): ItemView {
  return {
    id: row.id,
    name: row.name,
    kind: row.kind,
    environment: row.environment,
    allowed_hosts: row.allowed_hosts,
    inject: row.inject,
    username: row.username,
    folder_name: row.folder_name,
    last4: row.last4,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    last_used_at: row.last_used_at?.toISOString() ?? null,
  };
}

export function createItemsRepo(db: Kysely<Database> | Transaction<Database>): ItemsRepo {
  const selectItems = () =>
    db
      .selectFrom("items")
      .leftJoin("folders", "folders.id", "items.folder_id")
      .selectAll("items")
      .select("folders.name as folder_name");

  const findFolderId = async (organisationId: string, environment: string, name: string) => {
    const row = await db
      .selectFrom("folders")
      .select("id")
      .where("organisation_id", "=", organisationId)
      .where("environment", "=", environment)
      .where("name", "=", name)
      .executeTakeFirst();
    return row?.id;
  };
  return {
    async insertItem(item) {
      await db.insertInto("items").values(item).execute();
      // A new client secret beside a connected account is what its next exchange spends.
      await dropSpendingTokens(db, item.organisation_id, [
        { environment: item.environment, name: item.name },
      ]);
    },
    async upsertItemByName(item) {
      const row = await db
        .insertInto("items")
        .values(item)
        .onConflict((c) =>
          c.constraint("items_name_unique").doUpdateSet((eb) => ({
            kind: eb.ref("excluded.kind"),
            sealed_value: eb.ref("excluded.sealed_value"),
            sealing_key_id: eb.ref("excluded.sealing_key_id"),
            last4: eb.ref("excluded.last4"),
            allowed_hosts: eb.ref("excluded.allowed_hosts"),
            inject: eb.ref("excluded.inject"),
            username: eb.ref("excluded.username"),
            folder_id: eb.ref("excluded.folder_id"),
            updated_at: new Date(),
          })),
        )
        .returning(["id"])
        .executeTakeFirstOrThrow();
      const isNew = row.id === item.id;
      if (!isNew) await dropMintedTokens(db, row.id);
      await dropSpendingTokens(db, item.organisation_id, [
        { environment: item.environment, name: item.name },
      ]);
      return { id: row.id, isNew };
    },
    findItemByName: (organisationId, environment, name) =>
      selectItems()
        .where("items.organisation_id", "=", organisationId)
        .where("items.environment", "=", environment)
        .where("items.name", "=", name)
        .executeTakeFirst(),
    findItemById: (organisationId, id) =>
      selectItems()
        .where("items.organisation_id", "=", organisationId)
        .where("items.id", "=", id)
        .executeTakeFirst(),
    findItemByIdForUpdate: (organisationId, id) =>
      selectItems()
        .where("items.organisation_id", "=", organisationId)
        .where("items.id", "=", id)
        .forNoKeyUpdate("items")
        .executeTakeFirst(),
    findItemsByHost: (organisationId, environment, host) =>
      selectItems()
        .where("items.organisation_id", "=", organisationId)
        .where("items.environment", "=", environment)
        .where((eb) => eb(eb.val(host), "=", eb.fn.any("items.allowed_hosts")))
        .orderBy("items.name")
        .execute(),
    findItems: (organisationId, environments) =>
      selectItems()
        .where("items.organisation_id", "=", organisationId)
        .where("items.environment", "in", [...environments])
        .orderBy("items.environment")
        .orderBy("items.name")
        .execute(),
    async deleteItem(organisationId, id) {
      const deleted = await db
        .deleteFrom("items")
        .where("organisation_id", "=", organisationId)
        .where("id", "=", id)
        .returning(["environment", "name"])
        .executeTakeFirst();
      // A deleted client secret must not keep working through the token it minted.
      if (deleted) await dropSpendingTokens(db, organisationId, [deleted]);
      return deleted !== undefined;
    },
    async updateItem(organisationId, id, change) {
      // Its name before the change: the account it was the client secret of keeps no token it minted.
      const before = await db
        .selectFrom("items")
        .select(["environment", "name"])
        .where("organisation_id", "=", organisationId)
        .where("id", "=", id)
        .forNoKeyUpdate()
        .executeTakeFirst();
      if (!before) return;
      const after = await db
        .updateTable("items")
        .set(change)
        .where("organisation_id", "=", organisationId)
        .where("id", "=", id)
        .returning(["environment", "name"])
        .executeTakeFirst();
      if (!after) return;
      // An access token minted with the old value or client id is not this credential's any more.
      if (change.sealed_value !== undefined || change.username !== undefined) {
        await dropMintedTokens(db, id);
      }
      await dropSpendingTokens(db, organisationId, [before, after]);
    },
    lockItemTokens: (itemId) => lockItemTokens(db, itemId),
    async updateItemUsed(id, at, olderThan) {
      await db
        .updateTable("items")
        .set({ last_used_at: at })
        .where("id", "=", id)
        .where((eb) => eb.or([eb("last_used_at", "is", null), eb("last_used_at", "<", olderThan)]))
        .execute();
    },
    findFolderId,
    async findFolderStandingForUpdate(organisationId, folderId) {
      // FOR UPDATE, not a weaker lock: it conflicts with the KEY SHARE lock the foreign key check
      // takes when a grant's folder_id is written (approving the folder, grants.repo.ts), so that write waits.
      await db
        .selectFrom("folders")
        .select("id")
        .where("organisation_id", "=", organisationId)
        .where("id", "=", folderId)
        .forUpdate()
        .execute();
      // A pending approval too: its activation (pending -> active, one UPDATE of this row) is
      // waited for here, and PostgreSQL then returns the row as that approval committed it.
      const bound = await db
        .selectFrom("grants")
        .select(["policy", "status"])
        .where("organisation_id", "=", organisationId)
        .where("folder_id", "=", folderId)
        .where("status", "in", ["pending", "active"])
        .forUpdate()
        .execute();
      return bound.some((grant) => grant.policy === "folder_standing" && grant.status === "active");
    },
    async updateWholeItemStandingRevoked(organisationId, itemId, now, revokedBy) {
      await db
        .selectFrom("grants")
        .select("id")
        .where("organisation_id", "=", organisationId)
        .where("item_id", "=", itemId)
        .where("policy", "=", "item_standing")
        .where("status", "in", ["pending", "active"])
        .forUpdate()
        .execute();
      return db
        .updateTable("grants")
        .set({ status: "revoked", revoked_at: now, revoked_by: revokedBy })
        .where("organisation_id", "=", organisationId)
        .where("item_id", "=", itemId)
        .where("policy", "=", "item_standing")
        .where("status", "=", "active")
        .where("scope_host", "is", null)
        .returning(["id", "agent_id", "environment"])
        .execute();
    },
    async updateWholeItemApprovalsRevoked(organisationId, itemId, now, revokedBy) {
      await db
        .selectFrom("grants")
        .select("id")
        .where("organisation_id", "=", organisationId)
        .where("item_id", "=", itemId)
        .where("status", "in", ["pending", "active"])
        .forUpdate()
        .execute();
      // No named call: grant-view.ts toPublicCall names one only with all three columns.
      return db
        .updateTable("grants")
        .set({ status: "revoked", revoked_at: now, revoked_by: revokedBy })
        .where("organisation_id", "=", organisationId)
        .where("item_id", "=", itemId)
        .where("status", "=", "active")
        .where((eb) => eb.or([eb("expires_at", "is", null), eb("expires_at", ">", now)]))
        .where("scope_host", "is", null)
        .where((eb) =>
          eb.or([eb("call_method", "is", null), eb("call_host", "is", null), eb("call_path", "is", null)]),
        )
        .returning(["id", "agent_id", "environment"])
        .execute();
    },
    async updateWholeItemFirstApprovalsVoided(organisationId, itemId) {
      const result = await db
        .updateTable("grants")
        .set(NO_FIRST_APPROVAL)
        .where("organisation_id", "=", organisationId)
        .where("item_id", "=", itemId)
        .where("status", "=", "pending")
        .where("first_policy", "=", "item_standing")
        // The scope the confirmation gives (grants/standing-scope.ts standingScopeOf): "credential"
        // is every host; "path_prefix" is the request's host; none chosen keeps the row's own.
        .where((eb) =>
          eb.or([
            eb("first_scope", "=", "credential"),
            eb.and([eb("first_scope", "is", null), eb("scope_host", "is", null)]),
          ]),
        )
        .executeTakeFirst();
      return Number(result.numUpdatedRows);
    },
    async findOrInsertFolder(organisationId, environment, name, newId) {
      await db
        .insertInto("folders")
        .values({ id: newId, organisation_id: organisationId, environment, name })
        .onConflict((c) => c.constraint("folders_name_unique").doNothing())
        .execute();
      const id = await findFolderId(organisationId, environment, name);
      if (id === undefined) throw new Error(`folder ${name} was neither inserted nor found`);
      return id;
    },
  };
}

/**
 * Forgets the access token a connected account (`<BASE>_REFRESH`) was minted with when an item its
 * exchange spends is written (each name given: a store's, a delete's, an edit's before and after):
 * the account itself, or its client secret
 * (`<BASE>_SECRET` or `<BASE>`, spec 2.1), whose token is kept under the account's row, not its
 * own. Without it a replaced, edited, renamed or deleted client secret (one revoked at the
 * provider and rotated here) kept working through that token until it expired, up to an hour.
 * Dropping more than needed costs one exchange. A call storing a token minted from the old value
 * meanwhile keeps none: it holds the values it spent unchanged first (item-tokens.repo.ts
 * `holdIfUnchanged`), so it waits for this write, then finds the value changed or gone.
 */
async function dropSpendingTokens(
  db: Kysely<Database> | Transaction<Database>,
  organisationId: string,
  written: readonly { environment: string; name: string }[],
): Promise<void> {
  for (const { environment, name } of written) {
    await db
      .deleteFrom("item_tokens")
      .where("organisation_id", "=", organisationId)
      .where((eb) =>
        eb(
          "item_id",
          "in",
          eb
            .selectFrom("items")
            .select("id")
            .where("organisation_id", "=", organisationId)
            .where("environment", "=", environment)
            .where("name", "=", refreshNameOf(name)),
        ),
      )
      .execute();
  }
}

/**
 * The connected account an item belongs to, as calls/token-plan.ts `baseNameOf` reads siblings:
 * `SPOTIFY_SECRET`, `SPOTIFY` and `SPOTIFY_REFRESH` all give `SPOTIFY_REFRESH`.
 */
function refreshNameOf(name: string): string {
  return `${name.replace(/_(?:REFRESH|SECRET)$/, "")}_REFRESH`;
}

/** Forgets the access token minted with an item's previous value (the next call mints a new one). */
async function dropMintedTokens(db: Kysely<Database> | Transaction<Database>, itemId: string): Promise<void> {
  await db.deleteFrom("item_tokens").where("item_id", "=", itemId).execute();
}
