// find_items, setup and list_items (spec 4.2): what is stored, by name or host. Never a value.
import { AppError } from "@latch/shared/errors";
import { checkHostname } from "@latch/shared/requests/host";
import { connectedPairSource } from "../calls/calls.service.ts";
import { baseNameOf } from "../calls/token-plan.ts";
import { HTTP_REQUEST_TOOL, httpRequestGrantScope } from "../grants/grant-scope.ts";
import type { CallableItem } from "../items/callable-item.ts";
import { findProviderByHost, getProvider, recipeFields } from "../providers/providers.ts";
import { dryRunNeedItemAnswer, needItemAnswer } from "./http-request.tool.ts";
import type { ToolAnswer } from "./tool-answer.ts";
import { suggestItemName, type ToolDeps, type ToolScope } from "./tool-context.ts";
import type { ToolArgs } from "./tool-schemas.ts";

const MAX_AMBIGUOUS = 5;

function describe(item: CallableItem, environment: string) {
  return {
    name: item.name,
    allowed_hosts: [...item.allowedHosts],
    inject: item.inject,
    environment,
  };
}

function validHost(raw: string): string {
  const check = checkHostname(raw);
  if (!check.ok) throw new AppError(check.code, check.message);
  return check.host;
}

async function describeFull(deps: ToolDeps, scope: ToolScope, item: CallableItem) {
  const view = await deps.items.findItemByName(scope.organisationId, scope.environment, item.name);
  return { ...describe(item, scope.environment), kind: view?.kind ?? "secret", last4: view?.last4 ?? "" };
}

function ambiguous(items: CallableItem[], scope: ToolScope): ToolAnswer {
  return {
    payload: {
      status: "ambiguous",
      items: items.slice(0, MAX_AMBIGUOUS).map((i) => describe(i, scope.environment)),
      ...(items.length > MAX_AMBIGUOUS ? { truncated: true } : {}),
      message: "Several stored credentials match; call again with item_name.",
    },
  };
}

export async function runFindItems(
  deps: ToolDeps,
  scope: ToolScope,
  args: ToolArgs<"find_items">,
): Promise<ToolAnswer> {
  if (!args.item_name && !args.host) {
    return { payload: { status: "none", items: [], message: "Give item_name or host to look one up." } };
  }
  const host = args.host ? validHost(args.host) : undefined;
  if (args.item_name) {
    const item = await deps.items.findCallableByName(scope.organisationId, scope.environment, args.item_name);
    if (!item) return needItemAnswer(deps, scope, args.item_name, host, args.task_description);
    const found = await describeFull(deps, scope, item);
    if (host && !item.allowedHosts.includes(host)) {
      return { payload: { status: "host_mismatch", item: found }, isError: true };
    }
    return { payload: { status: "found", item: found } };
  }
  const items = await deps.items.findCallableByHost(scope.organisationId, scope.environment, host!);
  const [only, ...others] = items;
  if (!only) return needItemAnswer(deps, scope, suggestItemName(host!), host!, args.task_description);
  // An app credential and its connected <ITEM>_REFRESH are one credential by host, as a call by
  // host (calls.service.ts locateCredential) and setup take them: the app credential's.
  const source = others.length > 0 ? connectedPairSource(items) : only;
  if (!source) return ambiguous(items, scope);
  return { payload: { status: "found", item: await describeFull(deps, scope, source) } };
}

export async function runSetup(
  deps: ToolDeps,
  scope: ToolScope,
  args: ToolArgs<"setup">,
): Promise<ToolAnswer> {
  if (Boolean(args.provider) === Boolean(args.host)) {
    throw new AppError("invalid_request", "give exactly one of provider or host");
  }
  const host = args.provider ? getProvider(args.provider).apiHosts[0] : validHost(args.host!);
  const items = await deps.items.findCallableByHost(scope.organisationId, scope.environment, host);
  const [only, ...others] = items;
  if (!only) {
    // A dry run writes nothing: no collect request, so no collect_url yet.
    if (args.dry_run) return dryRunNeedItemAnswer(suggestItemName(host), host);
    return needItemAnswer(deps, scope, suggestItemName(host), host, args.task_description);
  }
  // An app credential and its connected <ITEM>_REFRESH are one setup: the app credential's.
  const source = others.length > 0 ? connectedPairSource(items) : only;
  if (!source) {
    const answer = ambiguous(items, scope);
    return { ...answer, payload: { ...answer.payload, ...recipeFields(host) } };
  }
  const provider = findProviderByHost(host);
  const needsConnect =
    provider !== undefined &&
    source.inject === "client_credentials" &&
    source === only &&
    others.length === 0 &&
    (provider.appToken === undefined || provider.userOnlyPathPrefixes.length > 0);
  if (needsConnect) {
    // Spec 4.2 setup: the app secret is stored; the user account is connected next.
    const refreshItemName = `${baseNameOf(source.name)}_REFRESH`;
    const connectRequired = (extra: object, hint: string) => ({
      status: "user_connect_required",
      provider: provider.id,
      item_name: source.name,
      refresh_item_name: refreshItemName,
      host,
      ...recipeFields(host),
      ...extra,
      hint,
      next: { for_model: hint },
    });
    if (args.dry_run) {
      // What the real call would answer, with nothing written: no connect request, so no connect_url.
      const hint = `${source.name} is stored; this ${provider.displayName} setup needs a connected user account. Call setup again without dry_run to ask the user to connect it.`;
      return { payload: connectRequired({ dry_run: true }, hint) };
    }
    const { hint, fields } = await deps.surface.connectRequired(scope, {
      provider: provider.id,
      itemName: source.name,
      refreshItemName,
      host,
      taskDescription: args.task_description,
    });
    return { payload: connectRequired(fields, hint) };
  }
  // Spec 4.2: ready means a standing approval (any scope it was given, on this host); a one-call
  // or 8-hour session approval is not one.
  const isStanding = await deps.grants.hasStandingGrant(httpRequestGrantScope(scope, source), host);
  return {
    payload: {
      status: isStanding ? "ready" : "ready_prompt",
      item: await describeFull(deps, scope, source),
      host,
      ...(args.provider ? { provider: args.provider } : {}),
      ...recipeFields(host),
      next: {
        for_model: isStanding
          ? `Call http_request with item_name ${source.name}.`
          : deps.surface.readyPromptHint(source.name),
        tool: HTTP_REQUEST_TOOL,
        arguments: { item_name: source.name, host },
      },
    },
  };
}

export async function runListItems(deps: ToolDeps, scope: ToolScope): Promise<ToolAnswer> {
  const items = await deps.items.listItems(scope.organisationId, scope.environment);
  return {
    payload: {
      items: items.map((i) => ({
        name: i.name,
        kind: i.kind,
        last4: i.last4,
        username: i.username,
        environment: i.environment,
        inject: i.inject,
        allowed_hosts: i.allowed_hosts,
      })),
    },
  };
}
