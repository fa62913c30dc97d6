// Resolve once, classify every answer, decide (destination/). The address decided here is
// the only one the dial step may use, which is what defeats DNS rebinding. A refusal keeps its
// verdict (address, reason, block) on the call for the call's log line.
import { AddressRefused } from "../../destination/resolve.ts";
import type { CallStep } from "./outgoing-call.ts";

export const resolveDestination: CallStep = async (call, deps) => {
  // The call's deadline over DNS, cleared as soon as the answer is in: AbortSignal.timeout would
  // leave one timer pending for the whole timeout (10 s by default) after every call.
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), call.timeoutMs);
  try {
    call.destination = await deps.resolver.resolve(call.host, deadline.signal);
  } catch (error) {
    if (error instanceof AddressRefused) call.refusedAddress = error.verdict;
    throw error;
  } finally {
    clearTimeout(timer);
  }
};
