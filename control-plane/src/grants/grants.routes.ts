// Hosted approvals (spec 4.3 "Clients, grants, inbox, audit"): request (model or operator),
// approve with a policy, approve by code, revoke, the inbox of pending approvals, and the audit.
import { AppError } from "@latch/shared/errors";
import { checkHostname } from "@latch/shared/requests/host";
import { HTTP_METHODS } from "@latch/shared/requests/methods";
import { validateRequestPath } from "@latch/shared/requests/path";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AuditRepo } from "../audit/audit.repo.ts";
import { requireOrgOperator } from "../auth/operator-guard.ts";
import { requirePermission } from "../auth/permissions.ts";
import { operatorOnly, operatorOrModel } from "../auth/principal.ts";
import { bodyField, type StepUpRule } from "../auth/step-up.ts";
import { checkedFirst, idParams, type ZodTypeProvider } from "../http/route-schemas.ts";
import type { ItemsService } from "../items/items.service.ts";
import { isStandingPolicy } from "./grant-coverage.ts";
import { httpRequestGrantScope } from "./grant-scope.ts";
import {
  approvalList,
  approvalsQuery,
  auditFilterOf,
  auditList,
  auditQuery,
  codeApproval,
  codeLookup,
  codeLookupAnswer,
  grantAnswer,
  grantApproval,
  grantList,
  grantRequestInput,
  requestedGrant,
} from "./grants.schemas.ts";
import type { GrantsService } from "./grants.service.ts";

export interface GrantsRouteDeps {
  grants: GrantsService;
  items: ItemsService;
  audit: AuditRepo;
  /** The environments this plane serves: where an operator's request looks for item_name. */
  environments: readonly string[];
}

/**
 * "Always allow" (item_standing, folder_standing) is the most powerful click in Latch: it needs a
 * verification of the last 5 minutes (auth/step-up.ts), whichever path approves it.
 */
const STANDING_APPROVAL: StepUpRule = {
  doing: "approving a standing approval",
  when: (request) => {
    const policy = bodyField(request, "policy");
    return typeof policy === "string" && isStandingPolicy(policy);
  },
};

