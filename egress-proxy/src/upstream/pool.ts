// Connection pools to origins: one keep-alive HTTP/1.1 undici Pool per organisation and pinned
// (host, address, port), dialling only the checked address, bounded in number and closed when idle.
import type { LookupFunction, Socket } from "node:net";
import { createSecureContext, getCACertificates, type SecureContext } from "node:tls";
import { buildConnector, type Dispatcher, Pool } from "undici";
import type { Destination } from "../destination/resolve.ts";
import { telemetry } from "../telemetry.ts";

export interface PoolSetOptions {
  /** PEM of extra CAs trusted for origins (development/test), added to Node's defaults. */
  extraCa?: string;
  /**
   * Most pools kept at once; beyond it the least recently used pool with nothing in flight is
   * closed. A pool with a call in it is never closed for the bound. Default 256.
   */
  maxPools?: number;
  /** A pool unused this long, with nothing in flight, is closed. Default 60 s. */
  idleMs?: number;
}

export interface PoolSet {
  /**
   * The pool of this organisation (Ticket.organisation_id; "" for none) for this destination.
   * Dispatch on it in the same tick: eviction closes pools.
   */
  poolFor(organisationId: string, destination: Destination): Pool;
  /**
   * Dispatches one request on the organisation's pool for the destination. A connection this
   * request opens must be up (TCP and TLS) within `dialBudgetMs`, what is left of the call's own
   * deadline.
   */
  dispatch(
    organisationId: string,
    destination: Destination,
    dialBudgetMs: number,
    options: Dispatcher.DispatchOptions,
    handler: Dispatcher.DispatchHandler,
  ): void;
  /** How many pools are open (tests and metrics). */
  size(): number;
  close(): Promise<void>;
}

/** The phase a dial failed in: TCP (nothing listening, unreachable) or TLS (handshake, certificate). */
export type DialPhase = "tcp" | "tls";

/** The code of the error a dial is destroyed with when its budget runs out. */
const DIAL_DEADLINE_CODE = "ELATCH_DIAL_DEADLINE";

/**
 * A connection failure, tagged with its phase so the caller can say `connect_failed` or
 * `tls_failure`. `code` is deliberately not the original code: undici special-cases some codes.
 */
export class DialError extends Error {
  readonly phase: DialPhase;
  readonly code = "ELATCH_DIAL";
  readonly originalCode: string | undefined;
  /** The dial outlasted the budget of the call that opened it: the call's deadline, not a fault. */
  readonly isDeadline: boolean;

  constructor(phase: DialPhase, cause: Error) {
    super(`${phase} connection failed: ${cause.message}`, { cause });
    this.name = "DialError";
    this.phase = phase;
    const code = (cause as { code?: unknown }).code;
    this.originalCode = typeof code === "string" ? code : undefined;
    this.isDeadline = code === DIAL_DEADLINE_CODE;
  }
}

const DEFAULT_MAX_POOLS = 256;
const DEFAULT_IDLE_MS = 60_000;
/**
 * Pools one new pool's bound check looks at, at most. Pools with calls in flight are passed over
 * and moved to the recent end (they are in use), so the next check starts past them; the sweep
 * restores the bound in full. Without this, one organisation holding many busy pools (a host whose
 * DNS answers a new address each time) made every new pool read the whole map.
 */
const BOUND_SCAN_STEPS = 32;
/** Concurrent connections of one organisation to one pinned origin; more of its calls queue. */
const CONNECTIONS_PER_POOL = 16;
/** Origin response header block limit; undici fails a larger one before we see it. */
export const MAX_HEADER_BLOCK_BYTES = 32 * 1024;
/**
 * Backstops only: every call has its own total deadline (spec: at most 30 s) that ends it first,
 * whatever undici is doing. These only bound what undici still holds after that.
 */
const BACKSTOP_MS = 60_000;
/**
 * A dial that no call's dispatch opened (undici reconnecting for a request already queued) is
 * bounded by the longest call budget (spec 8: timeout_ms at most 30 s).
 */
const UNBUDGETED_DIAL_MS = 30_000;
/** How long an idle keep-alive socket is kept when the origin gives no `Keep-Alive` hint. */
const KEEP_ALIVE_MS = 30_000;

// A TCP-phase error carries syscall "connect" (ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, ETIMEDOUT);
// anything else from the connector happened on an open socket, i.e. during the TLS handshake.
function phaseOf(error: Error): DialPhase {
  const { syscall, code } = error as { syscall?: unknown; code?: unknown };
  if (syscall === "connect" || code === "UND_ERR_CONNECT_TIMEOUT") return "tcp";
  return "tls";
}

