// The one place that builds repos and services from a database handle: for the hosted plane, for
// the local vault and, again on a transaction's handle, for work that spans features (fulfilling a
// need, revoking a client). The variant says what differs between hosted and local.
import type { SealingPublicKey } from "@latch/shared/crypto/seal";
import type { Kysely } from "kysely";
import type { Logger } from "pino";
import { createAccessService } from "./access/access.service.ts";
import { type AuditEvent, type AuditRepo, createAuditRepo } from "./audit/audit.repo.ts";
import { logAuditFailure, logDatabaseFailure } from "./audit/audit-failure.ts";
import type { AuditSigner } from "./audit/audit-keys.ts";
import { createLedgerRepo } from "./audit/ledger.repo.ts";
import { createLedgerService } from "./audit/ledger.service.ts";
import type { AuditKeysDocument } from "./audit/ledger-verify.ts";
import { createEmailCodeService } from "./auth/email-code.service.ts";
import { createEmailCodesRepo } from "./auth/email-codes.repo.ts";
import type { Keyring } from "./auth/kek.ts";
import { createOperatorsRepo } from "./auth/operators.repo.ts";
import { createPasskeysRepo } from "./auth/passkeys.repo.ts";
import { createPasskeysService, relyingPartyOf } from "./auth/passkeys.service.ts";
import { isRole, mayPerform } from "./auth/permissions.ts";
import { createSessionsRepo } from "./auth/sessions.repo.ts";
import { createTotpService } from "./auth/totp.service.ts";
import { createAbandonedCalls } from "./calls/abandoned-calls.ts";
import { createCallContextRepo } from "./calls/call-context.repo.ts";
import { createCallsService } from "./calls/calls.service.ts";
import { findPlanItems } from "./calls/token-plan.ts";
import { createClientsRepo } from "./clients/clients.repo.ts";
import { type ClientsTransaction, createClientsService } from "./clients/clients.service.ts";
import { createConnectRepo } from "./connect/connect.repo.ts";
import { createConnectService } from "./connect/connect.service.ts";
import type { ClientRow, Database } from "./db/schema.ts";
import { inAdvisoryLock, runInTransaction } from "./db/transaction.ts";
import type { EgressClient } from "./egress/egress-client.ts";
import { createSpentTicketsRepo } from "./egress/spent-tickets.repo.ts";
import type { TicketFence } from "./egress/ticket-fence.ts";
import type { TicketMinter } from "./egress/tickets.ts";
import { agentWords, approvalMail } from "./grants/approval-text.ts";
import { createGrantsRepo, type GrantsRepo } from "./grants/grants.repo.ts";
import { createGrantsService } from "./grants/grants.service.ts";
import { createItemTokensRepo, type ItemTokensRepo } from "./items/item-tokens.repo.ts";
import { createItemsRepo, type ItemsRepo } from "./items/items.repo.ts";
import { createItemsService, type ItemsService } from "./items/items.service.ts";
import { createRateLimitRepo } from "./limits/rate-limit.repo.ts";
import { createRateLimiter } from "./limits/rate-limit.ts";
import type { Mailer } from "./mail/mailer.ts";
import { createNeedsRepo } from "./needs/needs.repo.ts";
import { closeAgentNeeds, closeConnectNeedIn, createNeedsService } from "./needs/needs.service.ts";
import { createInvitesRepo } from "./orgs/invites.repo.ts";
import { createInvitesService } from "./orgs/invites.service.ts";
import { createMembersService, type MembersLocked } from "./orgs/members.service.ts";
import { createOrgsRepo, membersLockKey } from "./orgs/orgs.repo.ts";
import { createOrgsService, type OrgsService } from "./orgs/orgs.service.ts";
import { createPoliciesRepo } from "./policies/policies.repo.ts";
import { createPoliciesService } from "./policies/policies.service.ts";
import { createPushRepo } from "./push/push.repo.ts";
import { createPushService, type PushService } from "./push/push.service.ts";
import type { VapidKeys } from "./push/vapid-keys.ts";
import { createDomainRecheck } from "./sso/domain-recheck.ts";
import { createTxtLookup } from "./sso/domain-records.ts";
import { createRelyingParty } from "./sso/oidc-relying-party.ts";
import { createSsoRepo } from "./sso/sso.repo.ts";
import { createSsoConnectionsService, type SsoTransaction } from "./sso/sso-connections.service.ts";
import { createSsoSignInService } from "./sso/sso-sign-in.service.ts";
import { telemetry } from "./telemetry.ts";
import { createHostedSurface, LOCAL_SURFACE } from "./tools/tool-context.ts";
import { createToolHandlers } from "./tools/tools.ts";

