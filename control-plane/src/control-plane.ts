// Builds the hosted control plane from its configuration: database, repos, services, app.
// main.ts adds the process around it (keys on disk, the proxy, signals); tests call this directly.
import type { SealingPublicKey } from "@latch/shared/crypto/seal";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import { buildApp } from "./app.ts";
import { logDatabaseFailure } from "./audit/audit-failure.ts";
import { openAuditKeys } from "./audit/audit-keys.ts";
import { registerLedgerRoutes } from "./audit/ledger.routes.ts";
import { startCheckpointSchedule } from "./audit/ledger.service.ts";
import { registerAuthRoutes } from "./auth/auth.routes.ts";
import { keyringPath, loadOrCreateKeyring } from "./auth/kek.ts";
import { requireOperator, requireOrgOperator } from "./auth/operator-guard.ts";
import { registerPasskeyRoutes } from "./auth/passkeys.routes.ts";
import { operatorOnly } from "./auth/principal.ts";
import { sessionCookieNames } from "./auth/sessions.ts";
import { startAbandonedCallsSchedule } from "./calls/abandoned-calls.ts";
import { registerClientsRoutes } from "./clients/clients.routes.ts";
import type { ControlPlaneConfig } from "./config.ts";
import { registerConnectRoutes } from "./connect/connect.routes.ts";
import { type DatabaseKind, type OpenDatabase, openDatabase } from "./db/database.ts";
import { checkDatabaseRole } from "./db/database-role.ts";
import type { EgressClient } from "./egress/egress-client.ts";
import { createSpentTicketsRepo } from "./egress/spent-tickets.repo.ts";
import { createTicketFence } from "./egress/ticket-fence.ts";
import type { TicketSigningKey } from "./egress/ticket-key.ts";
import { createTicketMinter } from "./egress/tickets.ts";
import { registerApproveLinkRoutes } from "./grants/approve-link.routes.ts";
import { registerAuditExportRoutes } from "./grants/audit-export.routes.ts";
import { registerGrantsRoutes } from "./grants/grants.routes.ts";
import { registerInboxRoutes } from "./inbox/inbox.routes.ts";
import { createInboxHub } from "./inbox/inbox-hub.ts";
import { registerInboxStreamRoutes } from "./inbox/inbox-stream.routes.ts";
import { registerItemsRoutes } from "./items/items.routes.ts";
import type { ItemsService } from "./items/items.service.ts";
import { createRateLimitRepo } from "./limits/rate-limit.repo.ts";
import { createRateLimiter } from "./limits/rate-limit.ts";
import { createMailer, type Mailer } from "./mail/mailer.ts";
import { registerMcpRoutes } from "./mcp/mcp.routes.ts";
import { type ControlPlaneMetrics, observeToolAnswer } from "./metrics/metrics.ts";
import { registerNeedsRoutes } from "./needs/needs.routes.ts";
import { looksLikeJwt } from "./oauth/access-tokens.ts";
import { loadOrCreateOAuthKeys } from "./oauth/oauth-keys.ts";
import { createOAuthServer, type OAuthServer } from "./oauth/oauth-server.ts";
import { registerOpenApiRoutes } from "./openapi/openapi.routes.ts";
import { registerInviteRoutes } from "./orgs/invite.routes.ts";
import { registerMembersRoutes } from "./orgs/members.routes.ts";
import { registerPageRoutes } from "./pages/pages.routes.ts";
import { registerPolicyRoutes } from "./policies/policies.routes.ts";
import { createPrunes, startPruneSchedule } from "./prune-rounds.ts";
import { registerPushRoutes } from "./push/push.routes.ts";
import { loadOrCreateVapidKeys } from "./push/vapid-keys.ts";
import { registerResolveRoutes } from "./resolve/resolve.routes.ts";
import { createServices, type HostedServices } from "./services.ts";
import { registerSiteRoutes } from "./site/site.routes.ts";
import { startDomainRecheckSchedule } from "./sso/domain-recheck.ts";
import { createSsoRepo } from "./sso/sso.repo.ts";
import { registerSsoRoutes } from "./sso/sso.routes.ts";
import { startTelemetry } from "./telemetry.ts";

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
  /** Prometheus metrics (main.ts serves them on METRICS_LISTEN). */
  metrics?: ControlPlaneMetrics;
}

