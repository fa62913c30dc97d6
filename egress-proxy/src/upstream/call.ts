// One upstream HTTPS call to a pinned destination: one total deadline, a capped and decoded body,
// allow-listed response headers, and every failure as an AppError that says whether the origin answered.
import type { IncomingHttpHeaders } from "node:http";
import { AppError, type ErrorCode } from "@latch/shared/errors";
import type { Dispatcher } from "undici";
import type { Destination } from "../destination/resolve.ts";
import { decodeBody, MAX_BODY_BYTES } from "./decode.ts";
import {
  createPoolSet,
  DialError,
  MAX_HEADER_BLOCK_BYTES,
  type PoolSet,
  type PoolSetOptions,
} from "./pool.ts";
import { filterResponseHeaders, type ResponseHeader } from "./response-headers.ts";

export interface UpstreamRequest {
  /**
   * The ticket's organisation (Ticket.organisation_id): whose connections carry the call.
   * Organisations never share a connection, nor wait for each other's (pool.ts). Every call of a
   * ticket passes it; "" or absent is the one pool of no organisation.
   */
  organisationId?: string;
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

/** Reason of the abort at the call's deadline. */
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

/**
 * @param hasLeft whether undici handed the request to a socket. Spec 3.1: a one-time approval
 * comes back unspent only when the request never left (DNS, connect or TLS failure, or a request
 * still waiting for a connection at the deadline). Once a socket carried it, the origin may have
 * acted on it (a payment, a delete) even if no answer came back, so the failure counts as sent.
 */
function mapFailure(error: unknown, host: string, timeoutMs: number, hasLeft: boolean): AppError {
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
  const isDeadline = error instanceof DeadlineReached || (error instanceof DialError && error.isDeadline);
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
 * One request on a pool, as an undici dispatch handler that settles its call once: with the
 * answer, a failure, or the deadline. The deadline does not wait on undici: a request still
 * queued for a connection, or whose connect or TLS handshake hangs, is answered at the deadline
 * as not sent, and undici is stopped from sending it later (`onRequestStart` refuses it). No body
 * stream: chunks are collected here under the cap, and a larger answer is never buffered.
 */
class Exchange implements Dispatcher.DispatchHandler {
  /**
   * Set when undici hands the request to a socket: `onRequestStart` runs right before the first
   * byte is written, so until then nothing of the request can have reached the origin.
   */
  private isWritten = false;
  private isSettled = false;
  private controller: Dispatcher.DispatchController | undefined;
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private readonly chunks: Buffer[] = [];
  private total = 0;
  private readonly req: UpstreamRequest;
  private readonly resolve: (answer: UpstreamResponse) => void;
  private readonly reject: (error: AppError) => void;
  private readonly timer: NodeJS.Timeout;

  constructor(
    req: UpstreamRequest,
    resolve: (answer: UpstreamResponse) => void,
    reject: (error: AppError) => void,
  ) {
    this.req = req;
    this.resolve = resolve;
    this.reject = reject;
    // Armed before dispatching: it covers the wait for a connection, connect, TLS, headers and
    // every body byte, so an origin dripping one byte at a time is cut at the deadline too.
    this.timer = setTimeout(() => this.fail(new DeadlineReached()), req.timeoutMs);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // The call already ended (its deadline passed while it waited): the request must not leave.
    // Thrown, not `controller.abort()`: undici's abort here destroys the connection it was about
    // to write on (client-h1 writeH1), so every call that gave up in the queue would cost its
    // organisation a live keep-alive connection, or a dial, when its turn came. A throw from
    // onRequestStart errors the request alone: undici drops it unsent and keeps the socket.
    if (this.isSettled) throw new DeadlineReached();
    this.isWritten = true;
    this.controller = controller;
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ) {
    // 1xx answers are informational; the final one follows on the same request.
    if (statusCode < 200 || this.isSettled) return;
    this.status = statusCode;
    this.headers = headers;
    // A declared content-length over the cap fails before reading anything.
    const declared = Number(headers["content-length"]);
    if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) this.fail(tooLarge());
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.isSettled) return;
    this.total += chunk.length;
    if (this.total > MAX_BODY_BYTES) {
      this.fail(tooLarge());
      return;
    }
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    if (this.isSettled) return;
    this.isSettled = true;
    clearTimeout(this.timer);
    try {
      this.resolve(this.answer());
    } catch (error) {
      this.reject(mapFailure(error, this.req.destination.host, this.req.timeoutMs, true));
    }
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    this.fail(error);
  }

  /** Ends the call with `error` and stops whatever undici still does for it. */
  fail(error: unknown): void {
    if (this.isSettled) return;
    this.isSettled = true;
    clearTimeout(this.timer);
    this.reject(mapFailure(error, this.req.destination.host, this.req.timeoutMs, this.isWritten));
    // Dispatched: the socket is destroyed with the request. Not yet: onRequestStart refuses it.
    this.controller?.abort(error instanceof Error ? error : new DeadlineReached());
  }

  private answer(): UpstreamResponse {
    const { status, headers } = this;
    const raw = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.total);
    return {
      status,
      headers: filterResponseHeaders(headers, this.req.keepHeaders),
      body: BODILESS_STATUSES.has(status) ? Buffer.alloc(0) : decodeBody(raw, headers["content-encoding"]),
    };
  }
}

function callOn(pools: PoolSet, req: UpstreamRequest): Promise<UpstreamResponse> {
  return new Promise((resolve, reject) => {
    const exchange = new Exchange(req, resolve, reject);
    try {
      // A connection this call opens has what is left of its budget to come up, not undici's
      // backstop: a listener that never answers the TLS ClientHello is let go at the deadline.
      pools.dispatch(
        req.organisationId ?? "",
        req.destination,
        req.timeoutMs,
        {
          method: req.method.toUpperCase() as Dispatcher.HttpMethod,
          path: req.path,
          headers: buildRequestHeaders(req),
          body:
            req.body === undefined
              ? null
              : Buffer.from(req.body.buffer, req.body.byteOffset, req.body.byteLength),
        },
        exchange,
      );
    } catch (error) {
      exchange.fail(error);
    }
  });
}

/**
 * Builds the upstream caller. Each `call` dials `destination.address:port` only (no lookup), with
 * SNI, Host and the certificate check on `destination.host`; redirects come back as they are
 * (3xx, `location` dropped), never followed.
 *
 * @example
 * const upstream = createUpstream({});
 * const answer = await upstream.call({ organisationId, destination, method: "GET", path: "/v1/me", headers: [], timeoutMs: 10_000 });
 */
export function createUpstream(opts: PoolSetOptions): Upstream {
  const pools = createPoolSet(opts);
  return {
    call: (req) => callOn(pools, req),
    close: () => pools.close(),
  };
}
