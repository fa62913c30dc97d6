// Fencing a ticket whose Execute ended without the proxy's answer (DECISIONS "Faults and isolation
// in deployments"). The control plane spends the ticket's id itself, in the store the proxies
// spend ids in before they dial; whichever insert came first wins. Fence won: no proxy ran the
// ticket and none ever will, so a one-call approval can be given back. Fence lost: a proxy took it
// and may have reached the origin. Where it cannot ask yet (the database or the only proxy does not
// answer) it keeps asking every second until the proxies would have forgotten the ticket. The
// table (or a proxy's Fence) speaks for the fleet only when every replica said it spends ids there.
import { FenceOutcome, type SignedTicket, Ticket } from "@latch/proto/egress";
import { TICKET_CLOCK_SKEW_MS } from "@latch/shared/tickets/ticket-signature";
import type { Logger } from "pino";
import type { EgressClient } from "./egress-client.ts";
import type { SpentTicketsRepo } from "./spent-tickets.repo.ts";

/** What a fence ends as: `unknown` when no store could tell in time (the approval stays spent). */
export type LateFence = "fenced" | "taken" | "unknown";
/**
 * `fenced`: never ran, never will. `taken`: a proxy spent it. `unknown`: no store can tell.
 * `pending`: nobody answered now; asked again every second, and `later` hears the end.
 */
export type FenceResult = LateFence | "pending";

export interface TicketFence {
  fence(ticket: SignedTicket, later: (outcome: LateFence) => void): Promise<FenceResult>;
  /**
   * Whether the proxies spend ids in this control plane's own table (so a fence can be written
   * there with no proxy answering); undefined while no proxy has said which store it uses.
   */
  isStoreShared(): Promise<boolean | undefined>;
  /** Tickets still waiting for an answer. */
  readonly pending: number;
}

export interface TicketFenceDeps {
  egress: Pick<EgressClient, "fence" | "replicaStates" | "replicas" | "getInfoOf">;
  /**
   * The control plane's own spent-ticket table, used when the proxies report the same store (the
   * `store:` row of its migration): the one fence that needs no proxy to answer.
   */
  spentTickets?: SpentTicketsRepo | undefined;
  logger?: Pick<Logger, "info" | "warn"> | undefined;
  now?: () => number;
}

const RETRY_MS = 1_000;
/**
 * How long past a ticket's expiry (plus skew) a fence in the shared table still concludes: the
 * proxies keep each spent id a minute past that (replay-store.ts sweeps with a minute of grace), and
 * no proxy spends a ticket after it. Under the minute, for clocks that differ between hosts.
 */
const SHARED_STORE_GRACE_MS = 45_000;
/** When a live control plane has given up on its own fence: abandoned-calls.ts may look after this. */
export const LIVE_FENCE_HORIZON_MS = TICKET_CLOCK_SKEW_MS + SHARED_STORE_GRACE_MS;
/** How long the replicas' store ids are trusted before each is asked again (sooner if the set changes). */
const STORE_INFO_TTL_MS = 60_000;
/**
 * How often the rotation's addresses are read between fences. A replica is listed from the moment
 * it connects (before it can take a call) until a second after the service name stopped naming
 * it (egress-balancer.ts), so a look every half second sees every replica that ever took a ticket.
 */
const ADDRESS_WATCH_MS = 500;

/** What the replicas of the rotation said of their stores, asked each by address. */
interface FleetView {
  /** The replicas' addresses, sorted: the fleet this view is of. */
  key: string;
  at: number;
  size: number;
  /** The one shared store every replica reported; undefined when any reported another or none. */
  sharedStoreId: string | undefined;
  /** Some replica did not answer (so the view may change once it does). */
  hasSilent: boolean;
}

