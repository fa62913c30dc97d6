// Minting call tickets: what the operator approved, signed, for one use within seconds.
import { sign } from "node:crypto";
import {
  type CallSpec,
  type DocumentSpec,
  type PushSpec,
  type ResolveSpec,
  type RewrapSpec,
  type SignedTicket,
  Ticket,
} from "@latch/proto/egress";
import { pooledRandomBytes } from "@latch/shared/crypto/random-pool";
import { ticketSigningInput } from "@latch/shared/tickets/ticket-signature";
import type { TicketSigningKey } from "./ticket-key.ts";

export interface TicketMinterOptions {
  key: TicketSigningKey;
  issuer: string;
  audience: string;
  /** How long a ticket lives. Seconds: it only has to survive one hop to the proxy. */
  ttlMs?: number;
  now?: () => number;
}

/**
 * The organisation a ticket acts for (Ticket.organisation_id): the proxy keeps each organisation's
 * upstream connections apart by it, so one organisation's slow calls never queue another's. Left
 * out only for a ticket of no organisation (a client metadata document), which share one pool.
 */
export interface TicketOwner {
  organisationId?: string;
}

export interface TicketMinter {
  /** `id`: one drawn by newTicketId beforehand (a one-call approval names it on its grant first). */
  mintCallTicket(call: CallSpec, options?: TicketOwner & { ttlMs?: number; id?: string }): SignedTicket;
  mintResolveTicket(resolve: ResolveSpec, owner?: TicketOwner): SignedTicket;
  mintDocumentTicket(document: DocumentSpec, owner?: TicketOwner): SignedTicket;
  /** One Web Push message (SendPush): no credential, only where it goes and the sealed message. */
  mintPushTicket(push: PushSpec, owner?: TicketOwner): SignedTicket;
  /** For Rewrap: stored values to seal again under the proxy's current key (vault seal-rewrap). */
  mintRewrapTicket(rewrap: RewrapSpec, owner?: TicketOwner): SignedTicket;
}

const DEFAULT_TTL_MS = 30_000;

/** A ticket's id: 16 random bytes, base64url (the proxies spend it once). */
export function newTicketId(): string {
  return pooledRandomBytes(16).toString("base64url");
}

export function createTicketMinter(options: TicketMinterOptions): TicketMinter {
  const now = options.now ?? Date.now;
  const defaultTtl = options.ttlMs ?? DEFAULT_TTL_MS;

  function mint(
    body: Partial<Pick<Ticket, "call" | "resolve" | "document" | "push" | "rewrap">>,
    ttlMs: number,
    owner: TicketOwner | undefined,
    id = newTicketId(),
  ): SignedTicket {
    const issuedAtMs = now();
    const payload = Ticket.encode({
      id,
      issuer: options.issuer,
      audience: options.audience,
      issuedAtMs,
      expiresAtMs: issuedAtMs + ttlMs,
      call: body.call,
      resolve: body.resolve,
      document: body.document,
      push: body.push,
      rewrap: body.rewrap,
      organisationId: owner?.organisationId ?? "",
    }).finish();
    const signature = sign(null, ticketSigningInput(payload), options.key.privateKey);
    return { payload: Buffer.from(payload), signature, keyId: options.key.keyId };
  }

  return {
    mintCallTicket: (call, opts) =>
      mint({ call, resolve: undefined }, opts?.ttlMs ?? defaultTtl, opts, opts?.id),
    mintResolveTicket: (resolve, owner) => mint({ call: undefined, resolve }, defaultTtl, owner),
    mintDocumentTicket: (document, owner) => mint({ document }, defaultTtl, owner),
    mintPushTicket: (push, owner) => mint({ push }, defaultTtl, owner),
    mintRewrapTicket: (rewrap, owner) => mint({ rewrap }, defaultTtl, owner),
  };
}
