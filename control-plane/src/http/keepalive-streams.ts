// The keep-alive streams open on this process, and whether one more may open: GET /mcp's (the
// holder is the bearer) and the live inbox's GET /api/inbox/stream (the holder is the session),
// each route with its own registry and caps.
//
// Each stream holds a socket and timers, so they are capped: per holder, per organisation and per
// process. A fixed process cap alone can be filled by enough organisations (sign-up is free and one
// account owns several), which would leave every other organisation's agents or consoles with a 429.
// So, as the local session store does (local/local-mcp-sessions.ts), a full process makes room at
// the expense of whoever holds the most: a stream from an organisation holding at least two fewer
// than the largest holder ends that holder's oldest stream (its client reconnects) and takes its
// place. Any other organisation is refused, as before: one a single stream below would only trade
// places with the largest, and their clients would end each other's streams for ever.

/** The caps on open keep-alive streams; more is 429. */
export interface StreamLimits {
  /**
   * Streams one holder (a bearer; a session for the live inbox) may hold, so one token or one
   * browser cannot hold the process open.
   */
  perHolder: number;
  /** Streams one organisation (its members, its agents) may hold on this process. */
  perOrganisation: number;
  /** Streams this process holds at most. */
  total: number;
}

/** The caps both routes use: 8 per holder, 200 per organisation, 2,000 per process. */
export const STREAM_LIMITS: StreamLimits = { perHolder: 8, perOrganisation: 200, total: 2_000 };

/** One admitted stream; `end` ends it cleanly (its client sees the stream end). */
export interface OpenStream {
  readonly holder: string;
  readonly organisationId: string;
  end(): void;
}

export interface KeepaliveStreams {
  /**
   * Admits a stream of `holder` in `organisationId`, or undefined when a cap refuses it (429). At
   * the process cap, an organisation holding at least two fewer streams than the largest holder is admitted and
   * that holder's oldest stream is forgotten and ended.
   */
  admit(holder: string, organisationId: string, end: () => void): OpenStream | undefined;
  /** Forgets a stream that ended, however it ended; forgetting it again does nothing. */
  forget(stream: OpenStream): void;
  /** Ends every open stream (the server closes); each is forgotten when its socket closes. */
  endAll(): void;
  /** Streams open on this process. */
  readonly size: number;
  /** Streams `organisationId` holds on this process. */
  countOf(organisationId: string): number;
}

export function createKeepaliveStreams(limits: StreamLimits = STREAM_LIMITS): KeepaliveStreams {
  // Each organisation's streams in the order they opened (a Set iterates in insertion order), so
  // its oldest is the first; the organisation is forgotten with its last stream. Finding the
  // largest holder walks the organisations, never the streams.
  const byOrganisation = new Map<string, Set<OpenStream>>();
  const heldByHolder = new Map<string, number>();
  let size = 0;

  function forget(stream: OpenStream): void {
    const own = byOrganisation.get(stream.organisationId);
    // Already forgotten (ended to make room, then its socket closed): counted down once only.
    if (!own?.delete(stream)) return;
    if (own.size === 0) byOrganisation.delete(stream.organisationId);
    size -= 1;
    const left = (heldByHolder.get(stream.holder) ?? 1) - 1;
    if (left > 0) heldByHolder.set(stream.holder, left);
    else heldByHolder.delete(stream.holder);
  }

  /** The streams of the organisation holding the most: the one that makes room at a full process. */
  function largestHolder(): Set<OpenStream> | undefined {
    let largest: Set<OpenStream> | undefined;
    for (const own of byOrganisation.values()) {
      if (own.size > (largest?.size ?? 0)) largest = own;
    }
    return largest;
  }

  return {
    admit(holder, organisationId, end) {
      const held = byOrganisation.get(organisationId)?.size ?? 0;
      if ((heldByHolder.get(holder) ?? 0) >= limits.perHolder || held >= limits.perOrganisation) {
        return undefined;
      }
      if (size >= limits.total) {
        const largest = largestHolder();
        // Only a holder at least two below the largest takes a place: after the swap the largest
        // still holds as many as it, so the stream it ended cannot end one of its own on
        // reconnecting (an organisation one below would trade places with it for ever).
        if (largest === undefined || largest.size < held + 2) return undefined;
        const oldest = largest.values().next().value as OpenStream;
        forget(oldest);
        oldest.end();
      }
      const stream: OpenStream = { holder, organisationId, end };
      const own = byOrganisation.get(organisationId) ?? new Set<OpenStream>();
      own.add(stream);
      byOrganisation.set(organisationId, own);
      heldByHolder.set(holder, (heldByHolder.get(holder) ?? 0) + 1);
      size += 1;
      return stream;
    },
    forget,
    endAll() {
      for (const own of byOrganisation.values()) for (const stream of own) stream.end();
    },
    get size() {
      return size;
    },
    countOf: (organisationId) => byOrganisation.get(organisationId)?.size ?? 0,
  };
}
