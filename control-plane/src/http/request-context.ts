// The id of the HTTP request being served, kept for the length of the request so that every log
// line written for it names it (pino's mixin) and the egress client sends it on to the proxy in
// gRPC metadata, where the proxy's lines name it too: one id from the edge to the origin call.
import { AsyncLocalStorage } from "node:async_hooks";
import { pooledRandomBytes } from "@latch/shared/crypto/random-pool";
import type { FastifyInstance } from "fastify";

const storage = new AsyncLocalStorage<{ requestId: string }>();

/** A fresh id per request, random so that ids from several replicas never collide. */
export function generateRequestId(): string {
  return `req_${pooledRandomBytes(8).toString("hex")}`;
}

/** Runs the rest of each request (hooks, handler) with its id in scope. */
export function registerRequestContext(app: FastifyInstance): void {
  app.addHook("onRequest", (request, _reply, done) => {
    storage.run({ requestId: request.id }, done);
  });
}

/** The id of the request being served here, if any. */
export function currentRequestId(): string | undefined {
  return storage.getStore()?.requestId;
}

/** For pino's `mixin`: `{ request_id }` inside a request, nothing outside one. */
export function requestContextFields(): { request_id?: string } {
  const requestId = currentRequestId();
  return requestId ? { request_id: requestId } : {};
}
