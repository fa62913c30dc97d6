// Storing and listing credentials. A value is sealed to the egress proxy's key the moment it
// arrives, before any other work; after that only the sealed box and last4 exist on this tier.
import type { SealingPublicKey } from "@latch/shared/crypto/seal";
import { lastFour, sealValue } from "@latch/shared/crypto/seal";
import { AppError } from "@latch/shared/errors";
import { newId } from "@latch/shared/ids";
import { readAwsSigningScope } from "@latch/shared/inject/aws-host";
import { formatInjectMode, parseInjectMode } from "@latch/shared/inject/inject-mode";
import { checkHostname } from "@latch/shared/requests/host";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { mayPerform, type Role, rolesFor } from "../auth/permissions.ts";
import { isUniqueViolation } from "../db/database.ts";
import { findProviderByHost } from "../providers/providers.ts";
import type { CallableItem } from "./callable-item.ts";
import type { ItemTokensRepo } from "./item-tokens.repo.ts";
import { findWidening } from "./item-widening.ts";
import type { ItemsRepo, ItemWithFolder } from "./items.repo.ts";
import { toItemView } from "./items.repo.ts";
import {
  folderNameText,
  ITEM_NAME,
  type ItemInput,
  type ItemView,
  itemInput,
  MAX_VALUE_LENGTH,
  normaliseFolderName,
  VALUE_TOO_LONG,
} from "./items.schemas.ts";

export interface ItemsServiceDeps {
  repo: ItemsRepo;
  /** The proxy's current public sealing key. */
  sealingKey(): Promise<SealingPublicKey>;
  recordEvent(event: AuditEvent): Promise<void>;
  environments: readonly string[];
  defaultEnvironment: string;
  /**
   * Spec 4.4: the local API takes allowed_hosts as optional. Such a credential is stored, listed
   * and found by name, and every call with it is refused (host_mismatch) until hosts are added.
   */
  isHostListOptional?: boolean;
  /**
   * Spec 2.2: inject `refresh` (a user refresh token typed by the user) is the local variant's; on
   * the hosted service only Connect stores one (storeSealedItem), so an operator cannot type one in.
   */
  isRefreshTypable?: boolean;
  /** Minted access tokens and refresh rotation (spec 4.2 rule 7). */
  tokens?: ItemTokensRepo;
  /**
   * Runs `fn` in one transaction with an audit append of its own: a credential stored, edited,
   * rotated or deleted and its audit row are both written or neither is. Without it (a test's
   * bare service) the two are written one after the other.
   */
  inTransaction?: <T>(fn: (tx: ItemsTransaction) => Promise<T>) => Promise<T>;
}

/** Who changes a credential, where a role decides (hosted): what they may put under an approval. */
export interface ItemWriter {
  role?: Role | undefined;
}

/** A credential change's writes: the item's row and its audit row. */
export interface ItemsTransaction {
  repo: ItemsRepo;
  recordEvent(event: AuditEvent): Promise<void>;
}

