// The request id a control-plane call carries (gRPC metadata `x-request-id`), kept for the length
// of the call so that every log line the proxy writes for it names it (pino's mixin reads it).
import { AsyncLocalStorage } from "node:async_hooks";
import type { Metadata } from "@grpc/grpc-js";

export interface CallContext {
  requestId: string;
}

/** Only ids that are plain tokens are kept: the value is copied into log lines. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

export const REQUEST_ID_METADATA = "x-request-id";

const storage = new AsyncLocalStorage<CallContext>();

/** The request id of the metadata, when it is a plain token. */
export function readRequestId(metadata: Metadata): string | undefined {
  const value = metadata.get(REQUEST_ID_METADATA)[0];
  return typeof value === "string" && REQUEST_ID.test(value) ? value : undefined;
}

/** Runs `fn` with the call's request id in scope (or none). */
export function runInCallContext<T>(requestId: string | undefined, fn: () => T): T {
  return requestId ? storage.run({ requestId }, fn) : fn();
}

/** For pino's `mixin`: `{ request_id }` inside a call, nothing outside one. */
export function callContextFields(): { request_id?: string } {
  const context = storage.getStore();
  return context ? { request_id: context.requestId } : {};
}
