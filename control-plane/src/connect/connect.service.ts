// Provider connect (spec 4.3, DECISIONS "Providers"): start builds the authorize URL with a
// single-use `state` bound to the operator's session and organisation (and PKCE S256 for the
// public-client providers); the callback claims the state once, has the egress proxy exchange the
// code (the client secret and the verifier are opened there only), and stores the refresh token
// the proxy sealed as `<ITEM>_REFRESH`. The control plane never sees a token in clear.
import { createHash, randomBytes } from "node:crypto";
import { ClientAuthentication, type ExecuteResponse, TokenGrant, TokenKind } from "@latch/proto/egress";
import { sha256Hex } from "@latch/shared/crypto/hash";
import { type SealingPublicKey, sealValue } from "@latch/shared/crypto/seal";
import { AppError } from "@latch/shared/errors";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { baseNameOf } from "../calls/token-plan.ts";
import type { EgressClient } from "../egress/egress-client.ts";
import type { TicketMinter } from "../egress/tickets.ts";
import { HTTP_REQUEST_TOOL } from "../grants/grant-scope.ts";
import type { GrantsService } from "../grants/grants.service.ts";
import type { CallableItem } from "../items/callable-item.ts";
import { ITEM_NAME } from "../items/items.schemas.ts";
import type { ItemsService } from "../items/items.service.ts";
import { tokenExpiresAt } from "../items/token-lifetime.ts";
import type { ConnectTarget } from "../needs/needs.service.ts";
import { CONNECT_SCOPES } from "../providers/connect-recipe.ts";
import type { Provider, ProviderId } from "../providers/provider.ts";
import { getProvider, PROVIDER_IDS, tokenEndpointOf } from "../providers/providers.ts";
import type { ConnectRepo } from "./connect.repo.ts";

/** DECISIONS "Providers": a state lives 10 minutes. */
const STATE_LIFETIME_MS = 10 * 60 * 1000;
const EXCHANGE_TIMEOUT_MS = 15_000;

/** Spec 4.3: the four reasons a connect comes back with. */
export type ConnectErrorReason = "state_expired" | "provider_denied" | "exchange_failed" | "no_refresh_token";

export interface ConnectDeps {
  repo: ConnectRepo;
  items: Pick<
    ItemsService,
    "findCallableByName" | "findCallableById" | "storeSealedItem" | "inItemTokenLock"
  >;
  /**
   * Runs `fn` in one transaction: closing the connect request, the standing approvals it gives and
   * the `connected` row are all written, or none is.
   */
  inTransaction<T>(fn: (tx: ConnectTransaction) => Promise<T>): Promise<T>;
  /** Whether an id names a live agent (model client) of the organisation in that environment. */
  isLiveAgent(organisationId: string, id: string, environment: string): Promise<boolean>;
  /** Whether a need id names a connect request still waiting for this connect (needs.service.ts). */
  isConnectNeedFor(organisationId: string, id: string, target: ConnectTarget): Promise<boolean>;
  sealingKey(): Promise<SealingPublicKey>;
  minter: TicketMinter;
  egress: EgressClient;
  recordEvent(event: AuditEvent): Promise<void>;
  baseUrl: string;
  environments: readonly string[];
  now: () => Date;
}

export interface ConnectTransaction {
  grants: Pick<GrantsService, "createActiveGrant">;
  /** Closes a connect request waiting for this connect; answers the agent that asked (needs.service.ts). */
  closeConnectNeed(
    organisationId: string,
    id: string,
    target: ConnectTarget,
    actor: string,
  ): Promise<string | undefined>;
  /** The agent that asked with a need (an Inbox request), whatever its state. */
  findNeedAgentId(organisationId: string, id: string): Promise<string | undefined>;
  /**
   * Whether `id` is still a live agent of the organisation in `environment`, its client row held
   * `FOR SHARE` until the transaction ends (connect.repo.ts): a revoke since the start is seen, and
   * one landing now waits, then revokes the approvals given here.
   */
  isLiveAgentForShare(organisationId: string, id: string, environment: string): Promise<boolean>;
  recordEvent(event: AuditEvent): Promise<void>;
}

export interface ConnectOperator {
  organisationId: string;
  sessionId: string;
  actor: string;
}

