// Client ID metadata documents (an https client_id, DECISIONS "OAuth authorization server"): fetched
// through the egress proxy's FetchDocument, never from the control plane itself, with spec 8's
// limits: 1 MiB and 3 s per document, 30 fetches per hour per document host, 10 per hour per
// requesting address, 4 in flight on this server. Of a host's 30, fetches that fail may use 20, and
// a URL whose host answered with no valid document is not fetched again within the hour: anyone
// can make a popular client's host (claude.ai) answer 404 for made-up paths, and would otherwise
// spend its 30 and lock the real client out for an hour. Every refusal for a limit is a 429
// rate_limited with Retry-After (spec 7: "429 Rate limit (see 8)"), the 4 in flight included.
// oidc-provider validates the document and caches it; a document that names a loopback or
// private-use redirect is registered as a native client.
import { sha256Hex } from "@latch/shared/crypto/hash";
import { AppError } from "@latch/shared/errors";
import { checkHostname } from "@latch/shared/requests/host";
import { validateRequestPath } from "@latch/shared/requests/path";
import type { EgressClient } from "../egress/egress-client.ts";
import type { TicketMinter } from "../egress/tickets.ts";
import { checkJsonBody } from "../http/json-body.ts";
import { addressKey } from "../limits/address-key.ts";
import {
  CIMD_FETCHES_PER_HOST,
  CIMD_FETCHES_PER_IP,
  type RateLimit,
  type RateLimiter,
} from "../limits/rate-limit.ts";
import { boundTokensProblem, fetchedMetadataProblem, redirectUriProblem } from "./registration-rules.ts";

export const CIMD_MAX_BYTES = 1024 * 1024;
export const CIMD_TIMEOUT_MS = 3_000;
export const CIMD_MAX_IN_FLIGHT = 4;
/** A fetch in flight ends within CIMD_TIMEOUT_MS: when a place frees up at the latest. */
const IN_FLIGHT_RETRY_S = Math.ceil(CIMD_TIMEOUT_MS / 1000);

/**
 * Spec 8's 30 per hour per host stays the ceiling; fetches that fail (no answer, or not a valid
 * document for that client_id) may use only 20 of them. Once 20 failed, a URL is fetched only if it
 * gave a valid document within the hour (CIMD_VALID_URL, on any replica): the last 10 are kept for
 * those, which a stranger cannot spend with made-up paths. Counted after the fetch, so fetches in
 * flight when the 20th fails (at most 4 per server) may still fail on top.
 */
export const CIMD_FAILED_FETCHES_PER_HOST: RateLimit = {
  name: "cimd:host_failed",
  limit: 20,
  windowMs: 3_600_000,
  what: "failed client metadata document fetches from one host",
};
/**
 * A URL whose host answered with no valid document for it, marked for the hour (keyed by its
 * hash): not fetched again, on any replica, until the mark leaves (a negative cache bounded by the
 * fetches themselves, at most 30 per host per hour, and pruned with every other counted attempt).
 * A fetch that got no answer at all (timeout, refused connection) is not marked: the real client's
 * host may be back a minute later.
 */
export const CIMD_FAILED_URL: RateLimit = {
  name: "cimd:url_failed",
  limit: 1,
  windowMs: 3_600_000,
  what: "fetches of a client metadata document URL that gave no valid document",
};
/** A URL that gave a valid document within the hour (a mark, keyed by its hash). */
export const CIMD_VALID_URL: RateLimit = {
  name: "cimd:url_valid",
  limit: 1,
  windowMs: 3_600_000,
  what: "valid client metadata documents of one URL",
};
/** The key of a document URL in the marks above: a fixed length whatever the URL. */
export const documentUrlKey = (url: string) => sha256Hex(url);

const LOOPBACK_REDIRECT = /^http:\/\/(127\.0\.0\.1|\[::1\]|localhost)(:\d+)?(\/|$)/i;

export interface DocumentFetcherDeps {
  egress: Pick<EgressClient, "fetchDocument">;
  minter: Pick<TicketMinter, "mintDocumentTicket">;
  limiter: RateLimiter;
}

