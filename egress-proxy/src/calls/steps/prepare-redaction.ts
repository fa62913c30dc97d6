// Compiles every spelling of every value opened or minted so far, before the request
// leaves: a redactor that cannot be built refuses the call instead of answering unredacted.
import { createRedactor } from "../../redact/redactor.ts";
import type { CallStep } from "./outgoing-call.ts";

export const prepareRedaction: CallStep = (call) => {
  call.redactor = createRedactor(call.redactionValues);
};
