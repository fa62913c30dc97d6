// Verifying a call ticket: signature, audience, lifetime, then single use — in that order, so
// that an unsigned ticket can never burn a real ticket's id.
import type { KeyObject } from "node:crypto";
import { type SignedTicket, Ticket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import {
  MAX_TICKET_LIFETIME_MS,
  rawEd25519PublicKey,
  TICKET_CLOCK_SKEW_MS,
  ticketSigningInput,
} from "@latch/shared/tickets/ticket-signature";
import sodium from "sodium-native";
import type { ReplayStore } from "./replay-store.ts";

export interface TicketVerifierOptions {
  trustedKeys: ReadonlyMap<string, KeyObject>;
  audience: string;
  replayStore: ReplayStore;
  /** Clock skew tolerated between control plane and proxy. */
  skewMs?: number;
  now?: () => number;
}

export type TicketVerifier = (signed: SignedTicket | undefined) => Promise<Ticket>;

/** Exported for the fence, which remembers a spend exactly as long as the spender does. */
export const DEFAULT_SKEW_MS = TICKET_CLOCK_SKEW_MS;
const MAX_PAYLOAD_BYTES = 2 * 1024 * 1024;

/**
 * Ed25519 verification with native libsodium (crypto_sign_verify_detached): about half the CPU of
 * node:crypto's (OpenSSL) on this path, and at least as strict (it also refuses non-canonical and
 * small-order points). The signature must be exactly 64 bytes: libsodium reads the first 64 of a
 * longer one, and trailing bytes must not pass.
 */
function verifySignature(data: Buffer, rawKey: Uint8Array, signature: Uint8Array): boolean {
  if (signature.length !== sodium.crypto_sign_BYTES) return false;
  return sodium.crypto_sign_verify_detached(signature, data, rawKey);
}

/** The trusted keys as raw 32-byte Ed25519 public keys, converted once. */
function toRawKeys(keys: ReadonlyMap<string, KeyObject>): Map<string, Uint8Array> {
  const raw = new Map<string, Uint8Array>();
  for (const [keyId, key] of keys) {
    const bytes = rawEd25519PublicKey(key);
    if (bytes.length !== sodium.crypto_sign_PUBLICKEYBYTES)
      throw new Error(`ticket key ${keyId} is not Ed25519`);
    raw.set(keyId, bytes);
  }
  return raw;
}

/**
 * Checks a signed ticket's signature, audience and lifetime, and that the replay store can know
 * whether it was spent; spends nothing. `isFence` skips the expiry (a fence may come after the
 * ticket expired) and the store's knowledge (the fence answers UNKNOWN for it itself).
 */
export type TicketChecker = (
  signed: SignedTicket | undefined,
  options?: { isFence?: boolean },
) => Promise<Ticket>;
/**
 * Spends a checked ticket's id right before anything leaves: throws `ticket_expired` when it has
 * expired since (before the spend, or while the spend waited on a stalled store),
 * `ticket_replayed` when it was spent before (run by a replica, or fenced).
 */
export type TicketSpender = (ticket: Pick<Ticket, "id" | "expiresAtMs">) => Promise<void>;

/**
 * The checks before single use: signature, then audience, id and lifetime, then whether the
 * replay store the ticket is spent in (`replayStore`, when given) knows every spend of it. Kept
 * apart from spending so that a caller runs them as two ordered steps; never spend a ticket this
 * did not pass.
 */
export function createTicketChecker(
  options: Omit<TicketVerifierOptions, "replayStore"> & {
    replayStore?: Pick<ReplayStore, "knowsSpendsSinceMs"> | undefined;
  },
): TicketChecker {
  const now = options.now ?? Date.now;
  const skew = options.skewMs ?? DEFAULT_SKEW_MS;
  const trustedKeys = toRawKeys(options.trustedKeys);

  return async (signed, checkOptions = {}) => {
    if (!signed || signed.payload.length === 0 || signed.payload.length > MAX_PAYLOAD_BYTES) {
      throw new AppError("ticket_invalid", "the call ticket is missing or malformed");
    }
    const key = trustedKeys.get(signed.keyId);
    if (!key) throw new AppError("ticket_signature", "the call ticket is signed by an unknown key");
    const isValid = verifySignature(ticketSigningInput(signed.payload), key, signed.signature);
    if (!isValid) throw new AppError("ticket_signature", "the call ticket's signature does not verify");

    let ticket: Ticket;
    try {
      ticket = Ticket.decode(signed.payload);
    } catch (cause) {
      throw new AppError("ticket_invalid", "the call ticket could not be decoded", { cause });
    }
    if (ticket.audience !== options.audience) {
      throw new AppError("ticket_audience", "the call ticket is for another egress deployment");
    }
    const t = now();
    if (!ticket.id || ticket.id.length < 16 || ticket.id.length > 64) {
      throw new AppError("ticket_invalid", "the call ticket has no valid id");
    }
    if (ticket.issuedAtMs > t + skew || ticket.expiresAtMs - ticket.issuedAtMs > MAX_TICKET_LIFETIME_MS) {
      throw new AppError("ticket_invalid", "the call ticket's lifetime is not acceptable");
    }
    if (ticket.expiresAtMs + skew < t && !checkOptions.isFence) {
      throw new AppError("ticket_expired", "the call ticket has expired");
    }
    // A memory store knows only the spends of its own process: a ticket issued before it started
    // may have been run by the process before a restart (DECISIONS "The two tiers": every replica
    // refuses a ticket it has seen), so it is refused. Judged here, where every RPC has the whole
    // ticket, before its spend. Compared without the clock skew: with it, a new replica would
    // refuse every ticket of its first 5 s, a scale-up's and a first start's alike; the cost is a
    // predecessor that spent the ticket and restarted within the control plane's clock lead over
    // this host (milliseconds where clocks are kept). The fence keeps the skew.
    // Its own code, not ticket_replayed: the control plane sends a ticket to one process once
    // (again only after a refusal marked not started), so this refusal names a ticket no process
    // ran, and the call's one-call approval goes back (calls.service.ts). Marked not started too:
    // nothing was spent or sent, so the control plane's one retry may take it to another replica
    // (as RESOURCE_EXHAUSTED, grpc/server.ts, which leaves this healthy replica in the rotation).
    if (
      options.replayStore &&
      !checkOptions.isFence &&
      ticket.issuedAtMs < options.replayStore.knowsSpendsSinceMs
    ) {
      throw new AppError(
        "ticket_predates_proxy",
        "the call ticket was issued before this egress proxy started (it keeps spent tickets in memory, so it cannot tell whether its previous process ran it); nothing was spent or sent",
        { extra: { callNotStarted: true } },
      );
    }
    return ticket;
  };
}

/**
 * Single use: the id is remembered until the ticket could no longer pass the lifetime check. The
 * expiry is read again first, and again once the spend returns: a ticket that waited in a stalled
 * process, behind a slow DNS answer or on a stalled shared store past its expiry never leaves late,
 * when the control plane has stopped waiting for it (DECISIONS "Faults and isolation").
 */
export function createTicketSpender(
  options: Pick<TicketVerifierOptions, "replayStore" | "skewMs" | "now">,
): TicketSpender {
  const skew = options.skewMs ?? DEFAULT_SKEW_MS;
  const now = options.now ?? Date.now;
  return async (ticket) => {
    if (ticket.expiresAtMs + skew < now()) {
      throw new AppError("ticket_expired", "the call ticket expired before it could be sent");
    }
    if (!(await options.replayStore.spend(ticket.id, ticket.expiresAtMs + skew))) {
      throw new AppError("ticket_replayed", "the call ticket was already used");
    }
    if (ticket.expiresAtMs + skew < now()) {
      // The spend waited (a stalled shared store) until the control plane stopped waiting: the id
      // stays spent (the table keeps every spend five minutes past expiry), and nothing is sent.
      throw new AppError("ticket_expired", "the call ticket expired before it could be sent");
    }
  };
}

/** Check, then spend: the order the Resolve call uses (Execute runs the two as its first steps). */
export function createTicketVerifier(options: TicketVerifierOptions): TicketVerifier {
  const check = createTicketChecker(options);
  const spend = createTicketSpender(options);
  return async (signed) => {
    const ticket = await check(signed);
    // Spent last: only a ticket that passed every other check can consume its id.
    await spend(ticket);
    return ticket;
  };
}
