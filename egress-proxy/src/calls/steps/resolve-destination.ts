// Resolve once, classify every answer, decide (destination/). The address decided here is
// the only one the dial step may use, which is what defeats DNS rebinding. A refusal keeps its
// verdict (address, reason, block) on the call for the call's log line.
import { AddressRefused } from "../../destination/resolve.ts";
import type { CallStep } from "./outgoing-call.ts";

export const resolveDestination: CallStep = async (call, deps) => {
  // The call's deadline over DNS, as what is left of its time: the resolver's one timer serves it
  // and is cleared as soon as the answer is in (AbortSignal.timeout would leave a timer pending
  // for the whole timeout after every call), and none is set when no DNS is asked.
  try {
    call.destination = await deps.resolver.resolve(
      call.host,
      call.timeoutMs - (performance.now() - call.startedAt),
    );
  } catch (error) {
    if (error instanceof AddressRefused) call.refusedAddress = error.verdict;
    throw error;
  }
};
