// The answer as Execute returns it: the body cut to what the model may see, the status,
// the redacted headers and any credential minted or rotated on the way.
import { MODEL_BODY_LIMIT_BYTES } from "../call-limits.ts";
import { type CallStep, requireStage } from "./outgoing-call.ts";

/** Cuts a body to what the model may see without splitting a UTF-8 character. */
export function truncateForModel(body: Buffer): { body: Buffer; truncated: boolean } {
  if (body.length <= MODEL_BODY_LIMIT_BYTES) return { body, truncated: false };
  let end = MODEL_BODY_LIMIT_BYTES;
  // Step back over continuation bytes (10xxxxxx) so the cut lands on a character boundary.
  while (end > 0 && ((body[end] ?? 0) & 0xc0) === 0x80) end--;
  return { body: body.subarray(0, end), truncated: true };
}

export const shapeResponse: CallStep = (call) => {
  const answer = requireStage(call.answer, "answer arrived");
  const redacted = requireStage(call.redactedAnswer, "answer was redacted");
  // A sign-in's answer is its ID token alone: the token endpoint's body carried tokens Latch keeps none of.
  const isSignIn = call.spec.exchange?.idTokenOnly === true;
  const { body, truncated } = isSignIn
    ? { body: Buffer.alloc(0), truncated: false }
    : truncateForModel(redacted.body);
  call.response = {
    reachedOrigin: true,
    originStatus: answer.status,
    body,
    bodyTruncated: truncated,
    headers: isSignIn ? [] : redacted.headers,
    error: undefined,
    durationMs: Math.round(performance.now() - call.startedAt),
    rotatedCredentials: call.rotatedCredentials,
    idToken: call.idToken ?? "",
  };
};
