// The local variant's services on one laptop: the embedded database in DATA_DIR, an egress proxy
// child process, one organisation and one environment. `vault serve`, `vault mcp` and the CLI
// commands all open it through here.

import { join } from "node:path";
import type { SealingPublicKey } from "@latch/shared/crypto/seal";
import { ensurePrivateDir } from "@latch/shared/files";
import type { Logger } from "pino";
import type { AuditRepo } from "../audit/audit.repo.ts";
import { openAuditKeys } from "../audit/audit-keys.ts";
import type { LedgerService } from "../audit/ledger.service.ts";
import type { AuditKeysDocument } from "../audit/ledger-verify.ts";
import type { AbandonedCalls } from "../calls/abandoned-calls.ts";
import type { CallsService } from "../calls/calls.service.ts";
import { type OpenDatabase, openDatabase } from "../db/database.ts";
import { connectEgress, type EgressConnection } from "../egress/connect-egress.ts";
import type { EgressClient } from "../egress/egress-client.ts";
import { loadOrCreateTicketKey } from "../egress/ticket-key.ts";
import { createTicketMinter } from "../egress/tickets.ts";
import type { GrantsService } from "../grants/grants.service.ts";
import type { ItemsService } from "../items/items.service.ts";
import { type RewrapReport, rewrapSealedValues } from "../items/seal-rewrap.ts";
import { createSealedValuesRepo } from "../items/sealed-values.repo.ts";
import type { PoliciesService } from "../policies/policies.service.ts";
import { createServices } from "../services.ts";
import type { ToolHandlers } from "../tools/tool-answer.ts";
import { createReadCache } from "./read-cache.ts";

export const LOCAL_ORGANISATION_ID = "org_local";
export const LOCAL_ENVIRONMENT = "production";
export const LOCAL_OPERATOR = "operator";

export interface LocalEgress {
  client: EgressClient;
  sealingKey(): Promise<SealingPublicKey>;
  close?(): Promise<void>;
}

export interface LocalVaultOptions {
  dataDir: string;
  logger: Logger;
  /** PostgreSQL instead of the embedded database (tests run both). */
  databaseUrl?: string | undefined;
  /** An already-open database (tests share one per worker). */
  database?: OpenDatabase;
  /** An already-running proxy (tests run one in-process with their test knobs). */
  egress?: LocalEgress;
  /** The ticket audience the proxy expects. */
  audience?: string;
  /** Where a spawned proxy listens; 0 picks a free port so a hosted instance on 50051 is no obstacle. */
  egressPort?: number;
  /** Which organisation the vault acts in; tests give each its own. */
  organisationId?: string;
  now?: () => Date;
}

export interface LocalVault {
  organisationId: string;
  environment: string;
  database: OpenDatabase;
  items: ItemsService;
  grants: GrantsService;
  calls: CallsService;
  audit: AuditRepo;
  ledger: LedgerService;
  /** One-call approvals whose call a killed vault left unsettled (calls/abandoned-calls.ts). */
  abandonedCalls: AbandonedCalls;
  /** The vault's policy rules (`vault policy`, DECISIONS "Policies"): the MCP tools apply them. */
  policies: PoliciesService;
  /** The checkpoint keys' public halves (GET /.well-known/latch-audit-keys.json). */
  auditKeys(): AuditKeysDocument;
  tools: ToolHandlers;
  /** Resolves once the egress proxy answers (started now if it was not yet). */
  egressReady(): Promise<void>;
  /** `vault seal-rewrap --local`: every stored value sealed again under the proxy's current key. */
  rewrapSealedValues(progress: (line: string) => void): Promise<RewrapReport>;
  close(): Promise<void>;
}

export async function openLocalVault(options: LocalVaultOptions): Promise<LocalVault> {
  ensurePrivateDir(options.dataDir);
  const database =
    options.database ?? (await openDatabase({ databaseUrl: options.databaseUrl, dataDir: options.dataDir }));
  const ticketKey = loadOrCreateTicketKey(options.dataDir);
  // The proxy starts on first use: listing credentials or grants needs no proxy, storing or calling does.
  const egress =
    options.egress ??
    lazyEgress(() =>
      connectEgress({ EGRESS_PORT: options.egressPort ?? 0 }, options.dataDir, options.logger),
    );
  const organisationId = options.organisationId ?? LOCAL_ORGANISATION_ID;
  const auditKeys = await openAuditKeys(options.dataDir);
  const minter = createTicketMinter({
    key: ticketKey,
    issuer: "latch-local",
    audience: options.audience ?? "latch-egress",
  });
  const { audit, ledger, items, grants, calls, orgs, policies, tools, abandonedCalls } = createServices(
    database.db,
    {
      kind: "local",
      auditKeys,
      organisationId,
      // The embedded database has one writer, this process (local/local-lock.ts); a PostgreSQL one
      // may have others, so its lookups always read it.
      readCache: database.kind === "pglite" ? createReadCache() : undefined,
      environments: [LOCAL_ENVIRONMENT],
      sealingKey: () => egress.sealingKey(),
      egress: egress.client,
      minter,
      logger: options.logger,
      now: options.now ?? (() => new Date()),
    },
  );
  await orgs.ensureOrganisation({ id: organisationId, name: "Local vault" });

  return {
    organisationId,
    environment: LOCAL_ENVIRONMENT,
    database,
    items,
    grants,
    calls,
    audit,
    ledger,
    abandonedCalls,
    policies,
    auditKeys: auditKeys.published,
    tools,
    async egressReady() {
      await egress.sealingKey();
    },
    rewrapSealedValues: (progress) =>
      rewrapSealedValues({
        repo: createSealedValuesRepo(database.db),
        sealingKey: () => egress.sealingKey(),
        minter,
        egress: egress.client,
        progress,
      }),
    async close() {
      if (!options.egress) await egress.close?.();
      if (!options.database) await database.close();
    },
  };
}

/** Where the process holding the local database says how to reach it. */
export function localRuntimePath(dataDir: string): string {
  return join(dataDir, "local", "runtime.json");
}

/** An egress connection made on first use, once, even under concurrent first calls. */
export function lazyEgress(connect: () => Promise<EgressConnection>): LocalEgress {
  let connection: Promise<EgressConnection> | undefined;
  let connected: EgressConnection | undefined;
  const get = () => {
    connection ??= connect().then(
      (made) => {
        connected = made;
        return made;
      },
      (error: unknown) => {
        connection = undefined;
        throw error;
      },
    );
    return connection;
  };
  const client: EgressClient = {
    execute: async (ticket, deadlineMs) => (await get()).client.execute(ticket, deadlineMs),
    resolve: async (ticket) => (await get()).client.resolve(ticket),
    fetchDocument: async (ticket, deadlineMs) => (await get()).client.fetchDocument(ticket, deadlineMs),
    sendPush: async (ticket, deadlineMs) => (await get()).client.sendPush(ticket, deadlineMs),
    getInfo: async () => (await get()).client.getInfo(),
    fence: async (ticket) => (await get()).client.fence(ticket),
    rewrap: async (ticket) => (await get()).client.rewrap(ticket),
    isHealthy: async () => (await get()).client.isHealthy(),
    replicaStates: () => connected?.client.replicaStates() ?? [],
    close: () => {},
  };
  return {
    client,
    sealingKey: async () => (await get()).sealingKey(),
    async close() {
      if (connection) await (await connection.catch(() => undefined))?.close();
    },
  };
}