/** An https URL split into what a document ticket names, or a refusal. */
function documentTarget(url: string): { host: string; path: string } {
  const parsed = URL.parse(url);
  if (parsed?.protocol !== "https:" || (parsed.port && parsed.port !== "443")) {
    throw new AppError("invalid_request", "a client_id document must be an https URL on port 443");
  }
  const host = checkHostname(parsed.hostname);
  if (!host.ok) throw new AppError(host.code, host.message);
  const path = validateRequestPath(`${parsed.pathname}${parsed.search}`);
  if (!path.ok) throw new AppError(path.code, path.message);
  return { host: host.host, path: path.path };
}

/**
 * The registration rules (spec 5 rule 2: redirect URIs; no other document to fetch; no key-bound
 * tokens) for a document: it gets no more than a dynamic registration would (oidc-provider alone
 * lets, for example, ws: or mailto: through).
 */
export function documentRedirectProblem(document: unknown): string | undefined {
  if (typeof document !== "object" || document === null || Array.isArray(document)) return undefined;
  const fetched =
    fetchedMetadataProblem(document as Record<string, unknown>) ??
    boundTokensProblem(document as Record<string, unknown>);
  if (fetched) return fetched;
  const uris = (document as Record<string, unknown>).redirect_uris;
  if (!Array.isArray(uris)) return undefined;
  for (const [index, uri] of uris.entries()) {
    if (typeof uri !== "string") continue;
    const problem = redirectUriProblem(uri);
    if (problem) return `redirect_uris[${index}] ${JSON.stringify(uri.slice(0, 80))} ${problem}`;
  }
  return undefined;
}

/** Marks a document that names loopback or private-use redirects as a native application. */
export function asNativeWhereNeeded(document: unknown): unknown {
  if (typeof document !== "object" || document === null || Array.isArray(document)) return document;
  const record = document as Record<string, unknown>;
  const uris = Array.isArray(record.redirect_uris) ? record.redirect_uris : [];
  const isNative = uris.some(
    (u) => typeof u === "string" && (LOOPBACK_REDIRECT.test(u) || !/^https:/i.test(u)),
  );
  return isNative ? { ...record, application_type: "native" } : record;
}

/**
 * A refusal in the shape oidc-provider renders (its own errors' fields): the status, the OAuth error
 * code as `message`, the sentence as `error_description`. Anything else thrown from `allowFetch`
 * would be a 500 server_error.
 */
export class DocumentRefusal extends Error {
  readonly status: number;
  readonly statusCode: number;
  readonly expose = true;
  /** Never sent back to the client's redirect: the client could not be loaded. */
  readonly allow_redirect = false;
  readonly error: string;
  readonly error_description: string;
  readonly retry_after: number | undefined;
  constructor(status: number, error: string, description: string, retryAfter?: number) {
    super(error);
    this.name = "DocumentRefusal";
    this.status = status;
    this.statusCode = status;
    this.error = error;
    this.error_description = description;
    this.retry_after = retryAfter;
  }
}

/** An AppError from the limiter or the URL rules as oidc-provider answers it (429, or 400 invalid_client). */
function asRefusal(error: unknown): unknown {
  if (!(error instanceof AppError)) return error;
  if (error.code === "rate_limited") {
    const retryAfter = typeof error.extra.retry_after === "number" ? error.extra.retry_after : undefined;
    const when = retryAfter === undefined ? "" : `; try again in ${retryAfter} seconds`;
    return new DocumentRefusal(429, "rate_limited", `${error.message}${when}`, retryAfter);
  }
  return new DocumentRefusal(
    400,
    "invalid_client",
    `client_id metadata document URL refused: ${error.message}`,
  );
}

/**
 * How long one authorization attempt's outcome is reused. oidc-provider resolves the client a
 * second time when it refuses one (to decide where the error goes), which would otherwise fetch the
 * document again and count twice against spec 8's limits.
 */
const RECENT_MS = 10_000;
const RECENT_MAX = 256;

/**
 * One fetch's outcome. `answered`: the host answered (a failure worth remembering for the URL);
 * `valid`: a 200 JSON object whose client_id is the URL and that passed our rules.
 */
type Fetched =
  | { status: number; body: Uint8Array; contentType: string; cacheControl: string; valid: boolean }
  | { error: AppError; answered: boolean };

/** The sentence refusing a parsed document by our rules, if they refuse it. */
function documentProblem(document: unknown): string | undefined {
  try {
    // The floor under every JSON body (json-body.ts): a client_name with a NUL or a lone surrogate
    // would otherwise reach the interaction's jsonb row and come back as a 500.
    checkJsonBody(document);
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    return `the client metadata document is refused: ${error.message}`;
  }
  const problem = documentRedirectProblem(document);
  return problem ? `the client metadata document's ${problem}` : undefined;
}