/**
 * The socket layer must never resolve a name: the address was resolved and checked once. An IP
 * literal skips lookup in net.connect; this makes any path that would look up fail loudly.
 */
const refuseLookup: LookupFunction = (hostname, _options, callback) => {
  callback(
    Object.assign(new Error(`DNS lookup refused for ${hostname.slice(0, 253)}`), { code: "ELATCH_LOOKUP" }),
    "",
    0,
  );
};

/**
 * The trust store for origins: Node's bundled roots (plus EGRESS_EXTRA_CA where development allows
 * it), never Node's "default" store, which NODE_EXTRA_CA_CERTS, NODE_USE_SYSTEM_CA, SSL_CERT_FILE
 * or --use-openssl-ca change from outside: no setting of the environment decides which origin
 * receives an injected credential. Built once, when the first pool is created, and shared by every
 * connection (tls.connect would otherwise parse the whole CA list again for each).
 */
type TrustContext = () => SecureContext;

function createTrustContext(ca: string[]): TrustContext {
  let context: SecureContext | undefined;
  return () => {
    context ??= createSecureContext({ ca });
    return context;
  };
}

/**
 * The budget of the dial a dispatch is about to open. undici's client calls its connector
 * synchronously inside `dispatch` when the request needs a new connection, so the pool set sets
 * this around that one call; any other dial (a reconnect undici starts on its own) finds it unset.
 */
interface DialBudget {
  ms: number | undefined;
}

/** undici's connector returns the socket it is dialling, though its type says void. */
type SocketReturningConnector = (
  options: buildConnector.Options,
  callback: buildConnector.Callback,
) => Socket | undefined;

function createDialer(
  destination: Destination,
  trust: TrustContext,
  budget: DialBudget,
): buildConnector.connector {
  // undici passes its own options to tls.connect, not the per-dial ones below.
  const secureContext = trust();
  const connect = buildConnector({
    secureContext,
    // Said outright: tls.connect's default follows NODE_TLS_REJECT_UNAUTHORIZED, and "0" there
    // would hand an injected credential to any certificate. No setting turns this check off.
    rejectUnauthorized: true,
    allowH2: false,
    timeout: UNBUDGETED_DIAL_MS,
    lookup: refuseLookup,
  }) as unknown as SocketReturningConnector;
  return (options, callback) => {
    const budgetMs = Math.min(budget.ms ?? UNBUDGETED_DIAL_MS, UNBUDGETED_DIAL_MS);
    // A span of the agent call's trace when telemetry is on (a reused connection has none).
    const span = telemetry().startSpan("connect", {
      "server.address": destination.host,
      "network.peer.address": destination.address,
      "network.peer.port": destination.port,
    });
    // undici would dial the URL's hostname; the pinned address is dialled instead, while SNI and
    // the certificate check stay on the host name (tls checks the identity against `servername`).
    let budgetTimer: NodeJS.Timeout | undefined;
    const socket = connect(
      {
        ...options,
        protocol: "https:",
        hostname: destination.address,
        host: destination.host,
        port: String(destination.port),
        servername: destination.host,
      },
      (error, socket) => {
        clearTimeout(budgetTimer);
        if (error) {
          const failure = new DialError(phaseOf(error), error);
          span.end(failure.phase === "tcp" ? "connect_failed" : "tls_failure");
          callback(failure, null);
        } else {
          span.end();
          callback(null, socket);
        }
      },
    );
    // A listener that accepts and never finishes TLS must not hold the dial for undici's own
    // timeout: at the call's deadline the half-open socket is destroyed, and the dial fails.
    budgetTimer = setTimeout(() => {
      socket?.destroy(
        Object.assign(new Error(`the dial did not finish within ${Math.round(budgetMs)} ms`), {
          code: DIAL_DEADLINE_CODE,
        }),
      );
    }, budgetMs);
    budgetTimer.unref();
  };
}

function createPool(destination: Destination, trust: TrustContext, budget: DialBudget): Pool {
  // The origin URL sets the Host header: `https://host` with no port, whatever port is dialled.
  return new Pool(`https://${destination.host}`, {
    connect: createDialer(destination, trust, budget),
    connections: CONNECTIONS_PER_POOL,
    pipelining: 1,
    allowH2: false,
    keepAliveTimeout: KEEP_ALIVE_MS,
    keepAliveMaxTimeout: KEEP_ALIVE_MS,
    maxHeaderSize: MAX_HEADER_BLOCK_BYTES,
    headersTimeout: BACKSTOP_MS,
    bodyTimeout: BACKSTOP_MS,
    strictContentLength: true,
  });
}

