// Need requests (spec 2.5, 3.2): an agent needs a credential nobody stored. The operator types the
// value on the collect page; fulfilling stores it (sealed at once), activates the requesting
// agent's approval and, with always_allow, writes a standing approval, all in one transaction.
import { AppError } from "@latch/shared/errors";
import { newId } from "@latch/shared/ids";
import type { AuditEvent } from "../audit/audit.repo.ts";
import type { NeedRequestRow } from "../db/schema.ts";
import { HTTP_REQUEST_TOOL } from "../grants/grant-scope.ts";
import {
  bodyViewOfRow,
  type PublicGrant,
  requestedCallColumns,
  requestedCallOfRow,
  toPublicCall,
} from "../grants/grant-view.ts";
import type { RequestedCall } from "../grants/grants.repo.ts";
import { type GrantsService, MAX_TASK_DESCRIPTION } from "../grants/grants.service.ts";
import { type BodyView, showHidden } from "../grants/request-body.ts";
import { pathPrefixScope } from "../grants/standing-scope.ts";
import type { ItemView } from "../items/items.schemas.ts";
import type { ItemsService } from "../items/items.service.ts";
import { checkRequestLimit } from "../limits/request-limit.ts";
import { connectRecipe } from "../providers/connect-recipe.ts";
import type { Recipe } from "../providers/provider.ts";
import { findProviderByHost, recipeFields } from "../providers/providers.ts";
import type { NeedsRepo, NeedWithClient } from "./needs.repo.ts";

/** What fulfilling writes in one transaction: the need, the stored item and its approval. */
export interface NeedsTransaction {
  repo: NeedsRepo;
  items: Pick<ItemsService, "storeItem">;
  grants: Pick<GrantsService, "createActiveGrant">;
  recordEvent(event: AuditEvent): Promise<void>;
}

export interface NeedsDeps {
  repo: NeedsRepo;
  baseUrl: string;
  now: () => Date;
  /**
   * Audits a request's life (need_requested, need_fulfilled, need_denied, need_closed): the
   * ledger is also what the live inbox follows (inbox/inbox-events.ts).
   */
  recordEvent(event: AuditEvent): Promise<void>;
  /** Runs `fn` in one transaction with the repo and services bound to it (services.ts). */
  inTransaction<T>(fn: (tx: NeedsTransaction) => Promise<T>): Promise<T>;
}

export interface NeedView {
  need_id: string;
  kind: string;
  status: string;
  environment: string;
  /** Null when the agent named only the credential: the collect page asks the operator for it. */
  host: string | null;
  suggested_name: string;
  client_name: string;
  message: string | null;
  collect_url: string;
  created_at: string;
  /** Spec 2.5: the public recipe for a known provider host. */
  recipe?: Recipe;
  /** The call that asked: fulfilling approves it once (DECISIONS "Approvals"); null: any call. */
  call: PublicGrant["call"];
  /** The body that call would send, as the operator reads it; null: none. */
  body: BodyView | null;
  /** A connect request's provider, for the connect card. */
  provider?: string;
}

/** The audit row of a request's step: which request, for which agent, named as it was asked. */
const needEvent = (
  need: Pick<NeedRequestRow, "id" | "environment" | "host" | "suggested_name" | "agent_id" | "kind">,
  action: string,
  actor: string,
): AuditEvent => ({
  organisationId: "",
  environment: need.environment,
  actor,
  action,
  itemName: need.suggested_name,
  host: need.host ?? undefined,
  detail: { need_id: need.id, agent_id: need.agent_id, kind: need.kind },
});

/**
 * Closes every pending request of an agent that was just revoked, each with its need_closed row,
 * on the revoke's transaction: nobody is asked to paste a secret for a client that can never use it.
 */
export async function closeAgentNeeds(
  tx: { repo: Pick<NeedsRepo, "updateAgentNeedsClosed">; recordEvent(event: AuditEvent): Promise<void> },
  organisationId: string,
  agentId: string,
  actor: string,
  at: Date,
): Promise<void> {
  for (const need of await tx.repo.updateAgentNeedsClosed(organisationId, agentId, at)) {
    await tx.recordEvent({ ...needEvent(need, "need_closed", actor), organisationId });
  }
}

/** What a connect names of the account it connects: its environment and refresh item. */
export interface ConnectTarget {
  environment: string;
  refreshItemName: string;
}

/**
 * Whether `need` is a connect request still waiting for this connect: of its environment, and for
 * its refresh item (the request names the `<ITEM>_REFRESH` its agent's retry needs). A connect of
 * another credential neither closes it nor gives its agent standing approvals.
 */
export function isConnectNeedFor(need: NeedRequestRow | undefined, target: ConnectTarget): boolean {
  return (
    need?.kind === "connect" &&
    need.status === "pending" &&
    need.environment === target.environment &&
    need.suggested_name === target.refreshItemName
  );
}