interface CommonVariant {
  /** The environments served; the first is the default. */
  environments: readonly string[];
  sealingKey(): Promise<SealingPublicKey>;
  egress: EgressClient;
  /**
   * Fences the ticket of an Execute that did not answer; one per process (it keeps asking for
   * the tickets nobody could answer yet). By default by asking the proxy.
   */
  fence?: TicketFence;
  minter: TicketMinter;
  logger: Logger;
  now: () => Date;
  /** Told of every audit row written (metrics count approval decisions from them). */
  onAuditEvent?: (event: AuditEvent) => void;
  /** The ledger's checkpoint key (DATA_DIR/audit/) and the public keys as published. */
  auditKeys: { signer: AuditSigner; published(): AuditKeysDocument };
}

/** Hosted: many organisations, approval codes, mail to operators, collect requests, clients. */
export interface HostedVariant extends CommonVariant {
  kind: "hosted";
  baseUrl: string;
  mailer: Mailer;
  keyring: Keyring;
  /** Revoking an OAuth client's row ends its consents and tokens too (the OAuth server's work). */
  onOAuthClientRevoked?: (client: ClientRow) => Promise<void>;
  /** Web Push: the VAPID key pair, its RFC 8292 subject, and PUSH_SERVICE_HOSTS. */
  push: { keys: VapidKeys; subject: string; allowedHosts: readonly string[] };
  /** A member gone from an organisation: the OAuth grants they gave there end (the OAuth server's work). */
  onMemberOAuthEnded?: (organisationId: string, operatorId: string) => Promise<void>;
  /** SSO_DNS_URL: the DNS-over-HTTPS JSON API single sign-on's domain check reads TXT records from. */
  ssoDnsUrl: string;
}

/** Local: one organisation, the operator at the keyboard (LOCAL_SURFACE), no approval codes. */
export interface LocalVariant extends CommonVariant {
  kind: "local";
  organisationId: string;
  /**
   * Keeps the call path's item and grant lookups in memory between writes (local/read-cache.ts);
   * only for a database this process alone writes.
   */
  readCache?:
    | {
        items(repo: ItemsRepo): ItemsRepo;
        tokens(repo: ItemTokensRepo): ItemTokensRepo;
        grants(repo: GrantsRepo): GrantsRepo;
      }
    | undefined;
}

