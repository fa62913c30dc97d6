// What every tool handler is given: the services it calls, and the surface it answers for (the
// local `vault` or the hosted service), which decides how an operator is told to act.
import type { CallsService } from "../calls/calls.service.ts";
import type { RequestedCall } from "../grants/grants.repo.ts";
import type { GrantsService } from "../grants/grants.service.ts";
import { ITEM_NAME } from "../items/items.schemas.ts";
import type { ItemsService } from "../items/items.service.ts";
import type { NeedsService } from "../needs/needs.service.ts";
import type { PoliciesService } from "../policies/policies.service.ts";

export interface ToolScope {
  organisationId: string;
  environment: string;
  agentId: string;
  /** The agent's client name where it has one (hosted): a need request's client_name (spec 2.5). */
  clientName?: string | undefined;
  /**
   * The SHA-256 of a bearer let in unconfirmed (auth/principal.ts `confirmsBearer`): the call
   * confirms it in the statement it reads, and throws BearerNotLive when it no longer holds.
   */
  bearerToConfirm?: string | undefined;
}

/** How the operator acts on this surface: the words a tool answer uses. */
export interface OperatorSurface {
  /** need_item: where the value gets stored, e.g. a `vault set` command. */
  needItem(
    scope: ToolScope,
    suggestedName: string,
    host: string | undefined,
    taskDescription?: string,
    requestedCall?: RequestedCall,
  ): Promise<{ message: string; fields: Record<string, unknown> }>;
  /**
   * Whether the operator is told of a new pending grant (hosted: by mail), so that an answer
   * reports `notify_failed`. The local vault notifies nobody: the field would only mislead.
   */
  isNotifying: boolean;
  /** pending: how the operator approves this grant, then `then` (what the agent does next). */
  approveHint(grantId: string, then: string): string;
  /** token_exchange_failed: how the user replaces the refresh token the provider refused. */
  reconnectHint(refreshItemName: string): string;
  /** policy_denied: how the user changes the organisation's policy (the end of a sentence). */
  changePolicyHint: string;
  /** setup's ready_prompt: the credential is stored, no standing approval covers the agent yet. */
  readyPromptHint(itemName: string): string;
  /** user_connect_required (spec 4.2): how the user connects the provider account. */
  connectRequired(
    scope: ToolScope,
    connect: ConnectNeed,
  ): Promise<{ hint: string; fields: Record<string, unknown> }>;
}

/** A user account to connect for a stored app credential (spec 4.2 user_connect_required). */
export interface ConnectNeed {
  provider: string;
  itemName: string;
  refreshItemName: string;
  host: string;
  taskDescription?: string | undefined;
}

export interface ToolDeps {
  items: Pick<ItemsService, "findCallableByName" | "findCallableByHost" | "listItems" | "findItemByName">;
  grants: GrantsService;
  calls: CallsService;
  /** The organisation's policy rules, judged before any approval (DECISIONS "Policies"). */
  policies: Pick<PoliciesService, "decideCall" | "admitCall" | "recordPolicyEvent">;
  surface: OperatorSurface;
  /** Told of every answer (metrics: the tool and its outcome). */
  onToolAnswer?: (tool: string, payload: Record<string, unknown>, isError: boolean | undefined) => void;
}

/**
 * A name to suggest for a host's credential: the registrable part, uppercase, plus _TOKEN.
 * @example suggestItemName("api.github.com") // "GITHUB_TOKEN"
 */
export function suggestItemName(host: string): string {
  const labels = host.split(".").filter((l) => l !== "api" && l !== "www");
  const core = labels.length > 1 ? labels.slice(0, -1) : labels;
  const name = core
    .join("_")
    .replace(/[^a-z0-9]/gi, "_")
    .toUpperCase();
  const candidate = `${/^[A-Z]/.test(name) ? name : `API_${name}`}_TOKEN`;
  return candidate.slice(0, 128);
}

/**
 * The name a shell command, a hint or a collect request may carry: the agent's own only when it is
 * a credential name (spec 2.1), else the one suggested for the host. An agent's text never reaches
 * a command the user is told to run (`X $(curl ...|sh)` would run), nor a request whose value
 * could only be stored under another name.
 */
export function commandItemName(name: string, host: string | undefined): string {
  if (ITEM_NAME.test(name)) return name;
  return host ? suggestItemName(host) : "API_TOKEN";
}

