// The local operator API (spec 4.4): credentials, grants and audit, for the console and the CLI.
// Every route needs the operator bearer.
import { AppError } from "@latch/shared/errors";
import { freeText, safeString } from "@latch/shared/text/safe-string";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { HTTP_REQUEST_TOOL } from "../grants/grant-scope.ts";
import { isUnderPrefix } from "../http/route-path.ts";
import { requireRole } from "./local-guards.ts";
import { LOCAL_OPERATOR, type LocalVault } from "./local-vault.ts";

const grantRequestBody = z.strictObject({
  item_name: safeString().min(1).max(128),
  agent_id: safeString().min(1).max(64),
  tool_id: z.literal(HTTP_REQUEST_TOOL).default(HTTP_REQUEST_TOOL),
  task_description: freeText().max(10_000).optional(),
});

// Spec 4.4: POST /api/grants approves a pending grant by grant_id, or makes an active one for
// item_name and agent_id; either way "tool_id http_request for agent calls" may ride along. Every
// grant an agent can ask for is an http_request grant, so another tool_id is a 400 naming the field.
const approveById = z.strictObject({
  grant_id: safeString().min(1).max(64),
  scope: z.enum(["once", "session"]).default("once"),
  tool_id: z.literal(HTTP_REQUEST_TOOL).optional(),
});
const approveByName = z.strictObject({
  item_name: safeString().min(1).max(128),
  agent_id: safeString().min(1).max(64),
  scope: z.enum(["once", "session"]).default("once"),
  tool_id: z.literal(HTTP_REQUEST_TOOL).default(HTTP_REQUEST_TOOL),
});

const auditQuery = z.object({
  item_name: safeString().max(128).optional(),
  limit: z.coerce.number().int().min(1).max(200).optional(),
});

function parse<T>(schema: z.ZodType<T>, value: unknown): T {
  const parsed = schema.safeParse(value ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new AppError("invalid_request", `invalid ${issue?.path.join(".") || "body"}: ${issue?.message}`);
  }
  return parsed.data;
}

const POLICY_OF_SCOPE = { once: "prompt", session: "session" } as const;

export function registerLocalApiRoutes(app: FastifyInstance, vault: LocalVault): void {
  const org = vault.organisationId;
  app.addHook("onRequest", async (request) => {
    // The route the router chose, not only the raw text: "/%61pi/items" reaches "/api/items".
    if (isUnderPrefix(request, ["/api/"])) requireRole(request, "operator");
  });

  async function findItemId(name: string): Promise<string> {
    const item = await vault.items.findItemByName(org, vault.environment, name);
    if (!item) throw new AppError("not_found", `no credential named ${name}`);
    return item.id;
  }

  const listItems = () => vault.items.listItems(org);
  app.get("/api/secrets", async () => ({ secrets: await listItems() }));
  app.get("/api/items", async () => ({ items: await listItems() }));
  // The local `vault set` replaces a credential of the same name (spec 4.4: "stores or replaces").
  const store = (body: unknown) => vault.items.storeItem(org, LOCAL_OPERATOR, body, { replace: true });
  app.post("/api/secrets", async (request, reply) =>
    reply.status(201).send({ secret: await store(request.body) }),
  );
  app.post("/api/items", async (request, reply) =>
    reply.status(201).send({ item: await store(request.body) }),
  );
  app.delete<{ Params: { id: string } }>("/api/items/:id", async (request) => {
    await vault.items.deleteItem(org, LOCAL_OPERATOR, request.params.id);
    return { ok: true };
  });

  app.get("/api/grants", async () => ({ grants: await vault.grants.listGrants(org) }));
  app.post("/api/grants/request", async (request, reply) => {
    const body = parse(grantRequestBody, request.body);
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
  });
  app.post("/api/grants", async (request, reply) => {
    // The body's shape picks the schema, so a refusal names the field that is wrong.
    const raw = request.body;
    if (typeof raw === "object" && raw !== null && "grant_id" in raw) {
      const byId = parse(approveById, raw);
      const policy = POLICY_OF_SCOPE[byId.scope];
      return { grant: await vault.grants.approveGrant(org, LOCAL_OPERATOR, byId.grant_id, policy) };
    }
    const body = parse(approveByName, raw);
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
  });
  app.post<{ Params: { id: string } }>("/api/grants/:id/revoke", async (request) => ({
    grant: await vault.grants.revokeGrant(org, LOCAL_OPERATOR, request.params.id),
  }));

  app.get("/api/audit", async (request) => {
    const query = parse(auditQuery, request.query);
    return {
      events: await vault.audit.findAuditEvents(org, { itemName: query.item_name, limit: query.limit }),
    };
  });
}