function createCoreServices(
  db: Kysely<Database>,
  variant: CommonVariant,
  isLocal: boolean,
  readCache?: LocalVariant["readCache"],
) {
  // With a read cache this process is the database's one writer (see LocalVariant): the ledger's
  // heads are known here, and an append costs a plain insert (ledger.repo.ts isSoleWriter).
  const audit = observeAudit(createAuditRepo(db, { isSoleWriter: Boolean(readCache) }), variant.onAuditEvent);
  const itemsRepo = (handle: Kysely<Database>) =>
    readCache ? readCache.items(createItemsRepo(handle)) : createItemsRepo(handle);
  const items = createItemsService({
    repo: itemsRepo(db),
    // Inside a transaction that spans features (createTransactionServices), its own handle.
    inTransaction: (fn) =>
      db.isTransaction
        ? fn({ repo: itemsRepo(db), recordEvent: audit.insertAuditEvent })
        : runInTransaction(db, (trx) => fn({ repo: itemsRepo(trx), recordEvent: auditIn(trx, variant) })),
    // Its writes change items (a rotated refresh token is stored in place), so they empty the cache too.
    tokens: readCache ? readCache.tokens(createItemTokensRepo(db)) : createItemTokensRepo(db),
    sealingKey: () => variant.sealingKey(),
    recordEvent: audit.insertAuditEvent,
    environments: variant.environments,
    defaultEnvironment: variant.environments[0]!,
    ...(isLocal ? { isHostListOptional: true, isRefreshTypable: true } : {}),
  });
  const calls = createCallsService({
    findItemByName: items.findCallableByName,
    findItemsByHost: items.findCallableByHost,
    recordEvent: audit.insertAuditEvent,
    minter: variant.minter,
    egress: variant.egress,
    fence: variant.fence,
    inItemTokenLock: items.inItemTokenLock,
    noteItemUsed: (item) => items.noteItemUsed(item, variant.now()),
    onAuditFailure: logAuditFailure(variant.logger),
    onGiveBackFailure: logDatabaseFailure(
      variant.logger,
      "a one-call approval whose request never left could not be given back; it stays spent",
    ),
    // Where no read cache answers the lookups, one statement reads what a call needs.
    callContext: readCache ? undefined : createCallContextRepo(db),
    // Only an unanswered call and a retry that would open a new request use these (grants.held_until).
    heldCalls: readCache ? readCache.grants(createGrantsRepo(db)) : createGrantsRepo(db),
    grantClock: variant.now,
  });
  const ledger = createLedgerService({
    repo: createLedgerRepo(db),
    signer: variant.auditKeys.signer,
    publishedKeys: variant.auditKeys.published,
    now: variant.now,
  });
  return { audit, items, calls, ledger };
}

/**
 * The organisation policies (DECISIONS "Policies"): a change and its audit row in one transaction;
 * rate limits counted in the database. `isSoleWriter`: the local embedded database, written by
 * this process alone, so the list in force is trusted from memory.
 */
function createPolicies(
  db: Kysely<Database>,
  variant: CommonVariant,
  audit: AuditRepo,
  items: Pick<ItemsService, "findCallableByName">,
  isSoleWriter: boolean,
) {
  return createPoliciesService({
    repo: createPoliciesRepo(db),
    inTransaction: (fn) =>
      runInTransaction(db, (trx) =>
        fn({
          repo: createPoliciesRepo(trx),
          recordEvent: auditIn(trx, variant),
        }),
      ),
    recordEvent: audit.insertAuditEvent,
    rateLimiter: createRateLimiter(createRateLimitRepo(db), variant.now),
    findCallsBefore: audit.findCallsBefore,
    // The siblings enforcement judges a call by (tools/http-request.tool.ts), read as it reads them.
    findJudgedItems: async (organisationId, environment, itemName) => {
      const scope = { organisationId, environment };
      const item = await items.findCallableByName(organisationId, environment, itemName);
      if (!item) return [itemName];
      const judged = await findPlanItems({ findItemByName: items.findCallableByName }, scope, item);
      return judged.map((used) => used.name);
    },
    now: variant.now,
    isSoleWriter,
  });
}

export function createServices(db: Kysely<Database>, variant: HostedVariant): HostedServices;
export function createServices(db: Kysely<Database>, variant: LocalVariant): LocalServices;
export function createServices(
  db: Kysely<Database>,
  variant: HostedVariant | LocalVariant,
): HostedServices | LocalServices {
  return variant.kind === "hosted" ? createHostedServices(db, variant) : createLocalServices(db, variant);
}

