// What the `vault` commands do as the operator, whichever process holds the database: through a
// running `vault serve` / `vault mcp` (its loopback API and the operator token), or by opening the
// local vault directly when none runs.
import { AppError, isErrorCode } from "@latch/shared/errors";
import { refuseUnsafeText } from "@latch/shared/text/safe-string";
import type { Logger } from "pino";
import type { AuditEventView } from "../audit/audit.repo.ts";
import type { PublicGrant } from "../grants/grant-view.ts";
import type { BodyView } from "../grants/request-body.ts";
import type { ItemView } from "../items/items.schemas.ts";
import { type LocalLock, tryLocalLock } from "../local/local-lock.ts";
import { type LocalRuntime, readLocalRuntime } from "../local/local-server.ts";
import { storeLocalItem } from "../local/local-store.ts";
import { loadOrCreateLocalTokens } from "../local/local-tokens.ts";
import { LOCAL_OPERATOR, localRuntimePath, openLocalVault } from "../local/local-vault.ts";
import { askServerProof } from "../local/server-proof.ts";
import { etagOf } from "../policies/policies.routes.ts";
import type { ExpectedVersion, PolicyList } from "../policies/policies.service.ts";
import type { PolicyPreview } from "../policies/policy-preview.ts";

export interface ItemToStore {
  name: string;
  value: string;
  allowed_hosts: string[];
  inject?: string | undefined;
  username?: string | undefined;
  kind?: string | undefined;
}

export interface LocalOperator {
  storeItem(item: ItemToStore): Promise<ItemView>;
  listItems(): Promise<ItemView[]>;
  deleteItem(name: string): Promise<void>;
  listGrants(): Promise<PublicGrant[]>;
  /** One grant with the body its request would send (what the console shows). */
  findGrant(id: string): Promise<PublicGrant & { body: BodyView | null }>;
  approveGrant(id: string, scope: "once" | "session"): Promise<PublicGrant>;
  revokeGrant(id: string): Promise<PublicGrant>;
  listAudit(filter: { itemName?: string | undefined; limit?: number | undefined }): Promise<AuditEventView[]>;
  /** The ledger as JSON Lines (GET /api/audit/ledger), one line at a time. */
  exportLedger(sinceSeq: number): AsyncIterable<string>;
  getPolicies(): Promise<PolicyList>;
  /** Replaces the policy list if its version is still `expected` (else stale_version). */
  setPolicies(rules: unknown, expected: ExpectedVersion): Promise<PolicyList>;
  previewPolicies(rules: unknown): Promise<PolicyPreview>;
  close(): Promise<void>;
}

const WAIT_FOR_HOLDER_MS = 15_000;

function grantNamed<T extends PublicGrant>(grants: readonly T[], id: string): T {
  const grant = grants.find((g) => g.grant_id === id);
  if (!grant) throw new AppError("not_found", `no approval ${id} (vault grants lists them)`);
  return grant;
}

export async function connectLocalOperator(
  dataDir: string,
  logger: Logger,
  progress: (line: string) => void,
): Promise<LocalOperator> {
  const holder = await reachLocalVault(dataDir);
  if ("url" in holder) return httpOperator(holder.url, loadOrCreateLocalTokens(dataDir).operator);
  progress(`Opening the local vault in ${dataDir} ...`);
  try {
    const vault = await openLocalVault({ dataDir, logger });
    return directOperator(vault, () => holder.lock.release());
  } catch (error) {
    holder.lock.release();
    throw error;
  }
}

/**
 * Who holds the vault in `dataDir`: a running `vault serve` (its URL, once it proved itself), or this process, which took
 * the lock. While another process holds the lock without serving (a `vault set` at work, a
 * `vault serve` still starting), waits for it, up to 15 s, then says so in one sentence.
 */
