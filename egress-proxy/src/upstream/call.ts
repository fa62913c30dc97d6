// One upstream HTTPS call to a pinned destination: one total deadline, a capped and decoded body,
// allow-listed response headers, and every failure as an AppError that says whether the origin answered.
import { AppError, type ErrorCode } from "@latch/shared/errors";
import type { Dispatcher } from "undici";
import type { Destination } from "../destination/resolve.ts";
import { decodeBody, MAX_BODY_BYTES } from "./decode.ts";
import { createPoolSet, DialError, MAX_HEADER_BLOCK_BYTES, type PoolSetOptions } from "./pool.ts";
import { filterResponseHeaders, type ResponseHeader } from "./response-headers.ts";

export interface UpstreamRequest {
  destination: Destination;
  method: string;
  path: string;
  headers: { name: string; value: string }[];
  body?: Uint8Array;
  contentType?: string;
  /** One deadline over connect, TLS, headers and the whole body. */
  timeoutMs: number;
  /** Response headers kept beyond the allow-list (a document fetch keeps cache-control). */
  keepHeaders?: readonly string[];
}

export interface UpstreamResponse {
  status: number;
  /** Allow-listed only (see response-headers.ts), lowercase names. */
  headers: ResponseHeader[];
  /** Decoded, at most 1 MiB. */
  body: Buffer;
}

export interface Upstream {
  call(req: UpstreamRequest): Promise<UpstreamResponse>;
  close(): Promise<void>;
}

/**
 * Request headers this module owns. The caller's copies are dropped (they were validated upstream;
 * this is the last line): framing and connection headers would let a caller desync the request
 * (RFC 9112 6.1, 9.6), and the encoding we accept is ours to say since we decode it.
 */
const OWNED_HEADERS: ReadonlySet<string> = new Set([
  "host",
  "content-length",
  "content-type",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "upgrade",
  "expect",
  "te",
  "trailer",
  "accept-encoding",
]);
const ACCEPT_ENCODING = "gzip, deflate, br";
/** Methods whose empty body is still announced with `content-length: 0` (RFC 9110 8.6). */
const BODY_METHODS: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH"]);
/** RFC 9110 15.3.5, 15.4.5: these answers have no content. */
const BODILESS_STATUSES: ReadonlySet<number> = new Set([204, 304]);

/** Reason of the one abort this module makes: the call's deadline. */
class DeadlineReached extends Error {
  constructor() {
    super("the call deadline passed");
    this.name = "DeadlineReached";
  }
}

function buildRequestHeaders(req: UpstreamRequest): string[] {
  const flat: string[] = [];
  for (const { name, value } of req.headers) {
    if (!OWNED_HEADERS.has(name.toLowerCase())) flat.push(name, value);
  }
  flat.push("accept-encoding", ACCEPT_ENCODING);
  if (req.body !== undefined) {
    flat.push("content-length", String(req.body.byteLength));
    flat.push("content-type", req.contentType ?? "application/octet-stream");
  } else if (BODY_METHODS.has(req.method.toUpperCase())) {
    flat.push("content-length", "0");
  }
  return flat;
}

function tooLarge(): AppError {
  return new AppError(
    "body_too_large",
    "the origin response is over 1 MiB; the same call must not be retried unchanged",
  );
}

/**
 * Reads the raw body, stopping as soon as it passes 1 MiB: a larger answer is never buffered.
 * A declared content-length over the cap fails before reading anything. Read with `data` events,
 * not an async iterator (a promise per chunk, measurably dearer on every call).
 */
function readCappedBody(response: Dispatcher.ResponseData): Promise<Buffer> {
  const declared = Number(response.headers["content-length"]);
  const body = response.body;
  if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) {
    abandon(body);
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const onData = (chunk: Buffer) => {
      total += chunk.length;
      if (total > MAX_BODY_BYTES) {
        settle();
        abandon(body);
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      settle();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total));
    };
    const onError = (error: Error) => {
      settle();
      reject(error);
    };
    // Closed with neither an end nor an error: cut short, as the async iterator would report.
    const onClose = () =>
      onError(Object.assign(new Error("the body ended early"), { code: "ERR_STREAM_PREMATURE_CLOSE" }));
    const settle = () => {
      body.off("data", onData);
      body.off("end", onEnd);
      body.off("error", onError);
      body.off("close", onClose);
    };
    body.on("data", onData);
    body.once("end", onEnd);
    body.once("error", onError);
    body.once("close", onClose);
  });
}

/**
 * Stops reading a body and gives its connection up. undici's body reports being destroyed as an
 * 'error' event ("Request aborted"); with no listener left that event would be an uncaught
 * exception, and any origin answering over 1 MiB would end the proxy's process.
 */
function abandon(body: Dispatcher.ResponseData["body"]): void {
  body.on("error", ignoreAbandonedBodyError);
  body.destroy();
}

function ignoreAbandonedBodyError(): void {}

function errorCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : "";
}

