// What an agent is told about an approval still pending (spec 4.2 `pending`): how the operator
// approves it on this surface and, when the operator denied this same request within the last ten
// minutes (DECISIONS "The approval, readable and reversible"), that it was refused a moment ago and
// should not be pushed again on the agent's own initiative.
import type { OperatorSurface } from "./tool-context.ts";

/** next.for_model of a pending answer; `then` says what the agent does once it is approved. */
export function pendingHint(
  surface: Pick<OperatorSurface, "approveHint">,
  grantId: string,
  then: string,
  deniedAt: Date | null,
): string {
  const approve = surface.approveHint(grantId, then);
  if (!deniedAt) return approve;
  return `The operator refused this exact request a moment ago, so they were not notified again. Do not retry it on your own: tell the user what you were trying to do and why, and retry only if they decide to approve it. ${approve}`;
}
