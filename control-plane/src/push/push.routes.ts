// Web Push for the operator's devices (DECISIONS "Approvals that reach the operator"):
// GET /api/push/vapid-public-key, POST /api/push/subscriptions, DELETE /api/push/subscriptions/:id.
// A subscription is the signed-in operator's own (a device), whatever organisation it acts in.
import { AppError } from "@latch/shared/errors";
import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from "fastify";
import { idParams, okAnswer, type ZodTypeProvider } from "../http/route-schemas.ts";
import { pushSubscriptionAnswer, pushSubscriptionInput, vapidPublicKeyAnswer } from "./push.schemas.ts";
import type { PushService } from "./push.service.ts";

export interface PushRouteDeps {
  push: Pick<PushService, "vapidPublicKey" | "subscribe" | "unsubscribe">;
  access: {
    config?: FastifyContextConfig;
    preValidation?: (request: FastifyRequest) => Promise<void>;
    operatorOf(request: FastifyRequest): Promise<{ operatorId: string; session?: { id: string } }>;
  };
}

export function registerPushRoutes(app: FastifyInstance, deps: PushRouteDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const { operatorOf, ...access } = deps.access;

  api.get(
    "/api/push/vapid-public-key",
    { ...access, schema: { response: { 200: vapidPublicKeyAnswer } } },
    async (request) => {
      await operatorOf(request);
      return { public_key: deps.push.vapidPublicKey() };
    },
  );

  api.post(
    "/api/push/subscriptions",
    { ...access, schema: { body: pushSubscriptionInput, response: { 201: pushSubscriptionAnswer } } },
    async (request, reply) => {
      const { operatorId, session } = await operatorOf(request);
      const subscription = await deps.push.subscribe(operatorId, request.body, session?.id ?? null);
      return reply.status(201).send({ subscription });
    },
  );

  api.delete(
    "/api/push/subscriptions/:id",
    { ...access, schema: { params: idParams, response: { 200: okAnswer } } },
    async (request) => {
      const { operatorId } = await operatorOf(request);
      if (!(await deps.push.unsubscribe(operatorId, request.params.id))) {
        throw new AppError("not_found", "no such push subscription on this account");
      }
      return { ok: true as const };
    },
  );
}