/** The local variant: everything happens through the `vault` CLI or the loopback console. */
export const LOCAL_SURFACE: OperatorSurface = {
  async needItem(_scope, suggestedName, host) {
    const name = commandItemName(suggestedName, host);
    const command = `vault set ${name} --host ${host ?? "API_HOST"}`;
    return {
      message: `Nothing is stored${host ? ` for ${host}` : ` as ${name}`}. Ask the user to run \`${command}\` (the value is typed at the prompt, never given to you), then retry.`,
      // The name the command stores, in place of the agent's (needItemAnswer spreads fields last).
      fields: { command, suggested_name: name },
    };
  },
  isNotifying: false,
  changePolicyHint: "the user changes it with `vault policy get` and `vault policy set FILE`.",
  approveHint(grantId, then) {
    return `Ask the user to approve it with \`vault approve ${grantId}\` (or \`--session\` for 8 hours), or the Approve button in the local console; ${then}`;
  },
  reconnectHint(refreshItemName) {
    return `The provider refused the stored token. Ask the user to store a new refresh token with \`vault set ${refreshItemName} --inject refresh\` (typed at the prompt, never given to you), then retry once.`;
  },
  readyPromptHint(itemName) {
    return `The credential is stored. Call http_request with item_name ${itemName}; the user approves the call with \`vault approve\` when asked (or \`--session\` for 8 hours).`;
  },
  // Spec 4.4: locally there is no connect flow; the user stores the refresh token themselves.
  async connectRequired(_scope, connect) {
    const command = `vault set ${connect.refreshItemName} --inject refresh --host ${connect.host}`;
    return {
      hint: `This ${connect.provider} path needs a user account. Ask the user to run \`${command}\` (the refresh token is typed at the prompt, never given to you), then retry once.`,
      fields: { command },
    };
  },
};

/** The hosted service: a collect request the operator answers on the collect page or the inbox. */
export function createHostedSurface(needs: Pick<NeedsService, "requestNeed">): OperatorSurface {
  return {
    async needItem(scope, suggestedName, host, taskDescription, requestedCall) {
      // The collect page stores the value under the name the request carries: only a credential
      // name (spec 2.1) can be stored, so an agent's other text is replaced as locally.
      const name = commandItemName(suggestedName, host);
      // Spec 4.2: by item_name alone, too, the user gets a collect link (and names the host there).
      const need = await needs.requestNeed({
        organisationId: scope.organisationId,
        environment: scope.environment,
        host,
        suggestedName: name,
        agentId: scope.agentId,
        // Spec 4.2: the agent's task description is shown in the Inbox.
        message: taskDescription,
        requestedCall,
      });
      const what = host ? `for ${host}` : `as ${name}`;
      const retry = name === suggestedName ? "Then retry." : `Then retry with item_name ${name}.`;
      return {
        message: `Nothing is stored ${what}. Give the user this link to store ${name}: ${need.collect_url} (they type the value${host ? "" : " and the API's host"} there; never ask for it yourself). ${retry}`,
        fields: {
          // The name the request stores, in place of the agent's (needItemAnswer spreads fields last).
          suggested_name: name,
          collect_url: need.collect_url,
          need_id: need.need_id,
          client_name: scope.clientName ?? need.client_name ?? scope.agentId,
          // Spec 2.5 / 4.2 find_items: the public recipe of a known provider host, when there is one.
          ...(need.recipe ? { recipe: need.recipe } : {}),
        },
      };
    },
    isNotifying: true,
    changePolicyHint: "an owner or admin changes it under Policies in the Latch console.",
    approveHint(grantId, then) {
      return `Tell the user to approve request ${grantId} in the Latch inbox (or with the approval code); ${then}`;
    },
    reconnectHint(_refreshItemName) {
      return "The provider refused the stored token. Ask the user to connect the account again with Connect in the Latch console, then retry once.";
    },
    async connectRequired(scope, connect) {
      const need = await needs.requestNeed({
        organisationId: scope.organisationId,
        environment: scope.environment,
        host: connect.host,
        suggestedName: connect.refreshItemName,
        agentId: scope.agentId,
        message: connect.taskDescription,
        kind: "connect",
      });
      return {
        hint: `This ${connect.provider} path needs a user account. Give the user this link to connect it: ${need.collect_url}. After they connect and allow you, retry once.`,
        // The connect recipe: the app to create, the redirect URI to register, the scopes.
        fields: {
          connect_url: need.collect_url,
          need_id: need.need_id,
          ...(need.recipe ? { recipe: need.recipe } : {}),
        },
      };
    },
    readyPromptHint(itemName) {
      return `The credential is stored. Ask the user to click Always allow in the Latch inbox when the approval request for ${itemName} appears, so later calls need no approval; call http_request with item_name ${itemName} now.`;
    },
  };
}
