// Provider connect routes (spec 4.3): POST /api/integrations/:provider/start for a signed-in
// operator, and the redirect URI the provider sends the browser back to, GET /connect/callback
// (alias /integrations/:provider/callback). The callback answers with a redirect to the console
// only: `#vault?connected=<provider>` or `#vault?connect_error=<provider>&reason=<code>`.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { requireOrgOperator } from "../auth/operator-guard.ts";
import { operatorOnly } from "../auth/principal.ts";
import { bodyField } from "../auth/step-up.ts";
import { checkedFirst, type ZodTypeProvider } from "../http/route-schemas.ts";
import { connectCallbackQuery, connectStart, connectStartAnswer, providerParams } from "./connect.schemas.ts";
import type { ConnectResult, ConnectService } from "./connect.service.ts";

export function registerConnectRoutes(app: FastifyInstance, deps: { connect: ConnectService }): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const operatorOf = (request: FastifyRequest) => requireOrgOperator(request);

  api.post(
    "/api/integrations/:provider/start",
    {
      // Once connected, the agent named by agent_client_id, else the agent whose request need_id
      // names, gets a standing approval (connect.service.ts finishConnect): a step-up first.
      ...checkedFirst(
        {
          ...operatorOnly("credentials.write"),
          stepUp: {
            doing: "giving an agent a standing approval",
            when: (request) =>
              ["agent_client_id", "need_id"].some((field) => {
                const value = bodyField(request, field);
                return value !== undefined && value !== null && value !== "";
              }),
          },
        },
        operatorOf,
      ),
      schema: { params: providerParams, body: connectStart, response: { 200: connectStartAnswer } },
    },
    async (request) => {
      const operator = await operatorOf(request);
      return deps.connect.startConnect(
        { organisationId: operator.organisationId, sessionId: operator.session.id, actor: operator.actor },
        request.params.provider,
        request.body,
      );
    },
  );

  const toConsole = (reply: FastifyReply, result: ConnectResult) => {
    const provider = encodeURIComponent(result.provider);
    const fragment = result.ok
      ? `vault?connected=${provider}`
      : `vault?connect_error=${provider}&reason=${result.reason}`;
    return reply.header("referrer-policy", "no-referrer").redirect(`/console#${fragment}`, 303);
  };

  /** The browser comes back from the provider: a signed-in operator past the authenticator step. */
  async function callback(request: FastifyRequest, reply: FastifyReply, alias?: string) {
    if (!request.operatorSession?.is_mfa_passed) return reply.redirect("/sign-in", 302);
    const query = request.query as { code?: string; state?: string; error?: string };
    let operator: Awaited<ReturnType<typeof operatorOf>>;
    try {
      operator = await operatorOf(request);
    } catch {
      return toConsole(reply, { provider: alias ?? "provider", ok: false, reason: "state_expired" });
    }
    const result = await deps.connect.finishConnect(
      { organisationId: operator.organisationId, sessionId: operator.session.id, actor: operator.actor },
      { code: query.code, state: query.state, error: query.error },
      alias,
    );
    return toConsole(reply, result);
  }

  // Public (a signed-out browser is sent to sign-in), but what it finishes stores a credential.
  const storesCredential = { action: "credentials.write" } as const;
  api.get(
    "/connect/callback",
    { config: storesCredential, schema: { querystring: connectCallbackQuery } },
    (request, reply) => callback(request, reply),
  );
  api.get(
    "/integrations/:provider/callback",
    { config: storesCredential, schema: { params: providerParams, querystring: connectCallbackQuery } },
    (request, reply) => callback(request, reply, request.params.provider),
  );
}
