// The calls in flight of one organisation (Ticket.organisation_id; "" is a bucket of its own) in
// this proxy replica, for every kind of ticket that dials an origin (Execute, FetchDocument,
// SendPush). Each call holds a connection for up to its 30 s deadline, and a busy pool is never
// closed (upstream/pool.ts): without a cap, one organisation's agents calling a host whose DNS
// answers a new, tarpitting address each time could hold a socket per call until the process runs
// out of file descriptors and every other organisation's dials fail (EMFILE).
import { AppError } from "@latch/shared/errors";

/**
 * Calls of one organisation in flight in one replica. Never bites normal use: an organisation's
 * calls to one origin already queue past its pool's 16 connections (upstream/pool.ts), so 64 is
 * four origins' pools full at once; the gRPC server sets no stream limit of its own (every control
 * plane replica's calls share one HTTP/2 connection), so this is what bounds one tenant's sockets.
 */
export const MAX_CALLS_PER_ORGANISATION = 64;

/** Gives the call's place back; calling it again does nothing. */
export type ReleaseCall = () => void;

export interface OrganisationCalls {
  /**
   * Takes a place for one call of `organisationId`, before its ticket is spent; past the cap,
   * throws `egress_unavailable` marked `callNotStarted` (grpc/server.ts answers it as a call this
   * replica did not start: nothing spent, nothing sent, so the control plane may try another
   * replica once and then gives a one-call approval back).
   */
  admit(organisationId: string): ReleaseCall;
  /** Calls in flight of the organisation (tests). */
  inFlight(organisationId: string): number;
}

export function createOrganisationCalls(
  options: {
    /** MAX_CALLS_PER_ORGANISATION unless a test sets it small. */
    maxCalls?: number;
    /** Told of each refusal (the metric and the log line). */
    onRefused?: (organisationId: string) => void;
  } = {},
): OrganisationCalls {
  const maxCalls = options.maxCalls ?? MAX_CALLS_PER_ORGANISATION;
  const inFlight = new Map<string, number>();
  return {
    admit(organisationId) {
      const count = inFlight.get(organisationId) ?? 0;
      if (count >= maxCalls) {
        options.onRefused?.(organisationId);
        throw new AppError(
          "egress_unavailable",
          `this organisation has ${maxCalls} calls in flight on this egress proxy replica; try again when one ends`,
          { extra: { callNotStarted: true } },
        );
      }
      inFlight.set(organisationId, count + 1);
      let isReleased = false;
      return () => {
        if (isReleased) return;
        isReleased = true;
        const left = (inFlight.get(organisationId) ?? 1) - 1;
        if (left > 0) inFlight.set(organisationId, left);
        else inFlight.delete(organisationId);
      };
    },
    inFlight: (organisationId) => inFlight.get(organisationId) ?? 0,
  };
}

/**
 * Runs `call` holding a place of its organisation's (refused past the cap, before `call` starts)
 * and gives the place back however it ends.
 */
export async function inOrganisationPlace<T>(
  calls: OrganisationCalls,
  organisationId: string,
  call: () => Promise<T>,
): Promise<T> {
  const release = calls.admit(organisationId);
  try {
    return await call();
  } finally {
    release();
  }
}