export interface ItemsService {
  /**
   * Stores a new item; a name already used in that environment is 409, or replaced with `replace`
   * (the local `vault set`), where a replace that widens the item ends its approvals of the whole
   * credential in the same transaction.
   */
  storeItem(
    organisationId: string,
    actor: string,
    input: unknown,
    options?: { replace?: boolean } & ItemWriter,
  ): Promise<ItemView>;
  listItems(organisationId: string, environment?: string): Promise<ItemView[]>;
  /** Edits metadata; a blank or missing value keeps the stored one (spec 4.3). */
  updateItem(
    organisationId: string,
    actor: string,
    id: string,
    input: unknown,
    writer?: ItemWriter,
  ): Promise<ItemView>;
  /** Replaces the value only. */
  rotateItem(organisationId: string, actor: string, id: string, value: unknown): Promise<ItemView>;
  createFolder(
    organisationId: string,
    environment: unknown,
    name: unknown,
  ): Promise<{ id: string; name: string; environment: string }>;
  deleteItem(organisationId: string, actor: string, id: string): Promise<void>;
  findItemByName(organisationId: string, environment: string, name: string): Promise<ItemView | undefined>;
  /** Sealed items as the call path needs them (never opened here). */
  findCallableByName(
    organisationId: string,
    environment: string,
    name: string,
  ): Promise<CallableItem | undefined>;
  findCallableByHost(organisationId: string, environment: string, host: string): Promise<CallableItem[]>;
  findCallableById(organisationId: string, id: string): Promise<CallableItem | undefined>;
  /**
   * Stores a value the proxy sealed (a connect's refresh token): never seen in clear here, so its
   * last four characters come from the proxy's metadata. Replaces an item of that name.
   */
  storeSealedItem(
    organisationId: string,
    actor: string,
    item: {
      name: string;
      environment: string;
      sealedValue: Uint8Array;
      sealingKeyId: string;
      last4: string;
      allowedHosts: readonly string[];
      inject: string;
      username: string | null;
    },
  ): Promise<ItemView>;
  /** The item's token lock (item-tokens.repo.ts): minted access tokens and refresh rotation. */
  inItemTokenLock: ItemTokensRepo["inItemTokenLock"];
  /** A call went out with the item: its last use, written at most once a minute. */
  noteItemUsed(item: CallableItem, at: Date): Promise<void>;
}

/** An item's last use is written at most once a minute: a busy agent costs no write per call. */
const USE_WRITE_INTERVAL_MS = 60_000;

// Control characters cannot travel in a header, a query parameter or a cookie; a value carrying
// them is a paste accident (a trailing newline is stripped by the CLI before it gets here).
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

export function toCallableItem(row: ItemWithFolder): CallableItem {
  return {
    id: row.id,
    name: row.name,
    folderId: row.folder_id,
    allowedHosts: row.allowed_hosts,
    inject: row.inject,
    username: row.username,
    sealingKeyId: row.sealing_key_id,
    sealedValue: row.sealed_value,
    lastUsedAt: row.last_used_at,
  };
}