function createLocalServices(db: Kysely<Database>, variant: LocalVariant) {
  const { audit, items, calls, ledger } = createCoreServices(db, variant, true, variant.readCache);
  const orgs = createOrgsService({ repo: createOrgsRepo(db), now: variant.now });
  const grantsRepo = (handle: Kysely<Database>) =>
    variant.readCache ? variant.readCache.grants(createGrantsRepo(handle)) : createGrantsRepo(handle);
  const grants = createGrantsService({
    repo: grantsRepo(db),
    recordEvent: audit.insertAuditEvent,
    // A decision and its audit row together, as hosted: a vault killed between the two (an MCP
    // client quitting `vault mcp`) must not leave an approval the ledger does not name.
    inTransaction: (fn) =>
      runInTransaction(db, (trx) => fn({ repo: grantsRepo(trx), recordEvent: auditIn(trx, variant) })),
    now: variant.now,
  });
  const policies = createPolicies(db, variant, audit, items, Boolean(variant.readCache));
  const tools = createToolHandlers(
    { items, grants, calls, policies, surface: LOCAL_SURFACE },
    { organisationId: variant.organisationId, environment: variant.environments[0]! },
  );
  const abandonedCalls = createAbandonedCallsFor(db, variant, grantsRepo);
  return { audit, ledger, items, grants, calls, orgs, policies, tools, abandonedCalls };
}

export type LocalServices = ReturnType<typeof createLocalServices>;

function createHostedGrants(
  db: Kysely<Database>,
  variant: HostedVariant,
  audit: AuditRepo,
  orgs: Pick<OrgsService, "findMembers" | "findStandingApprovalsNeed" | "findMemberRole">,
  push?: Pick<PushService, "pushApprovalRequest">,
) {
  return createGrantsService({
    repo: createGrantsRepo(db),
    recordEvent: audit.insertAuditEvent,
    // Inside a transaction that spans features (createTransactionServices), its own handle.
    inTransaction: (fn) =>
      db.isTransaction
        ? fn({ repo: createGrantsRepo(db), recordEvent: audit.insertAuditEvent })
        : runInTransaction(db, (trx) =>
            fn({ repo: createGrantsRepo(trx), recordEvent: auditIn(trx, variant) }),
          ),
    now: variant.now,
    approvalCodes: { hashCode: variant.keyring.hashCode },
    findStandingApprovalsNeed: orgs.findStandingApprovalsNeed,
    findMemberRole: orgs.findMemberRole,
    notifyApproval: async ({ organisationId, grant, body, approvalCode, linkToken }) => {
      // The devices first, without waiting: a push goes through the proxy, the mail after it.
      void push?.pushApprovalRequest(organisationId, {
        grant_id: grant.grant_id,
        // As every approval shows the agent's own words: invisible characters as U+FFFD.
        agent: agentWords(grant.agent_name),
        item: grant.item_name,
        method: grant.call?.method ?? null,
        host: grant.call?.host ?? null,
        // As the audit keeps it: the route without its query, which may carry personal data.
        path: grant.call?.path.split("?")[0] ?? null,
        url: `${variant.baseUrl}/console#inbox?grant=${encodeURIComponent(grant.grant_id)}`,
      });
      // Mailed to the members who may approve it: an auditor reads, and gets no approve link.
      const members = (await orgs.findMembers(organisationId)).filter(
        (member) => isRole(member.role) && mayPerform(member.role, "approvals.decide"),
      );
      const mail = approvalMail(grant, body, approvalCode, `${variant.baseUrl}/approve?token=${linkToken}`);
      // Each member on their own: one mailbox refusing (full, closed: nodemailer throws) must not
      // keep the others from hearing. Spec 6's notify_failed only when nobody was mailed.
      let mailed = 0;
      for (const member of members) {
        try {
          await variant.mailer.send({ to: member.email, ...mail });
          mailed++;
        } catch (error) {
          // The member's id and the SMTP codes, never the mail: it carries the code and the link.
          const { code, responseCode } = (error ?? {}) as { code?: unknown; responseCode?: unknown };
          variant.logger.warn(
            {
              operator_id: member.operator_id,
              code: typeof code === "string" ? code : undefined,
              response_code: typeof responseCode === "number" ? responseCode : undefined,
            },
            "approval mail not sent to a member",
          );
        }
      }
      if (mailed === 0) throw new Error("the approval mail reached no member");
    },
  });
}