export interface StartInput {
  item_name: string;
  environment?: string | undefined;
  client_id?: string | undefined;
  redirect_uri?: string | undefined;
  agent_client_id?: string | undefined;
  need_id?: string | undefined;
}

export type ConnectResult =
  | { provider: ProviderId; ok: true }
  | { provider: string; ok: false; reason: ConnectErrorReason };

const CLIENT_AUTH: Record<Provider["oauth"]["clientAuthentication"], ClientAuthentication> = {
  basic: ClientAuthentication.CLIENT_AUTHENTICATION_BASIC,
  form: ClientAuthentication.CLIENT_AUTHENTICATION_FORM,
  secret_form: ClientAuthentication.CLIENT_AUTHENTICATION_SECRET_FORM,
};

/** Spec 2.1: the refresh token a connect of `itemName` stores, `<ITEM>_REFRESH`. */
function refreshNameOf(itemName: string): string {
  return `${baseNameOf(itemName)}_REFRESH`;
}

export function findConnectProvider(id: string): Provider {
  if (!(PROVIDER_IDS as readonly string[]).includes(id)) throw new AppError("not_found", "no such provider");
  return getProvider(id as ProviderId);
}

export function createConnectService(deps: ConnectDeps) {
  const callbackUrl = `${deps.baseUrl.replace(/\/$/, "")}/connect/callback`;
  /** The redirect URIs a start may name: the callback and its per-provider alias. */
  const allowedRedirects = (provider: ProviderId) => [
    callbackUrl,
    `${deps.baseUrl.replace(/\/$/, "")}/integrations/${provider}/callback`,
  ];

  return {
    async startConnect(operator: ConnectOperator, providerId: string, input: StartInput) {
      const provider = findConnectProvider(providerId);
      const environment = input.environment ?? deps.environments[0] ?? "production";
      if (!deps.environments.includes(environment)) {
        throw new AppError("not_found", `this service does not serve the ${environment} environment`);
      }
      // The standing approval a connect gives goes to a real agent of this organisation, or none.
      if (
        input.agent_client_id &&
        !(await deps.isLiveAgent(operator.organisationId, input.agent_client_id, environment))
      ) {
        throw new AppError(
          "not_found",
          `no agent client ${input.agent_client_id} in this organisation's ${environment} environment`,
        );
      }
      const item = await findAppCredential(operator.organisationId, environment, input.item_name);
      // A request names the refresh item its agent's retry needs: a connect of another credential
      // would close it and approve its agent for an account the agent did not ask for.
      const refreshItemName = refreshNameOf(item.name);
      if (!ITEM_NAME.test(refreshItemName)) {
        throw new AppError(
          "invalid_request",
          `${item.name} is too long to connect: the account is stored as ${baseNameOf(item.name)}_REFRESH, and a credential name is at most 128 characters (store the app credential under a shorter name)`,
        );
      }
      if (
        input.need_id &&
        !(await deps.isConnectNeedFor(operator.organisationId, input.need_id, {
          environment,
          refreshItemName,
        }))
      ) {
        throw new AppError(
          "not_found",
          `no pending connect request ${input.need_id} for ${item.name} in this organisation's ${environment} environment`,
        );
      }
      const clientId = clientIdOf(item, input.client_id);
      const token = tokenEndpointOf(provider);
      if (!item.allowedHosts.includes(token.host)) {
        throw new AppError(
          "host_mismatch",
          `credential ${item.name} must allow the token host ${token.host}`,
          {
            extra: { item_name: item.name, allowed_hosts: item.allowedHosts },
          },
        );
      }
      const redirectUri = input.redirect_uri ?? callbackUrl;
      if (!allowedRedirects(provider.id).includes(redirectUri)) {
        throw new AppError(
          "invalid_request",
          `redirect_uri must be ${callbackUrl} (or its alias for ${provider.id})`,
        );
      }
      const state = randomBytes(32).toString("base64url");
      const params = new URLSearchParams({
        response_type: "code",
        client_id: clientId,
        redirect_uri: redirectUri,
        state,
        [provider.oauth.scopeParam]: CONNECT_SCOPES[provider.id],
        ...provider.oauth.authorizeParams,
      });
      let verifier: { sealed: Uint8Array; keyId: string } | undefined;
      if (provider.oauth.isPkcePublicClient) {
        // RFC 7636 4.1-4.2: 32 random bytes as the verifier, its S256 challenge in the URL. The
        // verifier is sealed to the proxy at once; only the proxy sends it, at the exchange.
        const plain = randomBytes(32).toString("base64url");
        params.set("code_challenge", createHash("sha256").update(plain).digest("base64url"));
        params.set("code_challenge_method", "S256");
        verifier = await sealValue(await deps.sealingKey(), plain);
      }
      const now = deps.now();
      await deps.repo.insertConnectState(
        {
          state_hash: sha256Hex(state),
          organisation_id: operator.organisationId,
          session_id: operator.sessionId,
          provider: provider.id,
          item_id: item.id,
          environment,
          redirect_uri: redirectUri,
          sealed_verifier: verifier?.sealed ?? null,
          sealing_key_id: verifier?.keyId ?? null,
          agent_client_id: input.agent_client_id || null,
          need_id: input.need_id ?? null,
          expires_at: new Date(now.getTime() + STATE_LIFETIME_MS),
          used_at: null,
        },
        now,
      );
      return {
        authorize_url: `${provider.oauth.authorizeUrl}?${params}`,
        redirect_uri: redirectUri,
        provider: provider.id,
      };
    },

    /** The callback: never throws for the provider's or the user's doing, answers a reason instead. */
    async finishConnect(
      operator: ConnectOperator,
      query: {
        code?: string | undefined;
        state?: string | undefined;
        error?: string | undefined;
        /** The edge refused the provider's answer (connect.routes.ts): its code is not sent. */
        isUnreadable?: boolean | undefined;
      },
      aliasProvider?: string,
    ): Promise<ConnectResult> {
      const fallback = aliasProvider ?? "provider";
      if (!query.state) return { provider: fallback, ok: false, reason: "state_expired" };
      const row = await deps.repo.updateConnectStateUsed(sha256Hex(query.state), operator, deps.now());
      if (!row) return { provider: fallback, ok: false, reason: "state_expired" };
      const provider = getProvider(row.provider as ProviderId);
      if (aliasProvider !== undefined && aliasProvider !== provider.id) {
        return { provider: aliasProvider, ok: false, reason: "state_expired" };
      }
      if (query.error !== undefined || (!query.code && !query.isUnreadable))
        return { provider: provider.id, ok: false, reason: "provider_denied" };
      const found = await deps.items.findCallableById(operator.organisationId, row.item_id);
      // Edited or deleted since the start: only an app credential is sent to a token URL, and only
      // the one of the start's environment (an edit may move it to another), where its account and
      // approvals are stored.
      const item =
        found && (await deps.items.findCallableByName(operator.organisationId, row.environment, found.name));
      if (item?.id !== row.item_id || item.inject !== "client_credentials")
        return { provider: provider.id, ok: false, reason: "exchange_failed" };
      const token = tokenEndpointOf(provider);
      const refreshName = refreshNameOf(item.name);
      const clientId = item.username ?? "";
      const environment = row.environment;
      // An answer the edge refused (a code over the limit, say) has no code to send; an item renamed
      // since the start to a name whose refresh item no credential may have is refused as the start
      // refuses it, before the code is spent, not by the store's failed write after it.
      const code = query.code;
      if (query.isUnreadable || !code || !ITEM_NAME.test(refreshName)) {
        await record(operator, item.name, provider.id, "connect_failed", environment);
        return { provider: provider.id, ok: false, reason: "exchange_failed" };
      }
      let response: ExecuteResponse;
      try {
        response = await deps.egress.execute(
          deps.minter.mintCallTicket(
            {
              credential: {
                itemName: item.name,
                keyId: item.sealingKeyId,
                sealedValue: Buffer.from(item.sealedValue),
                username: clientId,
              },
              inject: "bearer",
              host: token.host,
              allowedHosts: [...item.allowedHosts],
              method: "POST",
              path: token.path,
              body: Buffer.alloc(0),
              contentType: "",
              timeoutMs: EXCHANGE_TIMEOUT_MS,
              headers: [],
              redact: [],
              exchange: {
                grant: TokenGrant.TOKEN_GRANT_AUTHORIZATION_CODE,
                tokenHost: token.host,
                tokenPath: token.path,
                clientAuthentication: CLIENT_AUTH[provider.oauth.clientAuthentication],
                clientId,
                clientSecret: {
                  itemName: item.name,
                  keyId: item.sealingKeyId,
                  sealedValue: Buffer.from(item.sealedValue),
                  username: "",
                },
                refreshToken: undefined,
                headers: Object.entries(provider.oauth.tokenHeaders).map(([name, value]) => ({
                  name,
                  value,
                })),
                scope: "",
                answerIsExchange: true,
                idTokenOnly: false,
                accessItemName: refreshName,
                code,
                redirectUri: row.redirect_uri,
                codeVerifier:
                  row.sealed_verifier && row.sealing_key_id
                    ? {
                        itemName: refreshName,
                        keyId: row.sealing_key_id,
                        sealedValue: Buffer.from(row.sealed_verifier),
                        username: "",
                      }
                    : undefined,
                refreshItemName: refreshName,
              },
            },
            { organisationId: operator.organisationId },
          ),
          EXCHANGE_TIMEOUT_MS + 1000,
        );
      } catch {
        // The proxy refused the ticket or never answered (a replica gone or silent): a failed
        // connect all the same, recorded like the provider's refusal below.
        await record(operator, item.name, provider.id, "connect_failed", environment);
        return { provider: provider.id, ok: false, reason: "exchange_failed" };
      }
      const minted = response.rotatedCredentials.find((r) => r.kind === TokenKind.TOKEN_KIND_ACCESS);
      const isAnswered = !response.error && response.originStatus >= 200 && response.originStatus < 300;
      if (!isAnswered || !minted) {
        await record(operator, item.name, provider.id, "connect_failed", environment);
        return { provider: provider.id, ok: false, reason: "exchange_failed" };
      }
      const refresh = response.rotatedCredentials.find((r) => r.kind === TokenKind.TOKEN_KIND_REFRESH);
      if (!refresh?.credential) {
        await record(operator, item.name, provider.id, "connect_failed", environment);
        return { provider: provider.id, ok: false, reason: "no_refresh_token" };
      }
      const stored = await deps.items.storeSealedItem(operator.organisationId, operator.actor, {
        name: refreshName,
        environment,
        sealedValue: refresh.credential.sealedValue,
        sealingKeyId: refresh.credential.keyId,
        last4: refresh.metadata?.tokenLast4 ?? "",
        allowedHosts: item.allowedHosts,
        inject: "refresh",
        username: clientId || null,
      });
      // The access token of the exchange is kept like a refreshed one (reused until 60 s before it
      // expires), so the agent's first call makes no second exchange.
      const expiresInS = minted.metadata?.expiresInS ?? 0;
      if (minted.credential) {
        const issuedAt = Number(minted.metadata?.issuedAtMs) || deps.now().getTime();
        const access = minted.credential;
        const ours = refresh.credential;
        await deps.items.inItemTokenLock(stored.id, async (locked) => {
          // Only beside the refresh token this connect stored: another connect of the item may
          // have replaced it since, and its access token (another account, perhaps) stays. The
          // conditional UPDATE writes the same value back, so it also holds the item's row until
          // this transaction ends: a store landing now waits, then drops this access token with
          // the refresh token it replaces.
          const isStillOurs = await locked.updateRotatedValue(stored.id, ours.sealedValue, {
            sealedValue: ours.sealedValue,
            sealingKeyId: ours.keyId,
            last4: stored.last4,
          });
          if (!isStillOurs) return;
          // Nor once the client secret it was minted with is replaced or deleted: that write drops
          // the account's token (items.repo.ts), so one stored after it would outlive the secret.
          const isSecretUnchanged = await locked.holdIfUnchanged([
            { itemId: item.id, sealedValue: item.sealedValue },
          ]);
          if (!isSecretUnchanged) return;
          await locked.upsertAccessToken(stored.id, operator.organisationId, {
            sealedValue: access.sealedValue,
            sealingKeyId: access.keyId,
            tokenLast4: minted.metadata?.tokenLast4 ?? "",
            scope: minted.metadata?.scope ?? "",
            expiresAt: tokenExpiresAt(issuedAt, expiresInS),
          });
        });
      }
      // Spec 4.3: need_id closes the Inbox request; the agent named by agent_client_id (else the
      // agent whose request it was) gets a standing approval on the source credential and the
      // refresh item, so its retry works. One transaction: a crash between them cannot close the
      // request and leave its agent without the approvals (nobody could then ask for them again).
      // The agent is checked again here, not only at the start: one revoked since (its approvals
      // revoked with it) gets none back from this connect; the account stays stored, the operator
      // connected it. Its client row is locked before the request's row, in the order a revoke
      // takes them, so the two wait for each other instead of deadlocking.
      await deps.inTransaction(async (tx) => {
        const named =
          row.agent_client_id ??
          (row.need_id ? await tx.findNeedAgentId(operator.organisationId, row.need_id) : undefined);
        const isAgentLive =
          named !== undefined && (await tx.isLiveAgentForShare(operator.organisationId, named, environment));
        const asker = row.need_id
          ? await tx.closeConnectNeed(
              operator.organisationId,
              row.need_id,
              { environment, refreshItemName: refreshName },
              operator.actor,
            )
          : undefined;
        const agentId = row.agent_client_id ?? asker;
        if (agentId && isAgentLive) {
          for (const itemId of [item.id, stored.id]) {
            await tx.grants.createActiveGrant({
              organisationId: operator.organisationId,
              environment,
              itemId,
              agentId,
              toolId: HTTP_REQUEST_TOOL,
              actor: operator.actor,
              policy: "item_standing",
            });
          }
        }
        await record(operator, refreshName, provider.id, "connected", environment, tx.recordEvent);
      });
      return { provider: provider.id, ok: true };
    },
  };

  /**
   * Spec 2.1: the app credential a connect of `itemName` authenticates with is `<ITEM>_SECRET`,
   * else `<ITEM>` (the Inbox and collect pages name a request's base: `SPOTIFY` for
   * `SPOTIFY_REFRESH`), and only as a client secret (inject client_credentials), exactly as
   * token-plan.ts finds the sibling a call exchanges with: another item of that name (a bearer)
   * is never sent to a token URL as a client secret.
   */
  async function findAppCredential(
    organisationId: string,
    environment: string,
    itemName: string,
  ): Promise<CallableItem> {
    const base = baseNameOf(itemName);
    const found: CallableItem[] = [];
    for (const name of [`${base}_SECRET`, base]) {
      const item = await deps.items.findCallableByName(organisationId, environment, name);
      if (item) found.push(item);
    }
    const app = found.find((item) => item.inject === "client_credentials");
    if (app) return app;
    const [other] = found;
    if (!other) {
      throw new AppError("not_found", `no credential named ${base}_SECRET or ${base} in this environment`);
    }
    throw new AppError(
      "invalid_request",
      `${other.name} is stored with inject ${other.inject}; a connect needs the provider's app credential (inject client_credentials, the OAuth client ID in username)`,
    );
  }

  /**
   * Spec 2.1: a client secret belongs to one OAuth client, the one in its username; the exchange
   * at the callback authenticates as that client, so a start may name it (client_id) but no other:
   * a code issued to another client would never be redeemed by this secret.
   */
  function clientIdOf(item: CallableItem, asked: string | undefined): string {
    if (!item.username) {
      throw new AppError("invalid_request", `${item.name} needs the OAuth client ID in username`);
    }
    if (asked !== undefined && asked !== item.username) {
      throw new AppError(
        "invalid_request",
        `client_id is not the client ID stored with ${item.name}; a client secret belongs to one client (leave client_id out to use the stored one)`,
      );
    }
    return item.username;
  }

  async function record(
    operator: ConnectOperator,
    itemName: string,
    provider: string,
    action: string,
    environment: string,
    recordEvent = deps.recordEvent,
  ): Promise<void> {
    await recordEvent({
      organisationId: operator.organisationId,
      environment,
      actor: operator.actor,
      action,
      itemName,
      detail: { provider },
    });
  }
}

export type ConnectService = ReturnType<typeof createConnectService>;
