// Resolve once, classify every answer, decide (destination/). The address decided here is
// the only one the dial step may use, which is what defeats DNS rebinding. A refusal keeps its
// verdict (address, reason, block) on the call for the call's log line.
import { AddressRefused } from "../../destination/resolve.ts";
import type { CallStep } from "./outgoing-call.ts";

export const resolveDestination: CallStep = async (call, deps) => {
  const deadline = AbortSignal.timeout(call.timeoutMs);
  try {
    call.destination = await deps.resolver.resolve(call.host, deadline);
  } catch (error) {
    if (error instanceof AddressRefused) call.refusedAddress = error.verdict;
    throw error;
  }
};
