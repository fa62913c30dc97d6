// Builds the hosted control plane from its configuration: database, repos, services, app.
// main.ts adds the process around it (keys on disk, the proxy, signals); tests call this directly.
import type { SealingPublicKey } from "@latch/shared/crypto/seal";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { buildApp } from "./app.ts";
import { createAuditRepo } from "./audit/audit.repo.ts";
import { logAuditFailure } from "./audit/audit-failure.ts";
import { registerAuthRoutes } from "./auth/auth.routes.ts";
import { createEmailCodeService } from "./auth/email-code.service.ts";
import { keyringPath, loadOrCreateKeyring } from "./auth/kek.ts";
import { createSessionsRepo } from "./auth/sessions.ts";
import { createTotpService } from "./auth/totp.service.ts";
import { createCallsService } from "./calls/calls.service.ts";
import { registerClientsRoutes } from "./clients/clients.routes.ts";
import { clientView, createClientsService } from "./clients/clients.service.ts";
import type { ControlPlaneConfig } from "./config.ts";
import { type DatabaseKind, type OpenDatabase, openDatabase } from "./db/database.ts";
import { runInTransaction } from "./db/transaction.ts";
import type { EgressClient } from "./egress/egress-client.ts";
import type { TicketSigningKey } from "./egress/ticket-key.ts";
import { createTicketMinter } from "./egress/tickets.ts";
import { approvalMail } from "./grants/approval-text.ts";
import { registerApproveLinkRoutes } from "./grants/approve-link.routes.ts";
import { createGrantsRepo } from "./grants/grants.repo.ts";
import { registerGrantsRoutes } from "./grants/grants.routes.ts";
import { createGrantsService } from "./grants/grants.service.ts";
import { registerInboxRoutes } from "./inbox/inbox.routes.ts";
import { createItemsRepo } from "./items/items.repo.ts";
import { registerItemsRoutes } from "./items/items.routes.ts";
import { createItemsService, type ItemsService } from "./items/items.service.ts";
import { createMailer, type Mailer } from "./mail/mailer.ts";
import { registerMcpRoutes } from "./mcp/mcp.routes.ts";
import { createNeedsRepo } from "./needs/needs.repo.ts";
import { registerNeedsRoutes } from "./needs/needs.routes.ts";
import { createNeedsService } from "./needs/needs.service.ts";
import { createOrgsService } from "./orgs/orgs.service.ts";
import { registerPageRoutes } from "./pages/pages.routes.ts";
import { registerResolveRoutes } from "./runtime/resolve.routes.ts";
import { createHostedSurface } from "./tools/tool-context.ts";

export interface ControlPlaneDeps {
  config: ControlPlaneConfig;
  dataDir: string;
  ticketKey: TicketSigningKey;
  egress: { client: EgressClient; sealingKey(): Promise<SealingPublicKey> };
  logger: Logger;
  /** Tests pass an open database; otherwise one is opened from the config. */
  database?: OpenDatabase;
  /** Tests pass a mailer bound to their SMTP server, and a clock they control. */
  mailer?: Mailer;
  now?: () => Date;
}

export interface ControlPlane {
  app: FastifyInstance;
  database: OpenDatabase;
  databaseKind: DatabaseKind;
  items: ItemsService;
  close(): Promise<void>;
}

