// The local operator API (spec 4.4): credentials, grants and audit, for the console and the CLI.
// Every route needs the operator bearer.
import { AppError } from "@latch/shared/errors";
import type { FastifyInstance } from "fastify";
import { registerLedgerRoutes } from "../audit/ledger.routes.ts";
import { isUnderPrefix } from "../http/route-path.ts";
import { idParams, okAnswer, type ZodTypeProvider } from "../http/route-schemas.ts";
import { itemAnswer, itemInput, itemList } from "../items/items.schemas.ts";
import { registerPolicyRoutes } from "../policies/policies.routes.ts";
import {
  auditQuery,
  grantApproval,
  grantRequestBody,
  localAuditList,
  localGrantAnswer,
  localGrantList,
  secretAnswer,
  secretList,
} from "./local-api.schemas.ts";
import { requireRole } from "./local-guards.ts";
import { storeLocalItem } from "./local-store.ts";
import { LOCAL_OPERATOR, type LocalVault } from "./local-vault.ts";

const POLICY_OF_SCOPE = { once: "prompt", session: "session" } as const;

export function registerLocalApiRoutes(app: FastifyInstance, vault: LocalVault): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const org = vault.organisationId;
  app.addHook("onRequest", async (request) => {
    // The route the router chose, not only the raw text: "/%61pi/items" reaches "/api/items".
    if (isUnderPrefix(request, ["/api/"])) requireRole(request, "operator");
  });

  // The same policy routes as the hosted service; the operator bearer was judged above.
  const caller = async () => ({ organisationId: org, actor: LOCAL_OPERATOR });
  registerPolicyRoutes(app, {
    policies: vault.policies,
    variant: "local",
    access: { read: {}, write: {}, callerOf: caller },
  });

  async function findItemId(name: string): Promise<string> {
    const item = await vault.items.findItemByName(org, vault.environment, name);
    if (!item) throw new AppError("not_found", `no credential named ${name}`);
    return item.id;
  }

  const listItems = () => vault.items.listItems(org);
  api.get("/api/secrets", { schema: { response: { 200: secretList } } }, async () => ({
    secrets: await listItems(),
  }));
  api.get("/api/items", { schema: { response: { 200: itemList } } }, async () => ({
    items: await listItems(),
  }));
  // The local `vault set` replaces a credential of the same name (spec 4.4: "stores or replaces").
  // A replace that widens it ends the approvals of the whole credential (local-store.ts).
  const store = (body: unknown) => storeLocalItem(vault, body);
  api.post(
    "/api/secrets",
    { schema: { body: itemInput, response: { 201: secretAnswer } } },
    async (request, reply) => reply.status(201).send({ secret: await store(request.body) }),
  );
  api.post(
    "/api/items",
    { schema: { body: itemInput, response: { 201: itemAnswer } } },
    async (request, reply) => reply.status(201).send({ item: await store(request.body) }),
  );
  api.delete(
    "/api/items/:id",
    { schema: { params: idParams, response: { 200: okAnswer } } },
    async (request) => {
      await vault.items.deleteItem(org, LOCAL_OPERATOR, request.params.id);
      return { ok: true as const };
    },
  );

  // Every grant with what the console shows: the body a request would send, who decided it, a
  // Deny it repeats, its last use.
  api.get("/api/grants", { schema: { response: { 200: localGrantList } } }, async () => ({
    grants: await vault.grants.listGrantsInFull(org),
  }));
  api.post(
    "/api/grants/request",
    { schema: { body: grantRequestBody, response: { 201: localGrantAnswer } } },
    async (request, reply) => {
      const body = request.body;
      const { grant } = await vault.grants.requestGrant({
        organisationId: org,
        environment: vault.environment,
        itemId: await findItemId(body.item_name),
        agentId: body.agent_id,
        toolId: body.tool_id,
        actor: LOCAL_OPERATOR,
        taskDescription: body.task_description,
      });
      return reply.status(201).send({ grant });
    },
  );
  api.post(
    "/api/grants",
    { schema: { body: grantApproval, response: { 200: localGrantAnswer, 201: localGrantAnswer } } },
    async (request, reply) => {
      const body = request.body;
      if ("grant_id" in body) {
        const policy = POLICY_OF_SCOPE[body.scope];
        return { grant: await vault.grants.approveGrant(org, LOCAL_OPERATOR, body.grant_id, policy) };
      }
      const policy = POLICY_OF_SCOPE[body.scope];
      const grant = await vault.grants.createActiveGrant({
        organisationId: org,
        environment: vault.environment,
        itemId: await findItemId(body.item_name),
        agentId: body.agent_id,
        toolId: body.tool_id,
        actor: LOCAL_OPERATOR,
        policy,
      });
      return reply.status(201).send({ grant });
    },
  );
  api.post(
    "/api/grants/:id/revoke",
    { schema: { params: idParams, response: { 200: localGrantAnswer } } },
    async (request) => ({
      grant: await vault.grants.revokeGrant(org, LOCAL_OPERATOR, request.params.id),
    }),
  );

  // The same chain as hosted, in the local database: export, verify, and the checkpoint keys.
  registerLedgerRoutes(app, {
    ledger: vault.ledger,
    publishedKeys: vault.auditKeys,
    access: { organisationOf: async () => org },
  });

  api.get(
    "/api/audit",
    { schema: { querystring: auditQuery, response: { 200: localAuditList } } },
    async (request) => {
      const { item_name, limit } = request.query;
      return { events: await vault.audit.findAuditEvents(org, { itemName: item_name, limit }) };
    },
  );
}
