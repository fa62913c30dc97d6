// Every spelling of every opened or minted value becomes "[redacted]" in the body and
// the allowed response headers. Runs on the whole body, before it is cut for the model, so a cut
// can never leave half a secret behind. The redactor leaves out the spellings that cannot occur in
// this answer (redactor.ts answerShape): a family whose marker it lacks, a hex or base64 spelling
// longer than any run of those characters in it.
import { answerShape, createRedactor } from "../../redact/redactor.ts";
import { type CallStep, requireStage } from "./outgoing-call.ts";

export const redactAnswer: CallStep = (call) => {
  const answer = requireStage(call.answer, "answer arrived");
  const values = requireStage(call.redaction, "redaction was prepared");
  const shape = answerShape(
    answer.body,
    answer.headers.map((header) => header.value),
  );
  const redactor = createRedactor(values, { shape });
  try {
    call.redactedAnswer = {
      body: redactor.redactBytes(answer.body),
      headers: redactor.redactHeaders(answer.headers),
    };
  } finally {
    redactor.dispose();
  }
};