export async function buildControlPlane(deps: ControlPlaneDeps): Promise<ControlPlane> {
  const { config, logger } = deps;
  const database =
    deps.database ?? (await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: deps.dataDir }));
  const audit = createAuditRepo(database.db);
  const items = createItemsService({
    repo: createItemsRepo(database.db),
    sealingKey: deps.egress.sealingKey,
    recordEvent: audit.insertAuditEvent,
    environments: config.LATCH_ENVIRONMENTS,
    defaultEnvironment: config.LATCH_ENVIRONMENTS[0]!,
  });

  const now = deps.now ?? (() => new Date());
  const mailer = deps.mailer ?? createMailer({ smtpUrl: config.SMTP_URL, dataDir: deps.dataDir, logger });
  const keyring = loadOrCreateKeyring(keyringPath(deps.dataDir));
  const sessions = createSessionsRepo(database.db);
  const orgs = createOrgsService({ db: database.db, now });
  const authDeps = {
    db: database.db,
    emailCodes: createEmailCodeService({ db: database.db, mailer, keyring, now }),
    totp: createTotpService({ db: database.db, keyring, now }),
    sessions,
    orgs,
    isSecureCookies: config.BASE_URL.startsWith("https://"),
    now,
  };

  const db = database.db;
  const defaultEnvironment = config.LATCH_ENVIRONMENTS[0]!;
  const clients = createClientsService({
    db,
    recordEvent: audit.insertAuditEvent,
    environments: config.LATCH_ENVIRONMENTS,
    defaultEnvironment,
    baseUrl: config.BASE_URL,
    now,
  });
  const grants = createGrantsService({
    repo: createGrantsRepo(db),
    recordEvent: audit.insertAuditEvent,
    now,
    approvalCodes: { hashCode: keyring.hashCode },
    notifyApproval: async ({ organisationId, grant, approvalCode, linkToken }) => {
      const members = await orgs.findMembers(organisationId);
      const link = `${config.BASE_URL}/approve?token=${linkToken}`;
      const mail = approvalMail(grant, approvalCode, link);
      for (const member of members) await mailer.send({ to: member.email, ...mail });
    },
  });
  const minter = createTicketMinter({
    key: deps.ticketKey,
    issuer: config.BASE_URL,
    audience: config.EGRESS_AUDIENCE,
  });
  const calls = createCallsService({
    findItemByName: items.findCallableByName,
    findItemsByHost: items.findCallableByHost,
    recordEvent: audit.insertAuditEvent,
    minter,
    egress: deps.egress.client,
    onAuditFailure: logAuditFailure(logger),
  });
  const needs = createNeedsService({
    repo: createNeedsRepo(db),
    baseUrl: config.BASE_URL,
    now,
    inTransaction: (fn) =>
      runInTransaction(db, (trx) => {
        const trxAudit = createAuditRepo(trx);
        return fn({
          repo: createNeedsRepo(trx),
          items: createItemsService({
            repo: createItemsRepo(trx),
            sealingKey: deps.egress.sealingKey,
            recordEvent: trxAudit.insertAuditEvent,
            environments: config.LATCH_ENVIRONMENTS,
            defaultEnvironment,
          }),
          grants: createGrantsService({
            repo: createGrantsRepo(trx),
            recordEvent: trxAudit.insertAuditEvent,
            now,
          }),
        });
      }),
  });
  const tools = { items, grants, calls, surface: createHostedSurface(needs) };
  const access = {
    listClients: async (organisationId: string) => {
      const [rows, fetched] = await Promise.all([
        clients.listClients(organisationId),
        audit.findFetchedNames(organisationId),
      ]);
      // A model client acts as agent:<id>, a trusted one as trusted:<id> (see the audit filter).
      return rows.map((row) => ({
        ...clientView(row),
        fetched_names: fetched.get(`${row.kind === "trusted" ? "trusted" : "agent"}:${row.id}`) ?? [],
      }));
    },
    listGrants: async (organisationId: string) => {
      const rows = await db
        .selectFrom("grants")
        .select(["id", "item_id"])
        .where("organisation_id", "=", organisationId)
        .execute();
      const itemOf = new Map(rows.map((r) => [r.id, r.item_id]));
      return (await grants.listGrants(organisationId)).map((g) => ({
        ...g,
        item_id: itemOf.get(g.grant_id) ?? null,
      }));
    },
    listLedger: async (organisationId: string) =>
      (
        await audit.findAuditEvents(organisationId, {
          actions: ["client_issued", "client_rotated", "client_revoked"],
        })
      ).map((e) => ({ at: e.at, action: e.action, ...e.detail, revoked: e.action === "client_revoked" })),
  };

  const app = await buildApp({
    logger,
    isDatabaseReady: () => database.ping(),
    isEgressReady: () => deps.egress.client.isHealthy(),
    sessions: {
      sessions,
      baseUrl: config.BASE_URL,
      now,
      identifyBearer: async (token) =>
        (await clients.authenticate(token))?.kind as "model" | "trusted" | undefined,
    },
    routes: [
      (app) => registerAuthRoutes(app, { ...authDeps, access }),
      (app) => registerItemsRoutes(app, { db, items }),
      (app) => registerClientsRoutes(app, { db, clients }),
      (app) =>
        registerGrantsRoutes(app, {
          db,
          grants,
          items,
          clients,
          audit,
          environments: config.LATCH_ENVIRONMENTS,
        }),
      (app) => registerInboxRoutes(app, { db, grants, needs }),
      (app) =>
        registerMcpRoutes(app, {
          baseUrl: config.BASE_URL,
          clients,
          tools,
          logError: (error) => logger.error({ err: error }, "tool failed"),
        }),
      (app) =>
        registerResolveRoutes(app, {
          clients,
          items,
          minter,
          egress: deps.egress.client,
          recordEvent: audit.insertAuditEvent,
        }),
      (app) => registerPageRoutes(app, { db: database.db }),
      (app) => registerNeedsRoutes(app, { db, needs }),
      (app) => registerApproveLinkRoutes(app, { db, grants }),
    ],
  });
  await app.ready();

  return {
    app,
    database,
    databaseKind: database.kind,
    items,
    async close() {
      await app.close();
      mailer.close();
      if (!deps.database) await database.close();
    },
  };
}