export function createItemsService(deps: ItemsServiceDeps): ItemsService {
  /** A change and its audit row: in one transaction where the deps give one. */
  const recorded = <T>(fn: (tx: ItemsTransaction) => Promise<T>): Promise<T> =>
    deps.inTransaction ? deps.inTransaction(fn) : fn({ repo: deps.repo, recordEvent: deps.recordEvent });
  function checkEnvironment(environment: string | undefined): string {
    const chosen = environment ?? deps.defaultEnvironment;
    // Spec 4.3: an environment this plane does not serve answers as if it did not exist.
    if (!deps.environments.includes(chosen)) {
      throw new AppError("not_found", `this service does not serve the ${chosen} environment`);
    }
    return chosen;
  }

  function checkValue(value: string): void {
    if (value.length === 0) throw new AppError("empty_value", "the value is empty");
    // The same bound as a new item's value, for rotate and edit too (never quoting the value).
    if (value.length > MAX_VALUE_LENGTH) {
      throw new AppError("invalid_request", VALUE_TOO_LONG);
    }
    if (CONTROL_CHARACTERS.test(value)) {
      throw new AppError("invalid_request", "the value contains a line break or another control character");
    }
  }

  async function seal(value: string) {
    const sealed = await sealValue(await deps.sealingKey(), value);
    return { sealed_value: sealed.sealed, sealing_key_id: sealed.keyId, last4: lastFour(value) };
  }

  /**
   * An agent holding a folder_standing approval of `folder` may call every credential in it at
   * once: putting one there (storing it there, moving it there) gives standing access, which is an
   * owner's decision, as approving the folder is (DECISIONS "Teams"), never an admin's alone; so is
   * widening one already there (item-widening.ts), which the folder's approvals cover at call time.
   * Called in the write's transaction, before the write: the check locks the folder and its
   * approvals (findFolderStandingForUpdate), so an owner approving the folder at the same moment
   * either commits first and is seen here, or waits until this write has committed.
   */
  async function refuseFolderStandingWidening(
    repo: ItemsRepo,
    organisationId: string,
    folder: { id: string; name: string } | null,
    writer: ItemWriter,
    doing = "putting one there",
  ): Promise<void> {
    const { role } = writer;
    if (!folder || role === undefined || mayPerform(role, "approvals.decide_folder")) return;
    if (!(await repo.findFolderStandingForUpdate(organisationId, folder.id))) return;
    const needed = rolesFor("approvals.decide_folder");
    throw new AppError(
      "forbidden_role",
      `agents hold a standing approval of every credential in folder ${folder.name}, so ${doing} is an owner's decision, as approving the folder is; you are an ${role} here`,
      { extra: { required_roles: needed, role } },
    );
  }

  async function loadItem(organisationId: string, id: string): Promise<ItemWithFolder> {
    const row = await deps.repo.findItemById(organisationId, id);
    if (!row) throw new AppError("not_found", "no such credential");
    return row;
  }

  /**
   * An edit's body over the stored item, validated as a whole (a placeholder value when the stored
   * one is kept). A folder the body leaves out is not judged again: the item stays where it is.
   */
  function mergeEdit(current: ItemWithFolder, body: Record<string, unknown>, keepValue: boolean) {
    return validate(
      {
        name: body.name ?? current.name,
        value: keepValue ? "kept-value" : body.value,
        environment: body.environment ?? current.environment,
        kind: body.kind ?? current.kind,
        allowed_hosts: body.allowed_hosts ?? current.allowed_hosts,
        inject: body.inject ?? current.inject,
        username: body.username === undefined ? current.username : body.username,
        folder_name: body.folder_name,
      },
      { keepsRefresh: current.inject === "refresh" },
    );
  }

  /**
   * An edit widened the item (item-widening.ts): its standing approvals of the whole credential
   * end with it, each audited as a revoke is, so its agents ask again and the two-person rule
   * applies again (a first approval of one waiting for its second member was forgotten before,
   * updateWholeItemFirstApprovalsVoided). Host-scoped ones stay: they never reach a host added
   * elsewhere.
   */
  async function endWholeItemStanding(
    tx: ItemsTransaction,
    organisationId: string,
    actor: string,
    itemId: string,
    itemName: string,
  ): Promise<void> {
    const revoked = await tx.repo.updateWholeItemStandingRevoked(
      organisationId,
      itemId,
      new Date(),
      operatorIdOf(actor),
    );
    await recordWideningRevokes(tx, organisationId, actor, itemName, revoked);
  }

  /**
   * A replace by name widened the item (the local `vault set`, spec 4.4): every active approval of
   * the whole credential ends with it (items.repo.ts updateWholeItemApprovalsRevoked), each
   * audited as a revoke is. The operator approved the narrower credential; an approval of one
   * named call keeps its host and stays.
   */
  async function endWholeItemApprovals(
    tx: ItemsTransaction,
    organisationId: string,
    actor: string,
    itemId: string,
    itemName: string,
  ): Promise<void> {
    const revoked = await tx.repo.updateWholeItemApprovalsRevoked(
      organisationId,
      itemId,
      new Date(),
      operatorIdOf(actor),
    );
    await recordWideningRevokes(tx, organisationId, actor, itemName, revoked);
  }

  async function recordWideningRevokes(
    tx: ItemsTransaction,
    organisationId: string,
    actor: string,
    itemName: string,
    revoked: readonly { id: string; agent_id: string; environment: string }[],
  ): Promise<void> {
    for (const grant of revoked) {
      await tx.recordEvent({
        organisationId,
        environment: grant.environment,
        actor,
        action: "grant_revoked",
        itemName,
        reason: "credential_widened",
        detail: { grant_id: grant.id, agent_id: grant.agent_id },
      });
    }
  }

  /** `keepsRefresh`: an edit of an item Connect stored as a refresh token, which stays one. */
  function validate(raw: unknown, options: { keepsRefresh?: boolean } = {}) {
    const parsed = itemInput.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      // Only the field's name goes back: zod's message for `value` must never quote the value (a
      // length over the limit is our own sentence, naming the limit).
      const isValue = issue?.path[0] === "value";
      const reason = !isValue
        ? issue?.message
        : issue.code === "too_big"
          ? issue.message
          : "not a string of the allowed length";
      throw new AppError("invalid_request", `invalid ${issue?.path.join(".") || "body"}: ${reason}`);
    }
    const input = parsed.data;
    if (!ITEM_NAME.test(input.name)) {
      throw new AppError(
        "invalid_name",
        "a credential name is 1 to 128 characters: an uppercase letter, then uppercase letters, digits or underscores (e.g. GITHUB_TOKEN)",
      );
    }
    checkValue(input.value);
    if (input.allowed_hosts.length === 0 && !deps.isHostListOptional) {
      throw new AppError("invalid_host", "name at least one host the credential may be sent to");
    }
    const hosts: string[] = [];
    for (const raw of input.allowed_hosts) {
      const check = checkHostname(raw);
      if (!check.ok) throw new AppError(check.code, check.message);
      if (!hosts.includes(check.host)) hosts.push(check.host);
    }
    const inject = formatInjectMode(parseInjectMode(input.inject));
    const username = input.username?.trim() ? input.username.trim() : null;
    if (input.kind === "client_secret" && !username) {
      throw new AppError("invalid_request", "a client_secret item needs the OAuth client ID in username");
    }
    if (inject === "basic" && !username) {
      throw new AppError("invalid_request", "inject basic needs the user name in username");
    }
    if (inject === "sigv4") checkSigV4Item(hosts, username);
    if (inject === "client_credentials") checkAppCredential(input.kind, hosts, username);
    if (inject === "refresh" && !deps.isRefreshTypable && !options.keepsRefresh) {
      throw new AppError(
        "invalid_inject",
        "inject refresh is for the local vault (spec 2.2); on the hosted service a refresh token is stored by Connect",
      );
    }
    if (inject === "refresh" && !input.name.endsWith("_REFRESH")) {
      throw new AppError("invalid_inject", "inject refresh is for a refresh token item named <ITEM>_REFRESH");
    }
    // An app credential is a client secret whatever kind was defaulted (spec 2.1 kinds).
    const kind = inject === "client_credentials" ? "client_secret" : input.kind;
    const folderName = input.folder_name == null ? input.folder_name : checkFolderName(input.folder_name);
    return {
      ...input,
      kind,
      environment: checkEnvironment(input.environment),
      hosts,
      inject,
      username,
      folder_name: folderName,
    };
  }

  /** A folder name as stored (items.schemas.ts normaliseFolderName), or 400 naming the field. */
  function checkFolderName(name: string, field = "folder_name"): string {
    const normalised = normaliseFolderName(name);
    if (normalised === undefined) {
      throw new AppError("invalid_request", `invalid ${field}: a folder name is 1 to 128 characters`);
    }
    return normalised;
  }

  /** DECISIONS "Providers": an app credential of a provider in the table, username = client id. */
  function checkAppCredential(kind: string, hosts: readonly string[], username: string | null): void {
    if (kind === "login")
      throw new AppError("invalid_request", "inject client_credentials needs kind client_secret");
    if (!username) {
      throw new AppError(
        "invalid_request",
        "inject client_credentials needs the OAuth client ID in username",
      );
    }
    const foreign = hosts.find((host) => findProviderByHost(host) === undefined);
    if (foreign !== undefined) {
      throw new AppError(
        "invalid_inject",
        `inject client_credentials is for the hosts of a provider with built-in connect (spotify, github, google, slack, stripe); ${foreign} is not one`,
      );
    }
  }

  /** DECISIONS "Providers": username = access key id; region and service come from each host. */
  function checkSigV4Item(hosts: readonly string[], username: string | null): void {
    if (!username)
      throw new AppError("invalid_request", "inject sigv4 needs the AWS access key id in username");
    const unreadable = hosts.find((host) => readAwsSigningScope(host) === undefined);
    if (unreadable !== undefined) {
      throw new AppError(
        "invalid_inject",
        `inject sigv4 reads the AWS region and service from the host (<service>.<region>.amazonaws.com); ${unreadable} is not such a host`,
      );
    }
  }

  return {
    async storeItem(organisationId, actor, raw, options = {}) {
      const input = validate(raw);
      const sealed = await sealValue(await deps.sealingKey(), input.value);
      const last4 = lastFour(input.value);
      const folderName = input.folder_name ?? null;
      return recorded(async (tx) => {
        // A replace is judged as an edit is (updateItem), on the stored row locked until this
        // commits: one that widens it (more hosts, or another inject mode, item-widening.ts) ends
        // its approvals of the whole credential below, in this transaction, so the wider
        // credential is never stored while an approval of the narrower one still reaches it.
        const found = options.replace
          ? await tx.repo.findItemByName(organisationId, input.environment, input.name)
          : undefined;
        const current = found && (await tx.repo.findItemByIdForUpdate(organisationId, found.id));
        const widening =
          current && findWidening(current, { allowed_hosts: input.hosts, inject: input.inject });
        // In the store's transaction: a refused store leaves no folder behind, and the folder's
        // approvals are checked under the lock the write is made under.
        const folderId = folderName
          ? await tx.repo.findOrInsertFolder(organisationId, input.environment, folderName, newId("fld"))
          : null;
        await refuseFolderStandingWidening(
          tx.repo,
          organisationId,
          folderId && folderName ? { id: folderId, name: folderName } : null,
          options,
        );
        const row = {
          id: newId("itm"),
          organisation_id: organisationId,
          environment: input.environment,
          name: input.name,
          kind: input.kind,
          sealed_value: sealed.sealed,
          sealing_key_id: sealed.keyId,
          last4,
          allowed_hosts: input.hosts,
          inject: input.inject,
          username: input.username,
          folder_id: folderId,
        };
        const written = await refuseDuplicateName(input, async () => {
          if (options.replace) return tx.repo.upsertItemByName(row);
          await tx.repo.insertItem(row);
          return { id: row.id, isNew: true };
        });
        const isNew = written.isNew;
        await tx.recordEvent({
          organisationId,
          environment: input.environment,
          actor,
          action: isNew ? "item_created" : "item_replaced",
          itemName: input.name,
          detail: { allowed_hosts: input.hosts, inject: input.inject },
        });
        if (widening && written.id === current.id) {
          await endWholeItemApprovals(tx, organisationId, actor, written.id, input.name);
        }
        // Read in the write's transaction: a rename or delete committed just after cannot make a
        // stored credential answer as a failure.
        const stored = await tx.repo.findItemById(organisationId, written.id);
        if (!stored) throw new AppError("internal", "the stored credential was not found");
        return toItemView(stored);
      });
    },
    async updateItem(organisationId, actor, id, raw, writer = {}) {
      const body = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, unknown>;
      const keepValue = body.value === undefined || body.value === null || body.value === "";
      // Judged once before the transaction, so a refused edit takes no lock, and the value (the
      // body's alone) sealed there; the merge that is written is judged again on the locked row.
      const seen = mergeEdit(await loadItem(organisationId, id), body, keepValue);
      const sealed = keepValue ? {} : await seal(seen.value);
      return recorded(async (tx) => {
        // A call minting with the old value or client id stores its token first, then this drops it.
        await tx.repo.lockItemTokens(id);
        // The row as it is now, locked until this edit commits: a concurrent edit waits, and then
        // merges against what this one wrote (never writing back a field it read before).
        const current = await tx.repo.findItemByIdForUpdate(organisationId, id);
        if (!current) throw new AppError("not_found", "no such credential");
        const input = mergeEdit(current, body, keepValue);
        // A folder left out stays where it is, under the name it has.
        const toFolder = body.folder_name === undefined ? current.folder_name : (input.folder_name ?? null);
        const isMoved = toFolder !== current.folder_name || input.environment !== current.environment;
        const widening = findWidening(current, { allowed_hosts: input.hosts, inject: input.inject });
        // In the edit's transaction: a refused edit leaves no folder behind, and a move or a widening
        // is checked under the lock it is written under.
        const folderId = !isMoved
          ? current.folder_id
          : toFolder
            ? await tx.repo.findOrInsertFolder(organisationId, input.environment, toFolder, newId("fld"))
            : null;
        if (folderId && toFolder && (isMoved || widening)) {
          await refuseFolderStandingWidening(
            tx.repo,
            organisationId,
            { id: folderId, name: toFolder },
            writer,
            isMoved ? "putting one there" : "widening where one of them is sent",
          );
        }
        await refuseDuplicateName(input, () =>
          tx.repo.updateItem(organisationId, id, {
            name: input.name,
            environment: input.environment,
            kind: input.kind,
            allowed_hosts: input.hosts,
            inject: input.inject,
            username: input.username,
            folder_id: folderId,
            ...sealed,
            updated_at: new Date(),
          }),
        );
        // Before the revoke below (items.repo.ts): a first approval of the narrower credential is no
        // half of an approval of the wider one.
        const voided = widening ? await tx.repo.updateWholeItemFirstApprovalsVoided(organisationId, id) : 0;
        await tx.recordEvent({
          organisationId,
          environment: input.environment,
          actor,
          action: keepValue ? "item_edited" : "item_edited_with_value",
          itemName: input.name,
          detail: {
            allowed_hosts: input.hosts,
            inject: input.inject,
            // A move decides which folder approvals cover the credential: the audit says so.
            ...(isMoved ? { folder: { from: current.folder_name, to: toFolder } } : {}),
            ...(voided > 0 ? { first_approvals_voided: voided } : {}),
          },
        });
        if (widening) await endWholeItemStanding(tx, organisationId, actor, id, input.name);
        const edited = await tx.repo.findItemById(organisationId, id);
        if (!edited) throw new AppError("internal", "the edited credential was not found");
        return toItemView(edited);
      });
    },
    async rotateItem(organisationId, actor, id, value) {
      const current = await loadItem(organisationId, id);
      if (typeof value !== "string") throw new AppError("invalid_request", "value must be a string");
      checkValue(value);
      const sealed = await seal(value);
      await recorded(async (tx) => {
        // A call minting with the old value stores its token first, then this drops it.
        await tx.repo.lockItemTokens(id);
        await tx.repo.updateItem(organisationId, id, { ...sealed, updated_at: new Date() });
        await tx.recordEvent({
          organisationId,
          environment: current.environment,
          actor,
          action: "item_rotated",
          itemName: current.name,
        });
      });
      return toItemView(await loadItem(organisationId, id));
    },
    async createFolder(organisationId, environment, name) {
      const chosen = checkEnvironment(typeof environment === "string" ? environment : undefined);
      const parsed = folderNameText().safeParse(name);
      if (!parsed.success) {
        throw new AppError("invalid_request", `invalid name: ${parsed.error.issues[0]?.message}`);
      }
      const folderName = checkFolderName(parsed.data, "name");
      const id = await deps.repo.findOrInsertFolder(organisationId, chosen, folderName, newId("fld"));
      return { id, name: folderName, environment: chosen };
    },
    async listItems(organisationId, environment) {
      const environments = environment === undefined ? deps.environments : [checkEnvironment(environment)];
      return (await deps.repo.findItems(organisationId, environments)).map(toItemView);
    },
    async deleteItem(organisationId, actor, id) {
      await recorded(async (tx) => {
        const item = await tx.repo.findItemById(organisationId, id);
        if (!item || !(await tx.repo.deleteItem(organisationId, id))) {
          throw new AppError("not_found", "no such credential");
        }
        await tx.recordEvent({
          organisationId,
          environment: item.environment,
          actor,
          action: "item_deleted",
          itemName: item.name,
        });
      });
    },
    async findItemByName(organisationId, environment, name) {
      const row = await deps.repo.findItemByName(organisationId, environment, name);
      return row && toItemView(row);
    },
    async findCallableByName(organisationId, environment, name) {
      const row = await deps.repo.findItemByName(organisationId, environment, name);
      return row && toCallableItem(row);
    },
    async findCallableByHost(organisationId, environment, host) {
      return (await deps.repo.findItemsByHost(organisationId, environment, host)).map(toCallableItem);
    },
    async findCallableById(organisationId, id) {
      const row = await deps.repo.findItemById(organisationId, id);
      return row && toCallableItem(row);
    },
    async storeSealedItem(organisationId, actor, item) {
      const environment = checkEnvironment(item.environment);
      const id = await recorded(async (tx) => {
        // An item of that name replaced (a connect again, or one over an item stored by hand) is
        // judged as an edit is (updateItem) on its row locked until this commits: a wider reach
        // (more hosts, or another inject mode, item-widening.ts) ends the standing approvals of the
        // whole credential, as a widening edit does. A connect that approves its agent writes that
        // approval after this (connect.service.ts), so it stays. The item's token lock is not taken
        // here: a call rotating the old refresh token meanwhile writes it only while it is still the
        // stored one (connect.service.ts keeps its access token the same way).
        const found = await tx.repo.findItemByName(organisationId, environment, item.name);
        const current = found && (await tx.repo.findItemByIdForUpdate(organisationId, found.id));
        const widening =
          current && findWidening(current, { allowed_hosts: item.allowedHosts, inject: item.inject });
        // It stays in its folder, unless widened: the folder's standing approvals would then cover
        // the wider credential, which is an owner's decision (refuseFolderStandingWidening) that a
        // connect does not ask for; out of the folder, its agents ask again.
        const folderId = current && !widening ? current.folder_id : null;
        const stored = await tx.repo.upsertItemByName({
          id: newId("itm"),
          organisation_id: organisationId,
          environment,
          name: item.name,
          kind: "secret",
          sealed_value: item.sealedValue,
          sealing_key_id: item.sealingKeyId,
          last4: item.last4,
          allowed_hosts: [...item.allowedHosts],
          inject: item.inject,
          username: item.username,
          folder_id: folderId,
        });
        // Before the revoke below, as updateItem: a first approval of the narrower credential is no
        // half of an approval of the wider one.
        const voided = widening
          ? await tx.repo.updateWholeItemFirstApprovalsVoided(organisationId, stored.id)
          : 0;
        await tx.recordEvent({
          organisationId,
          environment,
          actor,
          action: stored.isNew ? "item_created" : "item_replaced",
          itemName: item.name,
          detail: {
            allowed_hosts: [...item.allowedHosts],
            inject: item.inject,
            ...(current?.folder_id && !folderId ? { folder: { from: current.folder_name, to: null } } : {}),
            ...(voided > 0 ? { first_approvals_voided: voided } : {}),
          },
        });
        if (widening) await endWholeItemStanding(tx, organisationId, actor, stored.id, item.name);
        return stored.id;
      });
      const stored = await deps.repo.findItemById(organisationId, id);
      if (!stored) throw new AppError("internal", "the connected item was not stored");
      return toItemView(stored);
    },
    inItemTokenLock(itemId, fn) {
      if (!deps.tokens) throw new AppError("internal", "the item token store is not wired");
      return deps.tokens.inItemTokenLock(itemId, fn);
    },
    async noteItemUsed(item, at) {
      const olderThan = new Date(at.getTime() - USE_WRITE_INTERVAL_MS);
      if (item.lastUsedAt && item.lastUsedAt >= olderThan) return;
      await deps.repo.updateItemUsed(item.id, at, olderThan);
    },
  };
}

export type { ItemInput };

/**
 * Who revoked, as a grant records it: the operator id of `operator:<id>`, "local" for the local
 * vault's operator (as grants/standing-scope.ts `operatorIdOf`, which items cannot import: grants
 * imports items).
 */
function operatorIdOf(actor: string): string | null {
  if (actor.startsWith("operator:")) return actor.slice("operator:".length);
  return actor === "operator" ? "local" : null;
}

/** Runs a write that may hit the (environment, name) unique index, as duplicate_name (spec 4.3: 409). */
async function refuseDuplicateName<T>(
  input: { name: string; environment: string },
  write: () => Promise<T>,
): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new AppError(
        "duplicate_name",
        `a credential named ${input.name} already exists in ${input.environment}`,
      );
    }
    throw error;
  }
}
