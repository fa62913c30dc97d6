// Provider connect routes (spec 4.3): POST /api/integrations/:provider/start for a signed-in
// operator, and the redirect URI the provider sends the browser back to, GET /connect/callback
// (alias /integrations/:provider/callback). The callback answers with a redirect to the console
// only: `#vault?connected=<provider>` or `#vault?connect_error=<provider>&reason=<code>`.
import { AppError } from "@latch/shared/errors";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { requireOrgOperator } from "../auth/operator-guard.ts";
import { operatorOnly } from "../auth/principal.ts";
import { bodyField } from "../auth/step-up.ts";
import { checkedFirst, type ZodTypeProvider } from "../http/route-schemas.ts";
import {
  callbackState,
  connectCallbackQuery,
  connectStart,
  connectStartAnswer,
  providerParams,
} from "./connect.schemas.ts";
import type { ConnectResult, ConnectService } from "./connect.service.ts";

/** What the callback reads of the provider's answer; `isUnreadable` when the edge refused it. */
interface CallbackQuery {
  code?: string | undefined;
  state?: string | undefined;
  error?: string | undefined;
  isUnreadable?: boolean | undefined;
}

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
  async function callback(
    request: FastifyRequest,
    reply: FastifyReply,
    alias?: string,
    query: CallbackQuery = request.query as CallbackQuery,
  ) {
    if (!request.operatorSession?.is_mfa_passed) return reply.redirect("/sign-in", 302);
    let operator: Awaited<ReturnType<typeof operatorOf>>;
    try {
      operator = await operatorOf(request);
    } catch {
      return toConsole(reply, { provider: alias ?? "provider", ok: false, reason: "state_expired" });
    }
    const result = await deps.connect.finishConnect(
      { organisationId: operator.organisationId, sessionId: operator.session.id, actor: operator.actor },
      { code: query.code, state: query.state, error: query.error, isUnreadable: query.isUnreadable },
      alias,
    );
    return toConsole(reply, result);
  }

  /**
   * Spec 4.3: every callback ends in the console with its reason, a provider's answer the edge
   * refuses too (a parameter given twice, a control character or a lone surrogate in its
   * error_description, a code over the limit: http/request-text.ts and the query schema), never a
   * JSON error in the operator's browser. Its state, when given once as the schema reads it, is
   * claimed so the connect ends there: provider_denied when the answer carries an error, else
   * exchange_failed, its code sent nowhere. Any other error goes to the app's handler.
   */
  const unreadableAnswer =
    (isAlias: boolean) => async (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      const isQueryRefused =
        error.validationContext === "querystring" ||
        error.validationContext === "params" ||
        (error instanceof AppError && error.code === "invalid_request");
      if (!isQueryRefused) throw error;
      const answer = new URL(request.url, "http://callback.invalid").searchParams;
      const states = answer.getAll("state");
      const state = states.length === 1 ? callbackState.safeParse(states[0]) : undefined;
      const provider = isAlias ? providerParams.safeParse(request.params) : undefined;
      return callback(request, reply, provider?.success ? provider.data.provider : undefined, {
        state: state?.success ? state.data : undefined,
        error: answer.has("error") ? "unreadable" : undefined,
        isUnreadable: true,
      });
    };

  // Public (a signed-out browser is sent to sign-in), but what it finishes stores a credential.
  const storesCredential = { action: "credentials.write" } as const;
  api.get(
    "/connect/callback",
    {
      config: storesCredential,
      schema: { querystring: connectCallbackQuery },
      errorHandler: unreadableAnswer(false),
    },
    (request, reply) => callback(request, reply),
  );
  api.get(
    "/integrations/:provider/callback",
    {
      config: storesCredential,
      schema: { params: providerParams, querystring: connectCallbackQuery },
      errorHandler: unreadableAnswer(true),
    },
    (request, reply) => callback(request, reply, request.params.provider),
  );
}
