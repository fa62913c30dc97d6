// Rewrap: stored values sealed again under this proxy's current sealing key, as envelopes, behind
// a rewrap ticket (vault seal-rewrap). What comes in and what goes out is sealed: an envelope's
// data key is sealed again, a bare sealed box from before envelopes becomes one; no plaintext
// leaves, and a value that does not open is answered with its code, in its place.

import type { RewrapResponse, SignedTicket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import type { Logger } from "pino";
import type { SealingKeyring } from "../keys/sealing-keys.ts";
import { partOfKind } from "../tickets/ticket-kind.ts";
import type { TicketChecker, TicketSpender } from "../tickets/verify.ts";

/** One ticket seals at most this many values again. */
export const MAX_REWRAP_VALUES = 500;

export function createRewrap(deps: {
  checkTicket: TicketChecker;
  spendTicket: TicketSpender;
  keyring: Pick<SealingKeyring, "rewrap">;
  logger: Logger;
}): (signed: SignedTicket | undefined) => Promise<RewrapResponse> {
  return async (signed) => {
    // Checked before spent, as in Execute: an unsigned ticket can never burn a real ticket's id.
    const ticket = await deps.checkTicket(signed);
    const values = partOfKind(ticket, "rewrap", "the ticket carries no rewrap request").values;
    if (values.length > MAX_REWRAP_VALUES) {
      throw new AppError("ticket_invalid", `a rewrap ticket carries at most ${MAX_REWRAP_VALUES} values`);
    }
    await deps.spendTicket(ticket);
    let refused = 0;
    const answered = values.map((value) => {
      try {
        const rewrapped = deps.keyring.rewrap(value.keyId, value.sealedValue);
        return { keyId: rewrapped.keyId, sealedValue: Buffer.from(rewrapped.sealed), errorCode: "" };
      } catch (error) {
        refused++;
        const code = error instanceof AppError ? error.code : "internal";
        return { keyId: "", sealedValue: Buffer.alloc(0), errorCode: code };
      }
    });
    deps.logger.info(
      { ticket: ticket.id.slice(0, 8), values: values.length, refused },
      "stored values sealed again",
    );
    return { values: answered };
  };
}