/**
 * A cause safe to log: name and code only. Some undici errors carry response bytes (the HTTP
 * parser's `data`), and an origin may echo a request header back; a dial error is kept whole
 * because it happened before any request byte was sent.
 */
function safeCause(error: unknown): Error {
  if (error instanceof DialError) return error;
  const name = error instanceof Error ? error.name : typeof error;
  return new Error(`${name} ${errorCode(error)}`.trim());
}

/** A short code for the message, only when it looks like one (never free text from the wire). */
function codeHint(code: string | undefined): string {
  return code !== undefined && /^[A-Z0-9_]{1,64}$/.test(code) ? ` (${code})` : "";
}

/** Failures inside the proxy itself, before any byte was written to an origin. */
function isLocalFailure(error: unknown): boolean {
  const code = errorCode(error);
  return code === "UND_ERR_CLOSED" || code === "UND_ERR_DESTROYED" || code === "UND_ERR_INVALID_ARG";
}

function mapFailure(
  error: unknown,
  host: string,
  timeoutMs: number,
  isDeadline: boolean,
  reachedOrigin: boolean,
): AppError {
  // Spec 3.1: a one-time approval comes back unspent only when the request never left (DNS,
  // connect or TLS failure). Once a connection carried the request, the origin may have acted on
  // it (a payment, a delete) even if no answer came back, so every other failure counts as sent.
  const hasLeft = reachedOrigin || !(error instanceof DialError || isLocalFailure(error));
  const extra = { reachedOrigin: hasLeft };
  if (error instanceof AppError) {
    return new AppError(error.code, error.message, {
      cause: error.cause,
      extra: { ...error.extra, ...extra },
    });
  }
  const fail = (code: ErrorCode, message: string) =>
    new AppError(code, message, { cause: safeCause(error), extra });
  const code = errorCode(error);
  if (isDeadline || code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT") {
    return fail("timeout", `${host} did not answer within ${Math.round(timeoutMs)} ms`);
  }
  if (error instanceof DialError) {
    const hint = codeHint(error.originalCode);
    return error.phase === "tcp"
      ? fail("connect_failed", `could not connect to ${host}${hint}`)
      : fail("tls_failure", `TLS with ${host} failed${hint}`);
  }
  if (code === "UND_ERR_HEADERS_OVERFLOW") {
    return fail(
      "bad_origin_response",
      `${host} sent response headers over ${MAX_HEADER_BLOCK_BYTES / 1024} KiB`,
    );
  }
  if (code === "UND_ERR_CLOSED" || code === "UND_ERR_DESTROYED") {
    return fail("egress_unavailable", "the egress proxy is shutting down");
  }
  if (code === "UND_ERR_INVALID_ARG" || code === "UND_ERR_REQ_CONTENT_LENGTH_MISMATCH") {
    return fail("internal", "the proxy could not build the upstream request");
  }
  // Parser errors (HPE_*), a response length mismatch, a socket closed mid-answer: the origin
  // (or something in between) spoke broken HTTP. Before any status line, the send may not have
  // gone through, but we cannot tell that from a reset, so the code stays bad_origin_response.
  return fail(
    "bad_origin_response",
    `${host} sent a malformed or incomplete HTTP response${codeHint(code || undefined)}`,
  );
}

/**
 * Builds the upstream caller. Each `call` dials `destination.address:port` only (no lookup), with
 * SNI, Host and the certificate check on `destination.host`; redirects come back as they are
 * (3xx, `location` dropped), never followed.
 *
 * @example
 * const upstream = createUpstream({});
 * const answer = await upstream.call({ destination, method: "GET", path: "/v1/me", headers: [], timeoutMs: 10_000 });
 */
export function createUpstream(opts: PoolSetOptions): Upstream {
  const pools = createPoolSet(opts);

  return {
    async call(req) {
      // One controller, armed before connecting: it covers connect, TLS, headers and every body
      // byte, so an origin dripping one byte at a time is cut at the deadline, not kept alive.
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(new DeadlineReached()), req.timeoutMs);
      let reachedOrigin = false;
      try {
        const response = await pools.poolFor(req.destination).request({
          method: req.method.toUpperCase() as Dispatcher.HttpMethod,
          path: req.path,
          headers: buildRequestHeaders(req),
          body:
            req.body === undefined
              ? null
              : Buffer.from(req.body.buffer, req.body.byteOffset, req.body.byteLength),
          signal: controller.signal,
        });
        // The status line arrived: the origin answered.
        reachedOrigin = true;
        const raw = await readCappedBody(response);
        clearTimeout(timer);
        const isBodiless = BODILESS_STATUSES.has(response.statusCode);
        return {
          status: response.statusCode,
          headers: filterResponseHeaders(response.headers, req.keepHeaders),
          body: isBodiless ? Buffer.alloc(0) : decodeBody(raw, response.headers["content-encoding"]),
        };
      } catch (error) {
        throw mapFailure(
          error,
          req.destination.host,
          req.timeoutMs,
          controller.signal.aborted,
          reachedOrigin,
        );
      } finally {
        clearTimeout(timer);
      }
    },
    close: () => pools.close(),
  };
}
