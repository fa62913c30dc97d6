// A ticket is for one RPC. The control plane's minter sets one kind; the proxy still refuses a
// ticket that carries another beside the one its RPC reads, so no minter bug can make an Execute
// ticket double as a Rewrap or a Resolve one (each RPC would otherwise read only its own field).
import type { Ticket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";

const KINDS = ["call", "resolve", "document", "push", "rewrap"] as const;
export type TicketKind = (typeof KINDS)[number];

/** The ticket's `kind` part, or ticket_invalid (with `missing`) when it is absent or not alone. */
export function partOfKind<K extends TicketKind>(
  ticket: Ticket,
  kind: K,
  missing: string,
): NonNullable<Ticket[K]> {
  const part = ticket[kind];
  if (part === undefined || part === null) throw new AppError("ticket_invalid", missing);
  const other = KINDS.find((k) => k !== kind && ticket[k] !== undefined && ticket[k] !== null);
  if (other)
    throw new AppError(
      "ticket_invalid",
      `a ${kind} ticket may carry nothing else, and this one carries a ${other}`,
    );
  return part as NonNullable<Ticket[K]>;
}