/** One kept pool; the entry is reused on every call, so choosing a pool allocates only its key. */
interface PoolEntry {
  readonly pool: Pool;
  lastUsed: number;
}

/**
 * Only the organisation may hold a `|`: a checked host name (LDH labels), an address and a port
 * never do, so a key reads one way from the right and no two (organisation, origin) share one.
 */
function keyOf(organisationId: string, destination: Destination): string {
  return `${organisationId}|${destination.host}|${destination.address}|${destination.port}`;
}

/**
 * Pools keyed by (organisation, host, address, port). The host, address and port, so a socket
 * only ever carries requests for the host and address it was opened and verified for. The
 * organisation, so that tenants never share connections: each has at most CONNECTIONS_PER_POOL to
 * an origin, and one organisation's slow calls (an agent with a standing approval calling an
 * origin that answers late) fill only its own, never making another organisation's calls queue
 * until their deadline. Memory stays bounded: at most `maxPools` pools with nothing in flight are
 * kept (the least recently used closed first: a new pool looks at BOUND_SCAN_STEPS of them, the
 * sweep at all) and each is closed once idle for `idleMs`; past the bound, only pools with a call
 * in them, so their number is bounded by the calls in flight (and those of one organisation by
 * calls/organisation-calls.ts). Never the global dispatcher and never a proxy agent: HTTPS_PROXY
 * and friends must not move a credential-bearing request elsewhere.
 */
export function createPoolSet(opts: PoolSetOptions = {}): PoolSet {
  const maxPools = opts.maxPools ?? DEFAULT_MAX_POOLS;
  const idleMs = opts.idleMs ?? DEFAULT_IDLE_MS;
  // `ca` replaces Node's trust store: the bundled roots go in first; extraCa adds, never replaces.
  const ca = [...getCACertificates("bundled"), ...(opts.extraCa === undefined ? [] : [opts.extraCa])];
  const trust = createTrustContext(ca);
  // Insertion order is recency order: a used entry is moved to the end.
  const pools = new Map<string, PoolEntry>();
  const dialBudget: DialBudget = { ms: undefined };

  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [key, entry] of pools) {
        if (now - entry.lastUsed >= idleMs && entry.pool.stats.size === 0) {
          pools.delete(key);
          void entry.pool.close().catch(() => {});
        }
      }
      // The bound in full, where new pools' short looks (BOUND_SCAN_STEPS) left it over.
      closeIdleBeyondBound(undefined, pools.size);
    },
    Math.max(1_000, Math.floor(idleMs / 2)),
  );
  sweep.unref();

  /**
   * Closes the least recently used pools with nothing in flight until the bound holds again, never
   * `kept` (the pool about to be dispatched on), looking at no more than `steps` pools. A busy pool
   * is passed over, and moved to the recent end: closing it would let its organisation open a
   * second set of connections to the same origin beside the one draining, and looking at it again
   * on every new pool would make each new pool cost as much as the pools in flight.
   */
  function closeIdleBeyondBound(kept: PoolEntry | undefined, steps: number): void {
    // Each pool looked at once at most: one moved to the end would otherwise come round again.
    const most = Math.min(steps, pools.size);
    let looked = 0;
    for (const [key, entry] of pools) {
      if (pools.size <= maxPools || looked++ >= most) return;
      if (entry === kept) continue;
      pools.delete(key);
      if (entry.pool.stats.size === 0) {
        void entry.pool.close().catch(() => {});
      } else {
        pools.set(key, entry);
      }
    }
  }

  function poolFor(organisationId: string, destination: Destination): Pool {
    const key = keyOf(organisationId, destination);
    let entry = pools.get(key);
    if (entry === undefined) {
      entry = { pool: createPool(destination, trust, dialBudget), lastUsed: 0 };
      pools.set(key, entry);
      if (pools.size > maxPools) closeIdleBeyondBound(entry, BOUND_SCAN_STEPS);
    } else {
      pools.delete(key);
      pools.set(key, entry);
    }
    entry.lastUsed = Date.now();
    return entry.pool;
  }

  return {
    poolFor,
    dispatch(organisationId, destination, dialBudgetMs, options, handler) {
      const pool = poolFor(organisationId, destination);
      dialBudget.ms = dialBudgetMs;
      try {
        pool.dispatch(options, handler);
      } finally {
        dialBudget.ms = undefined;
      }
    },
    size: () => pools.size,
    async close() {
      clearInterval(sweep);
      const closing = [...pools.values()].map((entry) => entry.pool.close().catch(() => {}));
      pools.clear();
      await Promise.all(closing);
    },
  };
}