/**
 * Spec 3.2: a connect that carries need_id closes that connect request (`closed`), with its
 * need_closed row, on the connect's own transaction. Answers the agent that asked, or undefined
 * when there is no such pending connect request for this connect (`isConnectNeedFor`).
 */
export async function closeConnectNeedIn(
  tx: {
    repo: Pick<NeedsRepo, "findNeedById" | "updateNeedClosed">;
    recordEvent(event: AuditEvent): Promise<void>;
  },
  organisationId: string,
  id: string,
  target: ConnectTarget,
  actor: string,
  at: Date,
): Promise<string | undefined> {
  const need = await tx.repo.findNeedById(organisationId, id);
  if (!need || !isConnectNeedFor(need, target)) return undefined;
  if (!(await tx.repo.updateNeedClosed(organisationId, id, "closed", at))) return undefined;
  await tx.recordEvent({ ...needEvent(need, "need_closed", actor), organisationId });
  return need.agent_id;
}

export function createNeedsService(deps: NeedsDeps) {
  const collectUrl = (id: string) => `${deps.baseUrl}/collect/${id}`;
  const view = (row: NeedWithClient): NeedView => ({
    need_id: row.id,
    kind: row.kind,
    status: row.status,
    environment: row.environment,
    host: row.host,
    suggested_name: row.suggested_name,
    // A client's name is written by a member or registered by an agent: shown as every approval
    // shows it (invisible characters, a direction override among them, as U+FFFD).
    client_name: showHidden(row.client_label ?? row.agent_id).text,
    message: row.message,
    collect_url: collectUrl(row.id),
    created_at: row.created_at.toISOString(),
    call: toPublicCall(row),
    body: bodyViewOfRow(row),
    ...connectOrSecretRecipe(row),
  });
  /** A connect request carries the connect recipe (app, redirect URI, scopes) and its provider. */
  const connectOrSecretRecipe = (row: NeedWithClient): { recipe?: Recipe; provider?: string } => {
    const host = row.host ?? undefined;
    const provider = row.kind === "connect" && host ? findProviderByHost(host) : undefined;
    if (!provider) return recipeFields(host);
    return { recipe: connectRecipe(provider.id, deps.baseUrl), provider: provider.id };
  };

  /** Whether `id` names a connect request still waiting for a connect of `target` (isConnectNeedFor). */
  async function isOpenConnectNeed(organisationId: string, id: string, target: ConnectTarget) {
    return isConnectNeedFor(await deps.repo.findNeedById(organisationId, id), target);
  }

  async function loadNeed(repo: NeedsRepo, organisationId: string, id: string): Promise<NeedWithClient> {
    const row = await repo.findNeedById(organisationId, id);
    if (!row) throw new AppError("not_found", "no such request");
    return row;
  }

  /** pending -> `status` by a conditional UPDATE, so one answer wins; any later one is need_closed. */
  async function closePending(
    repo: NeedsRepo,
    organisationId: string,
    id: string,
    status: "fulfilled" | "denied" | "closed",
  ): Promise<void> {
    const isClosed = await repo.updateNeedClosed(organisationId, id, status, deps.now());
    if (!isClosed) throw new AppError("need_closed", "this request was just answered by someone else");
  }

  return {
    isConnectNeedFor: isOpenConnectNeed,
    /**
     * The agent's pending request for this host (or, with no host, for this name), or a new one
     * (counted toward 30 per hour).
     */
    async requestNeed(input: {
      organisationId: string;
      environment: string;
      /** Undefined when the agent named the credential alone (spec 4.2 need_item by item_name). */
      host: string | undefined;
      suggestedName: string;
      agentId: string;
      /** The agent's task description, shown in the Inbox (500 characters). */
      message?: string | undefined;
      /** The http_request that found nothing stored: what fulfilling approves once. */
      requestedCall?: RequestedCall | undefined;
      /** Spec 2.5: `connect` when a client secret is stored and the agent needs a user account. */
      kind?: "secret" | "connect";
    }): Promise<NeedView> {
      const now = deps.now();
      // The agent wrote these and the collect page, the inbox and the mail show them: a direction
      // override, isolate or zero-width character ("Trojan Source") would make them read as
      // something else, so each is written as U+FFFD, as the request body is shown.
      const suggestedName = showHidden(input.suggestedName).text;
      const message = input.message ? showHidden(input.message.slice(0, MAX_TASK_DESCRIPTION)).text : null;
      // The request and its need_requested row in one transaction: a request the ledger does not
      // name would be found pending by the retry and never announced (no row, no live event).
      const row = await deps.inTransaction((tx) =>
        tx.repo.inOrganisationLock(input.organisationId, async (repo) => {
          const scope = { ...input, host: input.host ?? null };
          // A request written before names were shown this way keeps the name as the agent wrote it.
          const existing =
            (await repo.findPendingNeedOfAgent({ ...scope, suggestedName })) ??
            (suggestedName !== input.suggestedName ? await repo.findPendingNeedOfAgent(scope) : undefined);
          if (existing) return existing;
          await checkRequestLimit((since) => repo.findRequestUsageSince(input.organisationId, since), now);
          const fresh: NeedRequestRow = {
            id: newId("ned"),
            organisation_id: input.organisationId,
            environment: input.environment,
            kind: input.kind ?? "secret",
            host: input.host ?? null,
            suggested_name: suggestedName,
            agent_id: input.agentId,
            message,
            status: "pending",
            item_id: null,
            created_at: now,
            closed_at: null,
            ...requestedCallColumns(input.requestedCall),
          };
          await repo.insertNeed(fresh);
          await tx.recordEvent({
            ...needEvent(fresh, "need_requested", `agent:${input.agentId}`),
            organisationId: input.organisationId,
          });
          return fresh;
        }),
      );
      return view(await loadNeed(deps.repo, input.organisationId, row.id));
    },

    async getNeed(organisationId: string, id: string): Promise<NeedView> {
      return view(await loadNeed(deps.repo, organisationId, id));
    },

    listPending: async (organisationId: string): Promise<NeedView[]> =>
      (await deps.repo.findPendingNeeds(organisationId)).map(view),

    async fulfilNeed(
      organisationId: string,
      actor: string,
      id: string,
      body: Record<string, unknown>,
    ): Promise<{ item: ItemView; grant: PublicGrant }> {
      return deps.inTransaction(async ({ repo, items, grants, recordEvent }) => {
        const need = await loadNeed(repo, organisationId, id);
        if (need.kind === "connect") {
          throw new AppError(
            "need_is_connect",
            "a connect request is answered from the inbox's connect card",
          );
        }
        if (need.status !== "pending")
          throw new AppError("need_closed", `this request is already ${need.status}`);
        // A request by name alone names no host: the operator gives it (the collect page asks).
        const allowedHosts = body.allowed_hosts ?? (need.host ? [need.host] : undefined);
        if (!Array.isArray(allowedHosts) || allowedHosts.length === 0) {
          throw new AppError(
            "invalid_host",
            "this request names no host: give allowed_hosts, the hosts the credential may be sent to",
          );
        }
        // Claimed first: of simultaneous fulfils exactly one stores a value and activates an
        // approval; the others wait on the row and then find it closed.
        await closePending(repo, organisationId, id, "fulfilled");
        const item = await items.storeItem(organisationId, actor, {
          name: body.name ?? need.suggested_name,
          value: body.value,
          environment: need.environment,
          kind: body.kind ?? "secret",
          allowed_hosts: allowedHosts,
          inject: body.inject ?? "bearer",
          username: body.username,
        });
        const call = requestedCallOfRow(need);
        const isAlways = body.always_allow === true;
        // DECISIONS "The approval, readable and reversible": always allow is scoped to the request's
        // method and host under its path prefix unless the whole credential is chosen explicitly.
        const scope = body.scope ?? (call ? "path_prefix" : "credential");
        if (isAlways && scope === "path_prefix" && !call) {
          throw new AppError(
            "invalid_request",
            "this request named no call, so it has no path to scope to; allow the whole credential instead",
          );
        }
        const grant = await grants.createActiveGrant({
          organisationId,
          environment: need.environment,
          itemId: item.id,
          agentId: need.agent_id,
          toolId: HTTP_REQUEST_TOOL,
          actor,
          policy: isAlways ? "item_standing" : "prompt",
          // One call: the call that asked, as the collect page showed it. Always allow covers
          // that call's method and host under its path's prefix, or the whole item when the
          // operator chose it (or the request named no call).
          ...(isAlways ? {} : { requestedCall: call }),
          ...(isAlways && call && scope === "path_prefix" ? { callScope: pathPrefixScope(call) } : {}),
        });
        // Under the two-person rule the standing approval waits for a second member ("1 of 2"):
        // storing the value still approves, once, the request that asked, as it always does (spec
        // 3.1: fulfilling activates the requesting agent's approval), bound to its call when it
        // named one and to any one call of the item when it named none, as without Always.
        if (grant.status === "pending") {
          await grants.createActiveGrant({
            organisationId,
            environment: need.environment,
            itemId: item.id,
            agentId: need.agent_id,
            toolId: HTTP_REQUEST_TOOL,
            actor,
            policy: "prompt",
            requestedCall: call,
          });
        }
        await repo.updateNeedItem(id, item.id);
        await recordEvent({ ...needEvent(need, "need_fulfilled", actor), organisationId });
        return { item, grant };
      });
    },

    async denyNeed(organisationId: string, id: string, actor = "operator"): Promise<void> {
      const need = await loadNeed(deps.repo, organisationId, id);
      if (need.status !== "pending")
        throw new AppError("need_closed", `this request is already ${need.status}`);
      await deps.inTransaction(async ({ repo, recordEvent }) => {
        await closePending(repo, organisationId, id, "denied");
        await recordEvent({ ...needEvent(need, "need_denied", actor), organisationId });
      });
    },
  };
}

export type NeedsService = ReturnType<typeof createNeedsService>;