export interface ControlPlane {
  app: FastifyInstance;
  database: OpenDatabase;
  databaseKind: DatabaseKind;
  items: ItemsService;
  /** The plane's services (tests use them to set up what a route would). */
  services: HostedServices;
  close(): Promise<void>;
}

export async function buildControlPlane(deps: ControlPlaneDeps): Promise<ControlPlane> {
  const { config, logger } = deps;
  // The role is judged before the first migration (PGlite has no roles): a refused start writes
  // nothing, so no table is left owned by the role it refused.
  const database =
    deps.database ??
    (await openDatabase({
      databaseUrl: config.DATABASE_URL,
      dataDir: deps.dataDir,
      beforeMigrate: async (db, kind) => {
        if (kind !== "postgres") return;
        await checkDatabaseRole(db, {
          isProduction: config.NODE_ENV === "production",
          warn: (sentence) => logger.warn(sentence),
        });
      },
    }));
  const db = database.db;
  const now = deps.now ?? (() => new Date());
  const mailer = deps.mailer ?? createMailer({ smtpUrl: config.SMTP_URL, dataDir: deps.dataDir, logger });
  const minter = createTicketMinter({
    key: deps.ticketKey,
    issuer: config.BASE_URL,
    audience: config.EGRESS_AUDIENCE,
  });
  const auditKeys = await openAuditKeys(deps.dataDir, config.AUDIT_SIGNING_KEYS_FILE);
  const tracing = await startTelemetry({ endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT });
  // One per process: it fences in this database's spent-ticket table when the proxies spend ids
  // there, else asks a proxy, and keeps asking for a ticket nobody could answer yet.
  const fence = createTicketFence({
    egress: deps.egress.client,
    spentTickets: createSpentTicketsRepo(db),
    logger,
  });
  // The OAuth server needs the clients service, and revoking an OAuth client needs the server.
  let oauthServer: OAuthServer | undefined;
  const services = createServices(db, {
    kind: "hosted",
    environments: config.LATCH_ENVIRONMENTS,
    sealingKey: deps.egress.sealingKey,
    egress: deps.egress.client,
    fence,
    minter,
    logger,
    now,
    baseUrl: config.BASE_URL,
    mailer,
    keyring: loadOrCreateKeyring(config.KEK_KEYRING_FILE ?? keyringPath(deps.dataDir)),
    auditKeys,
    ...(deps.metrics ? { onAuditEvent: deps.metrics.countAuditEvent } : {}),
    onOAuthClientRevoked: (client) => oauthServer?.service.endClient(client) ?? Promise.resolve(),
    push: {
      keys: loadOrCreateVapidKeys(deps.dataDir, config.PUSH_VAPID_KEYS_FILE),
      // RFC 8292 2.1: who runs this server, for the push service to reach; an https origin when
      // there is one (a push service refuses a localhost one).
      subject: config.BASE_URL.startsWith("https://") ? config.BASE_URL : "mailto:push@latch.invalid",
      allowedHosts: config.PUSH_SERVICE_HOSTS,
    },
    onMemberOAuthEnded: (organisationId, operatorId) =>
      oauthServer?.service.endMemberConsents(organisationId, operatorId) ?? Promise.resolve(),
    ssoDnsUrl: config.SSO_DNS_URL,
  });
  const { audit, items, grants, clients, needs, sessions } = services;
  const oauth = createOAuthServer({
    db,
    baseUrl: config.BASE_URL,
    dataDir: deps.dataDir,
    keysFile: config.OAUTH_JWKS_FILE,
    keys: await loadOrCreateOAuthKeys(deps.dataDir, config.OAUTH_JWKS_FILE),
    egress: deps.egress.client,
    minter,
    clients,
    orgs: services.orgs,
    findSsoRequiringOrganisations: (operatorId) => createSsoRepo(db).findRequiringOrganisationIds(operatorId),
    environments: config.LATCH_ENVIRONMENTS,
    recordEvent: audit.insertAuditEvent,
    isOperator: async (operatorId) => (await services.totp.findOperator(operatorId)) !== undefined,
    onLedgerFailure: logDatabaseFailure(
      logger,
      "access ledger row not written; the token was still issued or revoked",
    ),
    onServerError: (err) =>
      logger.error({ err }, "the OAuth server failed a request (answered server_error)"),
    now,
  });
  oauthServer = oauth;
  // The live inbox follows the ledger every quarter second while a stream is open (within 1 s).
  const inboxHub = createInboxHub({ audit, pollMs: 250, logger });
  const sessionCookie = sessionCookieNames(config.BASE_URL.startsWith("https://")).session;
  const authDeps = {
    emailCodes: services.emailCodes,
    totp: services.totp,
    passkeys: services.passkeys,
    sessions,
    orgs: services.orgs,
    isSecureCookies: config.BASE_URL.startsWith("https://"),
    now,
    onSignOut: oauth.service.endSignIn,
    checkSignInAllowed: services.sso.signIn.refuseUnlessAllowed,
    mailer,
  };
  const limiter = createRateLimiter(createRateLimitRepo(db), now);

  // An OAuth access token (a JWT) or an avm_/avt_ bearer.
  const authenticateBearer = (token: string) =>
    looksLikeJwt(token) ? oauth.tokens.authenticate(token) : clients.authenticate(token);
  const app = await buildApp({
    logger,
    isDatabaseReady: () => database.ping(),
    isEgressServing: () => deps.egress.client.replicaStates().includes("serving"),
    trustedProxies: config.TRUST_PROXY,
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
    sessions: {
      sessions,
      baseUrl: config.BASE_URL,
      now,
      authenticateBearer,
      // avm_/avt_ bearers only; an OAuth access token is checked in full on every request.
      recallBearer: (token) => (looksLikeJwt(token) ? Promise.resolve(undefined) : clients.recall(token)),
      hasAuthenticator: services.hasSecondFactor,
      stepUpFactors: services.stepUpFactors,
    },
    routes: [
      (app) => registerAuthRoutes(app, { ...authDeps, access: services.access }),
      (app) =>
        registerPasskeyRoutes(app, {
          passkeys: services.passkeys,
          sessions,
          totp: services.totp,
          defaultOrganisation: services.orgs.findDefaultOrganisation,
          checkSignInAllowed: services.sso.signIn.refuseUnlessAllowed,
          limiter,
          mailer,
          isSecureCookies: authDeps.isSecureCookies,
          now,
        }),
      (app) =>
        registerSsoRoutes(app, {
          connections: services.sso.connections,
          signIn: services.sso.signIn,
          sessions,
          slugOf: async (organisationId) =>
            (await services.orgs.findOrganisation(organisationId))?.slug ?? organisationId,
          limiter,
          isSecureCookies: authDeps.isSecureCookies,
          baseUrl: config.BASE_URL,
          now,
        }),
      (app) => registerItemsRoutes(app, { items }),
      (app) => registerClientsRoutes(app, { clients }),
      (app) =>
        registerGrantsRoutes(app, {
          grants,
          items,
          audit,
          environments: config.LATCH_ENVIRONMENTS,
        }),
      (app) => registerInboxRoutes(app, { grants, needs }),
      (app) =>
        registerPushRoutes(app, {
          push: services.push,
          access: {
            // A device is the caller's own: an account action, whatever the role.
            config: operatorOnly("account"),
            preValidation: async (request) => {
              await requireOperator(request, { mfa: true });
            },
            // A device is the operator's own, whatever organisation the session acts in.
            operatorOf: (request) => requireOperator(request, { mfa: true }),
          },
        }),
      (app) =>
        registerInboxStreamRoutes(app, {
          hub: inboxHub,
          audit,
          access: {
            // Every member sees the inbox (DECISIONS "Teams").
            config: operatorOnly("org.read"),
            preValidation: async (request) => {
              await requireOrgOperator(request);
            },
            callerOf: async (request) => {
              const operator = await requireOrgOperator(request);
              return { organisationId: operator.organisationId, sessionId: operator.session.id };
            },
            // Signed out, switched away, removed, or shut out by "Require SSO" (as every other
            // route answers sso_required): the stream ends at the next check.
            isStillAllowed: async (request, organisationId) => {
              const token = request.cookies[sessionCookie];
              const live = token ? await sessions.findLiveSessionByToken(token, now()) : undefined;
              return Boolean(
                live?.session.is_mfa_passed &&
                  live.session.organisation_id === organisationId &&
                  live.role &&
                  !live.ssoRequiredSlug,
              );
            },
          },
        }),
      (app) => {
        // Every member reads the policy and previews a change; owners and admins save one, after a step-up.
        const checked = async (request: FastifyRequest) => {
          await requireOrgOperator(request);
        };
        registerPolicyRoutes(app, {
          policies: services.policies,
          variant: "hosted",
          access: {
            read: { config: operatorOnly("org.read"), preValidation: checked },
            // DECISIONS "Passkeys and single sign-on": editing policies needs a fresh verification.
            write: {
              config: {
                ...operatorOnly("policies.write"),
                stepUp: { doing: "changing the organisation's policies" },
              },
              preValidation: checked,
            },
            callerOf: (request) => requireOrgOperator(request),
          },
        });
      },
      (app) =>
        registerAuditExportRoutes(app, {
          audit,
          clientNames: async (organisationId) =>
            new Map((await clients.listClients(organisationId)).map((c) => [c.id, c.name])),
        }),
      (app) =>
        registerMcpRoutes(app, {
          baseUrl: config.BASE_URL,
          tools: { ...services.tools, onToolAnswer: observeToolAnswer(deps.metrics) },
          logError: (error) => logger.error({ err: error }, "tool failed"),
          isBearerLive: clients.isBearerLive,
          authenticateBearer,
          recheckBearer: (token: string) =>
            looksLikeJwt(token)
              ? oauth.tokens.authenticate(token, { isUse: false })
              : clients.authenticate(token),
        }),
      (app) =>
        registerResolveRoutes(app, {
          items,
          minter,
          egress: deps.egress.client,
          recordEvent: audit.insertAuditEvent,
        }),
      (app) =>
        registerPageRoutes(app, {
          totp: services.totp,
          orgs: services.orgs,
          hasSecondFactor: services.hasSecondFactor,
        }),
      (app) =>
        registerSiteRoutes(app, {
          baseUrl: config.BASE_URL,
          isProduction: config.NODE_ENV === "production",
          now: deps.now ?? (() => new Date()),
        }),
      (app) => registerNeedsRoutes(app, { needs }),
      (app) => registerApproveLinkRoutes(app, { grants }),
      (app) => oauth.registerRoutes(app),
      (app) => registerConnectRoutes(app, { connect: services.connect }),
      (app) =>
        registerMembersRoutes(app, {
          members: services.members,
          invites: services.invites,
          orgs: services.orgs,
          sessions,
        }),
      (app) =>
        registerInviteRoutes(app, {
          invites: services.invites,
          orgs: services.orgs,
          sessions,
          findOperatorEmail: async (operatorId) => (await services.totp.findOperator(operatorId))?.email,
        }),
      (app) =>
        registerLedgerRoutes(app, {
          ledger: services.ledger,
          publishedKeys: auditKeys.published,
          access: {
            // The ledger is the audit's full export: owners, admins and auditors (DECISIONS).
            config: operatorOnly("audit.export"),
            preValidation: async (request) => {
              await requireOrgOperator(request);
            },
            organisationOf: async (request) => (await requireOrgOperator(request)).organisationId,
          },
        }),
      // Last: the document describes every route registered before it (and itself).
      (app) => registerOpenApiRoutes(app, { baseUrl: config.BASE_URL }),
    ],
  });
  await app.ready();
  const stopCheckpoints = startCheckpointSchedule(services.ledger, logger);
  const stopDomainRechecks = startDomainRecheckSchedule(services.sso.domainRecheck, logger);
  const stopPrunes = startPruneSchedule(createPrunes(db, now, services.emailCodes), logger);
  // One-call approvals whose control plane died mid-call (this one before a restart, or a replica).
  const stopAbandonedCalls = startAbandonedCallsSchedule(services.abandonedCalls, logger);

  return {
    app,
    database,
    databaseKind: database.kind,
    items,
    services,
    async close() {
      stopCheckpoints();
      stopDomainRechecks();
      stopPrunes();
      stopAbandonedCalls();
      await app.close();
      await tracing.shutdown();
      mailer.close();
      if (!deps.database) await database.close();
    },
  };
}