export function createDocumentFetcher(deps: DocumentFetcherDeps) {
  let inFlight = 0;
  /** Outcomes of the last few seconds: fetches by URL, limit refusals by address and URL. */
  const recent = new Map<string, { until: number; outcome: Fetched | DocumentRefusal }>();
  const recall = (key: string) => {
    const hit = recent.get(key);
    if (hit && hit.until > Date.now()) return hit.outcome;
    if (hit) recent.delete(key);
    return undefined;
  };
  const remember = (key: string, outcome: Fetched | DocumentRefusal, forMs = RECENT_MS) => {
    if (recent.size >= RECENT_MAX) {
      for (const [k, v] of recent) if (v.until <= Date.now() || recent.size >= RECENT_MAX) recent.delete(k);
    }
    recent.set(key, { until: Date.now() + forMs, outcome });
  };

  /**
   * Spec 8's 4 in flight is judged in `allow`, where a refusal can still be a limit answer (429
   * rate_limited with Retry-After, spec 7): an error thrown from `fetch` reaches the client wrapped
   * as oidc-provider's 400 invalid_client. `allow` reserves the place; the fetch oidc-provider makes
   * right after (in the same run of the event loop) takes it. A place nobody took (the document was
   * cached or fetched by another request in between) is given back on the next turn of the loop.
   */
  const reserved = new Map<string, number>();
  const isFull = () => inFlight + totalReserved() >= CIMD_MAX_IN_FLIGHT;
  const inFlightRefusal = () =>
    new DocumentRefusal(
      429,
      "rate_limited",
      `too many client metadata documents are being fetched: at most ${CIMD_MAX_IN_FLIGHT} at once; try again in ${IN_FLIGHT_RETRY_S} seconds`,
      IN_FLIGHT_RETRY_S,
    );
  function reservePlace(url: string): void {
    if (isFull()) throw inFlightRefusal();
    reserved.set(url, (reserved.get(url) ?? 0) + 1);
    setImmediate(() => releaseReservation(url));
  }
  function releaseReservation(url: string): boolean {
    const count = reserved.get(url) ?? 0;
    if (count === 0) return false;
    if (count === 1) reserved.delete(url);
    else reserved.set(url, count - 1);
    return true;
  }
  const totalReserved = () => [...reserved.values()].reduce((sum, n) => sum + n, 0);

  async function fetchOnce(url: string): Promise<Fetched> {
    const target = documentTarget(url);
    // The place `allow` reserved for this URL; without one (never expected), judged here.
    if (!releaseReservation(url) && isFull()) {
      throw new AppError("rate_limited", "too many client metadata documents are being fetched; try again");
    }
    inFlight += 1;
    try {
      const ticket = deps.minter.mintDocumentTicket({
        host: target.host,
        path: target.path,
        timeoutMs: CIMD_TIMEOUT_MS,
        maxBytes: CIMD_MAX_BYTES,
      });
      const answer = await deps.egress.fetchDocument(ticket, CIMD_TIMEOUT_MS);
      if (answer.error) {
        return {
          error: new AppError(
            "invalid_request",
            `the client metadata document could not be fetched (${answer.error.code})`,
          ),
          answered: false,
        };
      }
      let body: Uint8Array = answer.body;
      let valid = false;
      if (answer.originStatus === 200) {
        let document: unknown;
        try {
          document = JSON.parse(Buffer.from(answer.body).toString("utf8"));
        } catch {
          // Not JSON: oidc-provider refuses it with its own words.
        }
        if (document !== undefined) {
          const problem = documentProblem(document);
          if (problem) {
            return {
              error: new AppError("invalid_request", problem),
              answered: true,
            };
          }
          body = Buffer.from(JSON.stringify(asNativeWhereNeeded(document)));
          valid = (document as { client_id?: unknown } | null)?.client_id === url;
        }
      }
      return {
        status: answer.originStatus,
        body,
        contentType: answer.contentType || "application/octet-stream",
        // oidc-provider keeps the document as long as this says (within 300 s to a day).
        cacheControl: answer.cacheControl,
        valid,
      };
    } finally {
      inFlight -= 1;
    }
  }

  /** A mark of limit 1 for `url`; one already there (another replica's, a moment ago) is enough. */
  async function markUrl(limit: RateLimit, url: string): Promise<void> {
    try {
      await deps.limiter.take(limit, documentUrlKey(url));
    } catch (error) {
      if (!(error instanceof AppError && error.code === "rate_limited")) throw error;
    }
  }

  /** Counts a fetch's outcome: a valid document marks its URL; a failure spends the host's 20. */
  async function recordOutcome(url: string, fetched: Fetched): Promise<void> {
    if (!("error" in fetched) && fetched.valid) return markUrl(CIMD_VALID_URL, url);
    const { host } = documentTarget(url);
    try {
      await deps.limiter.take(CIMD_FAILED_FETCHES_PER_HOST, host);
    } catch (error) {
      // Already 20: a fetch that was in flight when the 20th failed. Spec 8's 30 still held it.
      if (!(error instanceof AppError && error.code === "rate_limited")) throw error;
    }
    if (!("error" in fetched) || fetched.answered) await markUrl(CIMD_FAILED_URL, url);
  }

  /**
   * Refuses a URL that gave no valid document within the hour, and, once the host's failed fetches
   * are at 20, any URL not known to give a valid one: the host's last 10 are for those.
   */
  async function checkFailures(host: string, url: string): Promise<void> {
    await deps.limiter.check(CIMD_FAILED_URL, documentUrlKey(url));
    try {
      await deps.limiter.check(CIMD_FAILED_FETCHES_PER_HOST, host);
    } catch (error) {
      if (error instanceof AppError && error.code === "rate_limited") {
        if (await deps.limiter.holds(CIMD_VALID_URL, documentUrlKey(url))) return;
      }
      throw error;
    }
  }

  return {
    /** Spec 8's per-host and per-address limits, taken before oidc-provider fetches. */
    async allow(url: string, requesterIp: string | undefined): Promise<void> {
      // Fetched a moment ago: no fetch will happen, so nothing is counted.
      if (recall(`fetch:${url}`)) return;
      const refusalKey = `refusal:${addressKey(requesterIp ?? "")}:${url}`;
      const refused = recall(refusalKey);
      if (refused instanceof DocumentRefusal) throw refused;
      try {
        const { host } = documentTarget(url);
        // Full right now: refused before any hourly place is taken.
        if (isFull()) throw inFlightRefusal();
        await checkFailures(host, url);
        if (requesterIp) await deps.limiter.takeForAddress(CIMD_FETCHES_PER_IP, requesterIp);
        await deps.limiter.take(CIMD_FETCHES_PER_HOST, host);
        reservePlace(url);
      } catch (error) {
        // Only the in-flight refusal is thrown as a DocumentRefusal here; the others are AppErrors.
        const isInFlight = error instanceof DocumentRefusal;
        const refusal = asRefusal(error);
        // Kept for the second time oidc-provider resolves this client in the same authorization;
        // a place in flight frees up within seconds, so that refusal is kept for one second only.
        if (refusal instanceof DocumentRefusal) remember(refusalKey, refusal, isInFlight ? 1_000 : RECENT_MS);
        throw refusal;
      }
    },

    /**
     * The document an interaction was shown with (kept with it), answered as `url`'s next fetch
     * with neither the network nor spec 8's counts: the resume of that interaction resolves its
     * client again, and must get what the operator consented to.
     */
    keep(url: string, document: Record<string, unknown>): void {
      remember(`fetch:${url}`, {
        status: 200,
        body: Buffer.from(JSON.stringify(document)),
        contentType: "application/json",
        cacheControl: "",
        valid: true,
      });
    },

    /** oidc-provider's `fetch`: the document through the proxy, as a fetch Response. */
    async fetch(url: string): Promise<Response> {
      let fetched = recall(`fetch:${url}`) as Fetched | undefined;
      if (!fetched) {
        fetched = await fetchOnce(url);
        remember(`fetch:${url}`, fetched);
        await recordOutcome(url, fetched);
      }
      if ("error" in fetched) throw fetched.error;
      return new Response(fetched.body.slice(), {
        status: fetched.status,
        headers: {
          "content-type": fetched.contentType,
          ...(fetched.cacheControl ? { "cache-control": fetched.cacheControl } : {}),
        },
      });
    },
  };
}

export type DocumentFetcher = ReturnType<typeof createDocumentFetcher>;