/** The repos and services a transaction that spans features writes through, bound to its handle. */
function createTransactionServices(trx: Kysely<Database>, variant: HostedVariant) {
  const { audit, items } = createCoreServices(trx, variant, false);
  const orgsRepo = createOrgsRepo(trx);
  const orgs = createOrgsService({
    repo: orgsRepo,
    now: variant.now,
    recordEvent: audit.insertAuditEvent,
  });
  return {
    repos: { needs: createNeedsRepo(trx), clients: createClientsRepo(trx) },
    findMemberRoleForShare: orgsRepo.findMemberRoleForShare,
    audit,
    items,
    grants: createHostedGrants(trx, variant, audit, orgs),
  };
}

function createHostedServices(db: Kysely<Database>, variant: HostedVariant) {
  const { now, baseUrl } = variant;
  const { audit, items, calls, ledger } = createCoreServices(db, variant, false);
  const passkeysRepo = createPasskeysRepo(db);
  const orgs = createOrgsService({
    repo: createOrgsRepo(db),
    now,
    recordEvent: audit.insertAuditEvent,
    inTransaction: (fn) =>
      runInTransaction(db, (trx) => fn({ repo: createOrgsRepo(trx), recordEvent: auditIn(trx, variant) })),
  });
  const push = createPushService({
    repo: createPushRepo(db),
    ...variant.push,
    egress: variant.egress,
    minter: variant.minter,
    // Every member who may approve (DECISIONS "Teams": owner, admin, approver; never an auditor).
    findApprovers: async (organisationId) =>
      (await orgs.findMembers(organisationId))
        .filter((member) => isRole(member.role) && mayPerform(member.role, "approvals.decide"))
        .map((member) => member.operator_id),
    logger: variant.logger,
    now,
  });
  const grants = createHostedGrants(db, variant, audit, orgs, push);
  const policies = createPolicies(db, variant, audit, items, false);
  const sessions = createSessionsRepo(db);
  /**
   * One transaction holding an organisation's members lock, with its members' and invitations'
   * repos, its audit append (the row commits with the change) and the revoke of the trusted
   * clients a member gone holds, in it too.
   */
  const inMembersLock = <T>(organisationId: string, fn: (locked: MembersLocked) => Promise<T>) =>
    inAdvisoryLock(db, membersLockKey(organisationId), (trx) =>
      fn({
        orgs: createOrgsRepo(trx),
        invites: createInvitesRepo(trx),
        recordEvent: auditIn(trx, variant),
        revokeClientsHeldBy: async (operatorId, actor) => {
          await clients.revokeHeldBy(
            clientsTransaction(createTransactionServices(trx, variant)),
            organisationId,
            operatorId,
            actor,
          );
        },
      }),
    );
  const members = createMembersService({
    repo: createOrgsRepo(db),
    inMembersLock,
    async findLastSeen(organisationId) {
      const rows = await sessions.findAccessByOperator(organisationId);
      return new Map(
        rows.flatMap((row) => (row.last_access_at ? [[row.operator_id, new Date(row.last_access_at)]] : [])),
      );
    },
    async onMemberGone(organisationId, operatorId, toOrganisationId) {
      await sessions.updateSessionsLeavingOrganisation(operatorId, organisationId, toOrganisationId, now());
      await variant.onMemberOAuthEnded?.(organisationId, operatorId);
    },
    now,
  });
  const invites = createInvitesService({
    repo: createInvitesRepo(db),
    inMembersLock,
    sendMail: (mail) => variant.mailer.send(mail),
    baseUrl,
    now,
  });
  const inTransaction = <T>(fn: (tx: ReturnType<typeof createTransactionServices>) => Promise<T>) =>
    runInTransaction(db, (trx) => fn(createTransactionServices(trx, variant)));
  /** A change of clients on a transaction's handle: the clients feature's `ClientsTransaction`. */
  const clientsTransaction = (tx: ReturnType<typeof createTransactionServices>): ClientsTransaction => ({
    repo: tx.repos.clients,
    grants: tx.grants,
    closeAgentNeeds: (organisationId, agentId, actor, at) =>
      closeAgentNeeds(
        { repo: tx.repos.needs, recordEvent: tx.audit.insertAuditEvent },
        organisationId,
        agentId,
        actor,
        at,
      ),
    recordEvent: tx.audit.insertAuditEvent,
    findMemberRoleForShare: tx.findMemberRoleForShare,
  });
  const clients = createClientsService({
    repo: createClientsRepo(db),
    inTransaction: (fn) => inTransaction((tx) => fn(clientsTransaction(tx))),
    recordEvent: audit.insertAuditEvent,
    ...(variant.onOAuthClientRevoked ? { onOAuthClientRevoked: variant.onOAuthClientRevoked } : {}),
    environments: variant.environments,
    defaultEnvironment: variant.environments[0]!,
    baseUrl,
    now,
  });
  const needs = createNeedsService({
    repo: createNeedsRepo(db),
    baseUrl,
    now,
    recordEvent: audit.insertAuditEvent,
    inTransaction: (fn) =>
      inTransaction((tx) =>
        fn({
          repo: tx.repos.needs,
          items: tx.items,
          grants: tx.grants,
          recordEvent: tx.audit.insertAuditEvent,
        }),
      ),
  });
  const connect = createConnectService({
    repo: createConnectRepo(db),
    items,
    inTransaction: (fn) =>
      runInTransaction(db, (trx) => {
        const tx = createTransactionServices(trx, variant);
        return fn({
          grants: tx.grants,
          closeConnectNeed: (organisationId, id, target, actor) =>
            closeConnectNeedIn(
              { repo: tx.repos.needs, recordEvent: tx.audit.insertAuditEvent },
              organisationId,
              id,
              target,
              actor,
              now(),
            ),
          findNeedAgentId: async (organisationId, id) =>
            (await tx.repos.needs.findNeedById(organisationId, id))?.agent_id,
          isLiveAgentForShare: async (organisationId, id, environment) =>
            (await createConnectRepo(trx).findLiveAgentForShare(organisationId, id, environment)) !==
            undefined,
          recordEvent: tx.audit.insertAuditEvent,
        });
      }),
    isLiveAgent: clients.isLiveAgent,
    isConnectNeedFor: needs.isConnectNeedFor,
    sealingKey: () => variant.sealingKey(),
    minter: variant.minter,
    egress: variant.egress,
    recordEvent: audit.insertAuditEvent,
    baseUrl,
    environments: variant.environments,
    now,
  });
  const ssoRepo = createSsoRepo(db);
  const inSsoTransaction = <T>(fn: (tx: SsoTransaction) => Promise<T>) =>
    runInTransaction(db, (trx) => fn({ repo: createSsoRepo(trx), recordEvent: auditIn(trx, variant) }));
  const relyingParty = createRelyingParty({ egress: variant.egress, minter: variant.minter, now });
  const lookUpTxt = createTxtLookup({
    egress: variant.egress,
    minter: variant.minter,
    dnsUrl: variant.ssoDnsUrl,
  });
  const sso = {
    connections: createSsoConnectionsService({
      repo: ssoRepo,
      relyingParty,
      sealingKey: () => variant.sealingKey(),
      inTransaction: inSsoTransaction,
      lookUpTxt,
      baseUrl,
      now,
    }),
    domainRecheck: createDomainRecheck({
      repo: ssoRepo,
      inTransaction: inSsoTransaction,
      lookUpTxt,
      async mailOwners(organisationId, mail) {
        const owners = (await orgs.findMembers(organisationId)).filter((member) => member.role === "owner");
        for (const owner of owners) await variant.mailer.send({ to: owner.email, ...mail });
      },
      baseUrl,
      logger: variant.logger,
      now,
    }),
    signIn: createSsoSignInService({
      repo: ssoRepo,
      relyingParty,
      sealingKey: () => variant.sealingKey(),
      inTransaction: inSsoTransaction,
      baseUrl,
      now,
    }),
  };
  return {
    audit,
    ledger,
    items,
    grants,
    calls,
    abandonedCalls: createAbandonedCallsFor(db, variant, createGrantsRepo),
    orgs,
    sso,
    members,
    invites,
    clients,
    needs,
    connect,
    policies,
    push,
    access: createAccessService({ clients, grants, audit }),
    sessions,
    emailCodes: createEmailCodeService({
      repo: createEmailCodesRepo(db),
      mailer: variant.mailer,
      keyring: variant.keyring,
      now,
    }),
    totp: createTotpService({
      repo: createOperatorsRepo(db),
      keyring: variant.keyring,
      now,
      countPasskeys: passkeysRepo.findPasskeyCount,
    }),
    passkeys: createPasskeysService({ repo: passkeysRepo, rp: relyingPartyOf(baseUrl), now }),
    /** What a session's step-up may be made with (auth/step-up.ts). */
    async stepUpFactors(session: { operator_id: string; organisation_id: string | null }) {
      const found = await passkeysRepo.findStepUpFactors(session.operator_id, session.organisation_id);
      return {
        hasPasskey: found.passkeys > 0,
        hasTotp: found.hasTotp,
        isPasskeyRequired: found.isPasskeyRequired,
      };
    },
    /** Whether the operator has a second factor: an authenticator app or a passkey. */
    async hasSecondFactor(operatorId: string): Promise<boolean> {
      const found = await passkeysRepo.findStepUpFactors(operatorId, null);
      return found.hasTotp || found.passkeys > 0;
    },
    /** What the MCP tools run on; each client's handlers are bound per request (mcp.routes.ts). */
    tools: { items, grants, calls, policies, surface: createHostedSurface(needs) },
  };
}