export function registerGrantsRoutes(app: FastifyInstance, deps: GrantsRouteDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const operatorOf = (request: FastifyRequest) => requireOrgOperator(request);
  const reads = checkedFirst(operatorOnly("org.read"), operatorOf);
  const decides = checkedFirst(operatorOnly("approvals.decide"), operatorOf);
  /** Deciding a standing approval (its two-person confirmation too) needs a step-up first. */
  const decidesStanding = checkedFirst(
    { ...operatorOnly("approvals.decide"), stepUp: STANDING_APPROVAL },
    operatorOf,
  );
  /**
   * A model client was judged on its bearer (onRequest); an operator also on its session and
   * role: asking for an approval is the approvers' work, not an auditor's.
   */
  const asks = checkedFirst(operatorOrModel("approvals.decide"), async (request) =>
    request.principal.kind === "operator" ? operatorOf(request) : undefined,
  );

  /** Spec 5: a model client or an operator may ask; the agent is the client (or the operator). */
  api.post(
    "/api/grants/request",
    {
      ...asks,
      schema: { body: grantRequestInput, response: { 200: grantAnswer, 201: requestedGrant } },
    },
    async (request, reply) => {
      const input = request.body;
      let caller: { organisationId: string; agentId: string; actor: string };
      // Where item_name is looked for: the model client's own environment; for an operator the one
      // named, else every environment the plane serves (operator routes span them all, spec 4.3).
      let environments: readonly string[];
      if (request.principal.kind === "model") {
        const client = request.principal.client;
        caller = { organisationId: client.organisation_id, agentId: client.id, actor: `agent:${client.id}` };
        environments = [client.environment];
      } else {
        const operator = await operatorOf(request);
        const agentId = input.agent_id ?? operator.actor;
        environments = checkEnvironment(input.environment, deps.environments);
        caller = { organisationId: operator.organisationId, agentId, actor: operator.actor };
      }
      const callScope = checkCallScope(input);
      const { environment, item } = await findItemInEnvironments(
        deps.items,
        caller.organisationId,
        environments,
        input.item_name,
      );
      const scope = { ...caller, environment };
      const grantScope = httpRequestGrantScope(scope, item);
      const hasScope = Boolean(callScope.host || callScope.method || callScope.path);
      const covering = await deps.grants.findUsableGrant(grantScope, hasScope ? callScope : undefined);
      // Spec 3.1: active at once only for a standing policy, never a session approval.
      if (covering && isStandingPolicy(covering.policy)) {
        // Spec 6: the audit lists auto_approved with the name and host. The host is the one asked
        // for, or the credential's only host when the request named none.
        await deps.grants.recordAutoApproved({
          organisationId: scope.organisationId,
          environment: scope.environment,
          actor: scope.actor,
          agentId: scope.agentId,
          itemName: item.name,
          host: callScope.host ?? (item.allowedHosts.length === 1 ? item.allowedHosts[0] : undefined),
          grant: covering,
        });
        return { grant: covering };
      }
      const { grant, approvalCode, notifyFailed } = await deps.grants.requestGrant({
        ...grantScope,
        ...(hasScope ? { callScope } : {}),
        environment: scope.environment,
        actor: scope.actor,
        taskDescription: input.task_description,
      });
      return reply
        .status(201)
        .send({ grant, approval_code: approvalCode, notify_failed: notifyFailed ?? false });
    },
  );

  api.post(
    "/api/grants/:id/approve",
    {
      ...decidesStanding,
      schema: { params: idParams, body: grantApproval, response: { 200: grantAnswer } },
    },
    async (request) => {
      const operator = await operatorOf(request);
      const input = request.body;
      const policy = input.policy ?? "prompt";
      let folderId: string | undefined;
      if (policy === "folder_standing") {
        // Spec 2.4: a folder-standing approval is an owner's (DECISIONS "Teams").
        requirePermission(operator.role, "approvals.decide_folder");
        folderId = await deps.grants.confirmFolder(
          operator.organisationId,
          request.params.id,
          input.confirm_name,
        );
      }
      return {
        grant: await deps.grants.approveGrant(
          operator.organisationId,
          operator.actor,
          request.params.id,
          policy,
          { scope: input.scope, folderId },
        ),
      };
    },
  );

  api.post(
    "/api/grants/:id/revoke",
    { ...decides, schema: { params: idParams, response: { 200: grantAnswer } } },
    async (request) => {
      const operator = await operatorOf(request);
      return {
        grant: await deps.grants.revokeGrant(operator.organisationId, operator.actor, request.params.id),
      };
    },
  );

  // folder_standing needs the grant's id and a typed folder name: POST /api/grants/:id/approve.
  api.post(
    "/api/grants/approve-by-code",
    { ...decidesStanding, schema: { body: codeApproval, response: { 200: grantAnswer } } },
    async (request) => {
      const operator = await operatorOf(request);
      const input = request.body;
      const grant = await deps.grants.approveByCode(operator.organisationId, operator.actor, input.code, {
        grantId: input.grant_id,
        policy: input.policy ?? "prompt",
        scope: input.scope,
      });
      return { grant };
    },
  );

  // The console's code form (two steps): the code finds its pending request, which is shown with
  // the Inbox's choices and then decided by its id, so the call approved is the call shown. POST,
  // so the code is never in a URL; approving nothing, it asks no step-up, but it is an approver's
  // lookup (a wrong code counts toward the organisation's limit as approve-by-code's do).
  api.post(
    "/api/grants/find-by-code",
    { ...decides, schema: { body: codeLookup, response: { 200: codeLookupAnswer } } },
    async (request) => {
      const operator = await operatorOf(request);
      return { approval: await deps.grants.findByCode(operator.organisationId, request.body.code) };
    },
  );

  api.get("/api/grants", { ...reads, schema: { response: { 200: grantList } } }, async (request) => {
    const operator = await operatorOf(request);
    return { grants: await deps.grants.listGrants(operator.organisationId) };
  });

  // The Approvals section (DECISIONS "The approval, readable and reversible"): every active
  // approval, who approved it and when it was last used; each is revoked with /api/grants/:id/revoke.
  api.get(
    "/api/approvals",
    { ...reads, schema: { querystring: approvalsQuery, response: { 200: approvalList } } },
    async (request) => {
      const operator = await operatorOf(request);
      const query = request.query;
      return {
        approvals: await deps.grants.listActiveApprovals(operator.organisationId, {
          ...(query.environment ? { environment: query.environment } : {}),
          ...(query.agent_id ? { agentId: query.agent_id } : {}),
          ...(query.item_name ? { itemName: query.item_name } : {}),
          ...(query.policy ? { policy: query.policy } : {}),
        }),
      };
    },
  );

  api.get(
    "/api/audit",
    { ...reads, schema: { querystring: auditQuery, response: { 200: auditList } } },
    async (request) => {
      const operator = await operatorOf(request);
      const query = request.query;
      const events = await deps.audit.findAuditEvents(operator.organisationId, {
        ...auditFilterOf(query),
        before: query.before,
        limit: AUDIT_PAGE,
      });
      return { events, next_before: events.length === AUDIT_PAGE ? events.at(-1)!.id : null };
    },
  );
}

