// Every spelling of every opened or minted value becomes "[redacted]" in the body and
// the allowed response headers. Runs on the whole body, before it is cut for the model, so a cut
// can never leave half a secret behind.
import { type CallStep, requireStage } from "./outgoing-call.ts";

export const redactAnswer: CallStep = (call) => {
  const answer = requireStage(call.answer, "answer arrived");
  const redactor = requireStage(call.redactor, "redaction was prepared");
  call.redactedAnswer = {
    body: redactor.redactBytes(answer.body),
    headers: redactor.redactHeaders(answer.headers),
  };
};