export function createTicketFence(deps: TicketFenceDeps): TicketFence {
  const now = deps.now ?? Date.now;
  const waiting = new Map<
    string,
    {
      ticket: SignedTicket;
      issuedAtMs: number;
      expiresAtMs: number;
      horizonMs: number;
      later: (outcome: LateFence) => void;
    }
  >();
  let timer: NodeJS.Timeout | undefined;
  let ownStoreId: string | undefined;
  let view: FleetView | undefined;
  /**
   * Since when the replicas have, at each look, all spent ids in one shared store; undefined while
   * the last look found otherwise. A ticket issued before it may have gone to a replica of its own
   * memory that has left the rotation since (a rolling switch to the shared table), whose spend
   * neither the table nor any replica knows: such a ticket is never fenced as won.
   */
  let sharedSinceMs: number | undefined;
  const startedAtMs = now();
  /**
   * The rotation's addresses as last read (sorted), and since when they have been that set: reset
   * whenever an address joins or leaves. A replica on its own memory answers a fence for its own
   * store alone, so its FENCED speaks for the fleet only of a ticket issued since it has been the
   * only address: one issued before may have gone to a replica that ran it and has left since.
   */
  let addressKey: string | undefined;
  let addressCount = 0;
  let addressesSinceMs = startedAtMs;
  /** Some replica has been listed: until then none can have taken a ticket of this control plane. */
  let hasListed = false;
  /** The rotation's addresses now, noting a change of the set; undefined where it has none to list. */
  function readAddresses(): string[] | undefined {
    if (!deps.egress.replicas) return undefined;
    const addresses = deps.egress
      .replicas()
      .map((r) => r.address)
      .sort();
    const key = addresses.join(" ");
    if (key !== addressKey) {
      addressKey = key;
      addressCount = addresses.length;
      // The first replicas listed took every ticket this control plane sent so far.
      addressesSinceMs = hasListed ? now() : startedAtMs;
      hasListed ||= addresses.length > 0;
    }
    return addresses;
  }
  readAddresses();
  if (deps.egress.replicas) setInterval(readAddresses, ADDRESS_WATCH_MS).unref();

  /**
   * Asks every replica of the rotation which store it spends ids in, each by its address (not
   * whichever one round robin picks: during a rolling switch, some spend in memory and some in the
   * table). Cached per fleet: asked again when the set of replicas changes, or after a minute. Past
   * half the minute the next look starts in the background, so a one-call approval's call does not
   * wait on it (a silent replica holds a look up to its deadline); one look runs at a time.
   */
  async function viewFleet(): Promise<FleetView | undefined> {
    const addresses = readAddresses() ?? [];
    if (!deps.egress.getInfoOf || addresses.length === 0) return undefined;
    const key = addresses.join(" ");
    if (view && view.key === key && now() - view.at <= STORE_INFO_TTL_MS) {
      if (now() - view.at > STORE_INFO_TTL_MS / 2) lookAt(key, addresses).catch(() => {});
      return view;
    }
    return lookAt(key, addresses);
  }

  let look: { key: string; done: Promise<FleetView> } | undefined;
  /** One look at the fleet `key` names, shared by whoever asks while it runs. */
  function lookAt(key: string, addresses: string[]): Promise<FleetView> {
    if (look?.key === key) return look.done;
    const done = askFleet(key, addresses).finally(() => {
      if (look?.done === done) look = undefined;
    });
    look = { key, done };
    return done;
  }

  /** Looks are numbered as they start; the view is only ever moved forward by a later one. */
  let looksStarted = 0;
  let lookApplied = 0;

  async function askFleet(key: string, addresses: string[]): Promise<FleetView> {
    const getInfoOf = deps.egress.getInfoOf!;
    const number = ++looksStarted;
    const ids = await Promise.all(
      addresses.map((address) =>
        getInfoOf(address).then(
          (info) => info.replayStoreId,
          () => undefined,
        ),
      ),
    );
    const first = ids[0];
    const sharedStoreId = first && ids.every((id) => id === first) ? first : undefined;
    const seen = {
      key,
      at: now(),
      size: addresses.length,
      sharedStoreId,
      hasSilent: ids.includes(undefined),
    };
    // A look that started before the one last applied (a slow replica held it) speaks of an older
    // fleet: applied, it could make the fleet look shared again since now, after a newer look found
    // a replica of its own memory in it.
    if (number < lookApplied) return seen;
    lookApplied = number;
    if (sharedStoreId === undefined) sharedSinceMs = undefined;
    // The first look speaks for the time since this control plane started (no look said otherwise);
    // a later change to one shared store only from now.
    else if (!view) sharedSinceMs = startedAtMs;
    else if (sharedStoreId !== view.sharedStoreId || sharedSinceMs === undefined) sharedSinceMs = now();
    view = seen;
    return view;
  }

  /** This control plane's own store id (its table's `store:` row), read once. */
  async function findOwnStoreId(): Promise<string> {
    if (!deps.spentTickets) return "";
    if (ownStoreId === undefined) ownStoreId = (await deps.spentTickets.findStoreId()) ?? "";
    return ownStoreId;
  }

  /** How many replicas the rotation holds (the view's, else the states'). */
  const fleetSize = (fleet: FleetView | undefined) => fleet?.size ?? deps.egress.replicaStates().length;

  let hasWarnedUnshared = false;
  const warnUnshared = () => {
    if (hasWarnedUnshared) return;
    hasWarnedUnshared = true;
    deps.logger?.warn(
      "several egress proxies keep spent tickets in their own memory: an unanswered call's approval stays spent; give them the shared table (EGRESS_REPLAY_DATABASE_URL)",
    );
  };

  /** Until when a fence of a ticket expiring at `expiresAtMs` may still conclude anything. */
  const horizonOf = (expiresAtMs: number) =>
    expiresAtMs + TICKET_CLOCK_SKEW_MS + (deps.spentTickets ? SHARED_STORE_GRACE_MS : 0);

  /**
   * Whether the rotation has been one address since `issuedAtMs`; true where the client lists no
   * addresses (the local vault's one spawned proxy, whose own Fence knows when it started).
   */
  function isLoneSince(issuedAtMs: number): boolean {
    if (readAddresses() === undefined) return true;
    return addressCount === 1 && issuedAtMs >= addressesSinceMs;
  }

  /** One attempt: an answer, or undefined when nobody could be asked now. */
  async function attempt(
    ticket: SignedTicket,
    id: string,
    issuedAtMs: number,
    expiresAtMs: number,
  ): Promise<LateFence | undefined> {
    // Past this, a proxy's store may have swept the id of a ticket it ran: a fence that "won" then
    // could send a request twice, so the approval stays spent.
    if (now() > horizonOf(expiresAtMs)) return "unknown";
    const fleet = await viewFleet();
    // Every replica spends ids in one shared store, and did since before this ticket was issued:
    // that store knows every spend of it. Otherwise a replica of its own memory (or one that did
    // not answer) may have run the ticket, and only a lone replica can still be asked (its Fence
    // knows whether its store saw the whole ticket).
    const isOneStore =
      fleet?.sharedStoreId !== undefined && sharedSinceMs !== undefined && issuedAtMs >= sharedSinceMs;
    let isShared: boolean | undefined = false;
    if (isOneStore) {
      try {
        isShared = fleet.sharedStoreId === (await findOwnStoreId());
        if (isShared) {
          const isWon = await deps.spentTickets!.insertFence(
            id,
            new Date(expiresAtMs + TICKET_CLOCK_SKEW_MS),
          );
          return isWon ? "fenced" : "taken";
        }
      } catch {
        // The database did not answer: ask a proxy below (its Fence spends in the same store), or later.
        isShared = undefined;
      }
    }
    // Past the ticket's expiry (plus skew) a proxy answers UNKNOWN to a fence: its memory may have
    // forgotten the spend. Only the shared table can still tell, so wait for the database to answer
    // (until the horizon) when it is, or may be, the proxies' store.
    if (now() > expiresAtMs + TICKET_CLOCK_SKEW_MS) return isShared === false ? "unknown" : undefined;
    // Several proxies not all on one shared store (each on its own memory, or a rolling switch to
    // the table): the one a fence reaches may never have seen the ticket another ran, and would say
    // FENCED. Only a store every replica spends in can tell.
    if (!isOneStore && fleetSize(fleet) > 1) {
      if (fleet?.sharedStoreId === undefined) warnUnshared();
      return "unknown";
    }
    // One replica, whose store only held part of this ticket's life (it replaced a replica of its
    // own memory since the ticket was issued): it would say FENCED of a ticket it never saw.
    if (!isOneStore && fleet?.sharedStoreId !== undefined) return "unknown";
    // One replica on its memory, but not since this ticket was issued (another one left the
    // rotation since, after it may have run the ticket; or none is listed now): the same.
    if (!isOneStore && !isLoneSince(issuedAtMs)) return "unknown";
    try {
      const outcome = await deps.egress.fence(ticket);
      if (outcome === FenceOutcome.FENCE_OUTCOME_FENCED) return "fenced";
      if (outcome === FenceOutcome.FENCE_OUTCOME_TAKEN) return "taken";
      return "unknown";
    } catch {
      return undefined;
    }
  }

  function schedule(): void {
    if (timer || waiting.size === 0) return;
    timer = setTimeout(async () => {
      timer = undefined;
      for (const [id, entry] of [...waiting]) {
        const outcome = await attempt(entry.ticket, id, entry.issuedAtMs, entry.expiresAtMs);
        if (outcome === undefined && now() <= entry.horizonMs) continue;
        waiting.delete(id);
        deps.logger?.info(
          { ticket: id.slice(0, 8), outcome: outcome ?? "unknown" },
          "late ticket fence settled",
        );
        entry.later(outcome ?? "unknown");
      }
      schedule();
    }, RETRY_MS);
    timer.unref();
  }

  return {
    get pending() {
      return waiting.size;
    },
    async isStoreShared() {
      if (!deps.spentTickets) return false;
      const fleet = await viewFleet();
      // Nobody to ask yet, or a replica that did not answer: not known (asked again later).
      if (!fleet || (fleet.sharedStoreId === undefined && fleet.hasSilent)) return undefined;
      const ownId = await findOwnStoreId();
      return ownId !== "" && fleet.sharedStoreId === ownId;
    },
    async fence(signed, later) {
      const ticket = Ticket.decode(signed.payload);
      const outcome = await attempt(signed, ticket.id, ticket.issuedAtMs, ticket.expiresAtMs);
      if (outcome !== undefined) return outcome;
      deps.logger?.warn(
        { ticket: ticket.id.slice(0, 8) },
        "no proxy or database answers: the ticket fence is asked again every second",
      );
      waiting.set(ticket.id, {
        ticket: signed,
        issuedAtMs: ticket.issuedAtMs,
        expiresAtMs: ticket.expiresAtMs,
        horizonMs: horizonOf(ticket.expiresAtMs),
        later,
      });
      schedule();
      return "pending";
    },
  };
}