/** Events per page of GET /api/audit (spec 4.3: the newest 200). */
const AUDIT_PAGE = 200;

/** The environments to search: the one named (which this plane must serve), else all it serves. */
function checkEnvironment(raw: unknown, served: readonly string[]): readonly string[] {
  if (raw === undefined) return served;
  if (typeof raw !== "string") throw new AppError("invalid_request", "environment is a string");
  // As on /api/items: an environment this plane does not serve answers as if it did not exist.
  if (!served.includes(raw))
    throw new AppError("not_found", `this service does not serve the ${raw} environment`);
  return [raw];
}

/**
 * The one credential named `name` across `environments`. Several matches are 409 ambiguous with
 * the environments listed, never a silent pick: approving the staging key is not approving the
 * production one.
 */
async function findItemInEnvironments(
  items: Pick<ItemsService, "findCallableByName">,
  organisationId: string,
  environments: readonly string[],
  name: string,
) {
  const found = await Promise.all(
    environments.map(async (environment) => ({
      environment,
      item: await items.findCallableByName(organisationId, environment, name),
    })),
  );
  const matches = found.flatMap((f) => (f.item ? [{ environment: f.environment, item: f.item }] : []));
  const [only, ...others] = matches;
  if (!only) throw new AppError("not_found", `no credential named ${name} in ${environments.join(" or ")}`);
  if (others.length > 0) {
    const names = matches.map((m) => m.environment);
    throw new AppError(
      "ambiguous",
      `${name} is stored in ${names.join(" and ")}; send environment to say which one`,
      { extra: { environments: names } },
    );
  }
  return only;
}

/**
 * The optional host, method and path a request is scoped to, checked as http_request checks a call
 * (spec 4.2 rules 1 and 4) before anything is stored or audited: a scope no call could match is
 * refused, not kept.
 */
function checkCallScope(input: Record<string, unknown>): { host?: string; method?: string; path?: string } {
  const scope: { host?: string; method?: string; path?: string } = {};
  if (input.host !== undefined) {
    const host = checkHostname(typeof input.host === "string" ? input.host : "");
    if (!host.ok) throw new AppError(host.code, host.message);
    scope.host = host.host;
  }
  if (input.method !== undefined) {
    const method = typeof input.method === "string" ? input.method.toUpperCase() : "";
    if (!(HTTP_METHODS as readonly string[]).includes(method))
      throw new AppError("invalid_request", `method is one of ${HTTP_METHODS.join(", ")}`);
    scope.method = method;
  }
  if (input.path !== undefined) {
    const path = validateRequestPath(typeof input.path === "string" ? input.path : "");
    if (!path.ok) throw new AppError(path.code, path.message);
    scope.path = path.path.split("?")[0];
  }
  return scope;
}
