// Client ID metadata documents (an https client_id, DECISIONS "OAuth authorization server"): fetched
// through the egress proxy's FetchDocument, never from the control plane itself, with spec 8's
// limits: 1 MiB and 3 s per document, 30 fetches per hour per document host, 10 per hour per
// requesting address, 4 in flight on this server. oidc-provider validates the document and caches
// it; a document that names a loopback or private-use redirect is registered as a native client.
import { AppError } from "@latch/shared/errors";
import { checkHostname } from "@latch/shared/requests/host";
import { validateRequestPath } from "@latch/shared/requests/path";
import type { EgressClient } from "../egress/egress-client.ts";
import type { TicketMinter } from "../egress/tickets.ts";
import { CIMD_FETCHES_PER_HOST, CIMD_FETCHES_PER_IP, type RateLimiter } from "../limits/rate-limit.ts";

export const CIMD_MAX_BYTES = 1024 * 1024;
export const CIMD_TIMEOUT_MS = 3_000;
export const CIMD_MAX_IN_FLIGHT = 4;

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

export function createDocumentFetcher(deps: DocumentFetcherDeps) {
  let inFlight = 0;
  return {
    /** Spec 8's per-host and per-address limits, taken before oidc-provider fetches. */
    async allow(url: string, requesterIp: string | undefined): Promise<void> {
      try {
        const { host } = documentTarget(url);
        if (requesterIp) await deps.limiter.take(CIMD_FETCHES_PER_IP, requesterIp);
        await deps.limiter.take(CIMD_FETCHES_PER_HOST, host);
      } catch (error) {
        throw asRefusal(error);
      }
    },

    /** oidc-provider's `fetch`: the document through the proxy, as a fetch Response. */
    async fetch(url: string): Promise<Response> {
      const target = documentTarget(url);
      if (inFlight >= CIMD_MAX_IN_FLIGHT) {
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
        if (answer.error)
          throw new AppError(
            "invalid_request",
            `the client metadata document could not be fetched (${answer.error.code})`,
          );
        let body: Uint8Array = answer.body;
        if (answer.originStatus === 200) {
          try {
            body = Buffer.from(
              JSON.stringify(asNativeWhereNeeded(JSON.parse(Buffer.from(answer.body).toString("utf8")))),
            );
          } catch {
            // Not JSON: oidc-provider refuses it with its own words.
          }
        }
        return new Response(body, {
          status: answer.originStatus,
          headers: { "content-type": answer.contentType || "application/octet-stream" },
        });
      } finally {
        inFlight -= 1;
      }
    },
  };
}

export type DocumentFetcher = ReturnType<typeof createDocumentFetcher>;