export async function reachLocalVault(dataDir: string): Promise<{ url: string } | { lock: LocalLock }> {
  const started = Date.now();
  for (;;) {
    const running = await findRunningServer(dataDir);
    if (running) return { url: running.url };
    const lock = tryLocalLock(dataDir);
    if (!("heldBy" in lock)) return { lock };
    if (Date.now() - started > WAIT_FOR_HOLDER_MS) {
      throw new Error(
        `another vault process (pid ${lock.heldBy}) holds ${dataDir} and does not answer; stop it or wait for it to finish`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/**
 * The URL of the `vault serve` / `vault mcp` that runtime.json names, once it has proved it holds
 * the file's key (once per command: every later call of the command goes to that URL). Something
 * else answering there (a dead server's port taken by another program) gets no bearer: the command
 * stops with one sentence, unless runtime.json changed meanwhile (a server restarting), which is
 * read again.
 */
async function findRunningServer(dataDir: string): Promise<LocalRuntime | undefined> {
  const runtime = readLocalRuntime(dataDir);
  if (!runtime) return undefined;
  const proof = await askServerProof(runtime.url, runtime.proofKey);
  if (proof === "proven") return runtime;
  if (proof === "unreachable" || isReplaced(runtime, readLocalRuntime(dataDir))) return undefined;
  throw new Error(
    `the program listening on ${runtime.url} could not prove it is the vault serve that wrote ${localRuntimePath(dataDir)}, so nothing was sent to it; stop that program, or, if no vault serve or vault mcp runs, delete that file and db.lock beside it`,
  );
}

const isReplaced = (read: LocalRuntime, now: LocalRuntime | undefined) => now?.proofKey !== read.proofKey;

function directOperator(
  vault: Awaited<ReturnType<typeof openLocalVault>>,
  release: () => void,
): LocalOperator {
  const org = vault.organisationId;
  // The same edge as the HTTP path: a name or id typed on the command line is safe text.
  async function itemId(name: string): Promise<string> {
    refuseUnsafeText("NAME", name);
    const item = await vault.items.findItemByName(org, vault.environment, name);
    if (!item) throw new AppError("not_found", `no credential named ${name}`);
    return item.id;
  }
  return {
    storeItem: (item) => storeLocalItem(vault, item),
    listItems: () => vault.items.listItems(org),
    deleteItem: async (name) => vault.items.deleteItem(org, LOCAL_OPERATOR, await itemId(name)),
    listGrants: () => vault.grants.listGrants(org),
    findGrant: async (id) => grantNamed(await vault.grants.listGrantsInFull(org), id),
    async approveGrant(id, scope) {
      refuseUnsafeText("GRANT_ID", id);
      return vault.grants.approveGrant(org, LOCAL_OPERATOR, id, scope === "session" ? "session" : "prompt");
    },
    async revokeGrant(id) {
      refuseUnsafeText("GRANT_ID", id);
      return vault.grants.revokeGrant(org, LOCAL_OPERATOR, id);
    },
    async listAudit(filter) {
      refuseUnsafeText("--item", filter.itemName);
      return vault.audit.findAuditEvents(org, filter);
    },
    async *exportLedger(sinceSeq) {
      for await (const line of vault.ledger.exportLedger(org, sinceSeq)) yield `${JSON.stringify(line)}\n`;
    },
    getPolicies: () => vault.policies.getPolicies(org),
    setPolicies: (rules, expected) => vault.policies.replacePolicies(org, LOCAL_OPERATOR, expected, rules),
    previewPolicies: (rules) => vault.policies.previewPolicies(org, rules),
    async close() {
      await vault.close();
      release();
    },
  };
}

function httpOperator(baseUrl: string, token: string): LocalOperator {
  async function call<T>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<T> {
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(60_000),
    });
    const json = (await response.json().catch(() => ({}))) as {
      error?: { code?: string; message?: string; [field: string]: unknown };
    };
    if (!response.ok) {
      const code = json.error?.code && isErrorCode(json.error.code) ? json.error.code : "internal";
      const { code: _code, message, ...extra } = json.error ?? {};
      throw new AppError(code, message ?? `the local server answered ${response.status}`, { extra });
    }
    return json as T;
  }
  return {
    storeItem: async (item) => (await call<{ item: ItemView }>("POST", "/api/items", item)).item,
    listItems: async () => (await call<{ items: ItemView[] }>("GET", "/api/items")).items,
    async deleteItem(name) {
      const items = (await call<{ items: ItemView[] }>("GET", "/api/items")).items;
      const item = items.find((i) => i.name === name);
      if (!item) throw new AppError("not_found", `no credential named ${name}`);
      await call("DELETE", `/api/items/${encodeURIComponent(item.id)}`);
    },
    listGrants: async () => (await call<{ grants: PublicGrant[] }>("GET", "/api/grants")).grants,
    findGrant: async (id) =>
      grantNamed(
        (await call<{ grants: (PublicGrant & { body: BodyView | null })[] }>("GET", "/api/grants")).grants,
        id,
      ),
    approveGrant: async (id, scope) =>
      (await call<{ grant: PublicGrant }>("POST", "/api/grants", { grant_id: id, scope })).grant,
    revokeGrant: async (id) =>
      (await call<{ grant: PublicGrant }>("POST", `/api/grants/${encodeURIComponent(id)}/revoke`)).grant,
    async listAudit(filter) {
      const query = new URLSearchParams();
      if (filter.itemName) query.set("item_name", filter.itemName);
      if (filter.limit) query.set("limit", String(filter.limit));
      return (await call<{ events: AuditEventView[] }>("GET", `/api/audit?${query}`)).events;
    },
    async *exportLedger(sinceSeq) {
      const response = await fetch(`${baseUrl}/api/audit/ledger?since_seq=${sinceSeq}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      if (!response.ok || !response.body) {
        throw new AppError("internal", `the local server answered ${response.status}`);
      }
      const decoder = new TextDecoder();
      for await (const chunk of response.body) yield decoder.decode(chunk, { stream: true });
    },
    getPolicies: () => call<PolicyList>("GET", "/api/policies"),
    setPolicies: (rules, expected) =>
      call<PolicyList>(
        "PUT",
        "/api/policies",
        { rules },
        { "if-match": expected === "any" ? "*" : etagOf(expected) },
      ),
    previewPolicies: (rules) => call<PolicyPreview>("POST", "/api/policies/preview", { rules }),
    close: async () => {},
  };
}