export type HostedServices = ReturnType<typeof createHostedServices>;

/**
 * The audit repo as the services write through it: each row carries the active trace id, goes
 * out as a log record in that trace when telemetry is on, and `onEvent` is told of it once written.
 */
/** The audit append of transaction `trx`: its row commits with the change it records, or neither does. */
/**
 * The calls a control plane killed mid-way left unsettled (calls/abandoned-calls.ts), each settled
 * in a transaction with its fence, its grant and its row. `grantsRepo`: the variant's (the local
 * vault's goes through its read cache).
 */
function createAbandonedCallsFor(
  db: Kysely<Database>,
  variant: CommonVariant,
  grantsRepo: (handle: Kysely<Database>) => GrantsRepo,
) {
  return createAbandonedCalls({
    inTransaction: (fn) =>
      runInTransaction(db, (trx) =>
        fn({
          repo: grantsRepo(trx),
          recordEvent: auditIn(trx, variant),
          insertFence: createSpentTicketsRepo(trx).insertFence,
        }),
      ),
    // Without a fence of its own (the local vault's one proxy and its memory), no table can tell.
    fence: variant.fence ?? { isStoreShared: async () => false },
    now: variant.now,
  });
}

function auditIn(trx: Kysely<Database>, variant: CommonVariant): (event: AuditEvent) => Promise<void> {
  return observeAudit(createAuditRepo(trx), variant.onAuditEvent).insertAuditEvent;
}

function observeAudit<R extends Pick<AuditRepo, "insertAuditEvent" | "appendEvent">>(
  repo: R,
  onEvent: ((event: AuditEvent) => void) | undefined,
): R {
  return {
    ...repo,
    insertAuditEvent: async (event: AuditEvent) => {
      const traced = telemetry();
      const row = await repo.appendEvent(traced.enabled ? { ...event, traceId: traced.traceId() } : event);
      traced.emitAuditRow(row);
      onEvent?.(event);
    },
  };
}
