// Dial the decided address and read the answer. One step, because upstream/call.ts holds
// one deadline over connect, TLS, headers and every body byte, and caps the body while reading.
import { type CallStep, requireStage } from "./outgoing-call.ts";

export const dialOrigin: CallStep = async (call, deps) => {
  const destination = requireStage(call.destination, "destination was decided");
  // What is left of the call's budget after the ticket checks and DNS.
  const remainingMs = Math.max(1, call.timeoutMs - (performance.now() - call.startedAt));
  call.answer = await deps.upstream.call({
    organisationId: call.organisationId,
    destination,
    method: call.method,
    path: call.path,
    headers: call.headers,
    body: call.body,
    contentType: call.contentType,
    timeoutMs: remainingMs,
  });
};
