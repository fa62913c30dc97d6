// The proxy's gRPC surface: EgressProxy (Execute, Resolve, FetchDocument, GetInfo) and
// grpc.health.v1, and the drain of a rolling update: NOT_SERVING at once, new calls refused before
// their ticket is read (the control plane sends them to another replica), calls in flight
// finished, then exit. A call past its organisation's cap is refused as not started too.
import {
  type handleUnaryCall,
  logVerbosity,
  Metadata,
  Server,
  type ServerCredentials,
  type ServerInterceptor,
  type ServiceError,
  setLogVerbosity,
  status,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import {
  EgressProxyService,
  type ExecuteRequest,
  type ExecuteResponse,
  type FenceOutcome,
  type FenceRequest,
  type FenceResponse,
  type FetchDocumentRequest,
  type FetchDocumentResponse,
  type GetInfoRequest,
  type GetInfoResponse,
  type ResolveRequest,
  type ResolveResponse,
  type RewrapRequest,
  type RewrapResponse,
  type SendPushRequest,
  type SendPushResponse,
  type SignedTicket,
} from "@latch/proto/egress";
import {
  type HealthCheckRequest,
  type HealthCheckResponse,
  HealthCheckResponse_ServingStatus,
  HealthService,
} from "@latch/proto/health";
import { AppError, type ErrorCode } from "@latch/shared/errors";
import type { Logger } from "pino";
import { telemetry } from "../telemetry.ts";
import { readRequestId, runInCallContext } from "./call-context.ts";

/** grpc-js's own log level: GRPC_VERBOSITY as grpc-js reads it, ERROR by default. */
const GRPC_LOG_VERBOSITY =
  logVerbosity[(process.env.GRPC_VERBOSITY ?? "ERROR").toUpperCase() as keyof typeof logVerbosity] ??
  logVerbosity.ERROR;

export interface GrpcHandlers {
  execute(ticket: SignedTicket | undefined): Promise<ExecuteResponse>;
  resolve(ticket: SignedTicket | undefined): Promise<ResolveResponse>;
  fetchDocument(ticket: SignedTicket | undefined): Promise<FetchDocumentResponse>;
  sendPush(ticket: SignedTicket | undefined): Promise<SendPushResponse>;
  fence(ticket: SignedTicket | undefined): Promise<FenceOutcome>;
  rewrap(ticket: SignedTicket | undefined): Promise<RewrapResponse>;
  info(): GetInfoResponse;
  isServing(): boolean;
}

const GRPC_STATUS: Partial<Record<ErrorCode, status>> = {
  ticket_invalid: status.INVALID_ARGUMENT,
  ticket_signature: status.UNAUTHENTICATED,
  ticket_audience: status.PERMISSION_DENIED,
  ticket_expired: status.PERMISSION_DENIED,
  ticket_replayed: status.ALREADY_EXISTS,
  credential_unavailable: status.FAILED_PRECONDITION,
};

/** The trailer of a call refused before anything was spent or sent: another replica may take it. */
const NOT_STARTED_TRAILER = "latch-call-not-started";

/** An AppError as a gRPC error; the machine code travels in the `latch-error-code` trailer. */
function toServiceError(error: unknown, logger: Logger): Partial<ServiceError> {
  const appError = error instanceof AppError ? error : new AppError("internal", "the egress proxy failed");
  if (!(error instanceof AppError)) logger.error({ err: error }, "unexpected failure in a gRPC handler");
  const metadata = new Metadata();
  metadata.set("latch-error-code", appError.code);
  if (appError.extra.callNotStarted === true) {
    // An organisation past its calls in flight (calls/organisation-calls.ts): not started, like a
    // draining replica's refusal, but RESOURCE_EXHAUSTED rather than UNAVAILABLE, which takes the
    // whole replica out of the control plane's rotation; one tenant's burst must not do that.
    metadata.set(NOT_STARTED_TRAILER, "1");
    return { code: status.RESOURCE_EXHAUSTED, details: appError.message, metadata };
  }
  return { code: GRPC_STATUS[appError.code] ?? status.INTERNAL, details: appError.message, metadata };
}

/** The services a health Check may name: the whole server ("") and the egress service. */
const HEALTH_SERVICES = new Set(["", "latch.egress.v1.EgressProxy"]);

/**
 * The answer to a call that arrives while draining: UNAVAILABLE before the ticket is read, with
 * the trailer that tells the control plane nothing was spent or sent, so it may try another replica.
 */
function drainingError(): Partial<ServiceError> {
  const metadata = new Metadata();
  metadata.set("latch-error-code", "egress_unavailable");
  metadata.set(NOT_STARTED_TRAILER, "1");
  return { code: status.UNAVAILABLE, details: "this egress proxy replica is shutting down", metadata };
}

function unary<Req, Res>(
  run: (req: Req, metadata: Metadata) => Promise<Res> | Res,
  logger: Logger,
): handleUnaryCall<Req, Res> {
  return (call, callback) => {
    runInCallContext(readRequestId(call.metadata), () =>
      Promise.resolve()
        .then(() => run(call.request, call.metadata))
        .then(
          (response) => callback(null, response),
          (error: unknown) => callback(toServiceError(error, logger)),
        ),
    );
  };
}

/** The caller's W3C traceparent, when it is one string of the format's length. */
function traceparentOf(metadata: Metadata): string | undefined {
  const value = metadata.get("traceparent")[0];
  return typeof value === "string" && value.length <= 128 ? value : undefined;
}

/** Counts the calls in flight and refuses new ones once draining. */
function createCallGate() {
  let inFlight = 0;
  let isDraining = false;
  let onIdle: (() => void) | undefined;
  return {
    get isDraining() {
      return isDraining;
    },
    get inFlight() {
      return inFlight;
    },
    guard<Req, Res>(handler: handleUnaryCall<Req, Res>): handleUnaryCall<Req, Res> {
      return (call, callback) => {
        if (isDraining) return callback(drainingError());
        inFlight++;
        handler(call, (error, value) => {
          inFlight--;
          if (inFlight === 0) onIdle?.();
          callback(error, value);
        });
      };
    },
    /** Stops taking calls; resolves when the last call in flight has answered. */
    drain(): Promise<void> {
      isDraining = true;
      if (inFlight === 0) return Promise.resolve();
      return new Promise((resolve) => {
        onIdle = resolve;
      });
    },
  };
}

export interface RunningGrpcServer {
  port: number;
  /** Calls being answered now. */
  readonly inFlight: number;
  /**
   * Health goes NOT_SERVING and new calls are refused (retried elsewhere by the control plane);
   * resolves when the calls in flight have answered, or after `deadlineMs` (true if they all did).
   */
  drain(deadlineMs: number): Promise<boolean>;
  close(): Promise<void>;
}

export async function startGrpcServer(options: {
  handlers: GrpcHandlers;
  host: string;
  port: number;
  credentials: ServerCredentials;
  /** Run before every call (the client identity check of mTLS). */
  interceptors?: ServerInterceptor[];
  logger: Logger;
}): Promise<RunningGrpcServer> {
  const { handlers, logger } = options;
  const server = new Server({
    "grpc.max_receive_message_length": 4 * 1024 * 1024,
    // The control plane pings every couple of seconds to notice a silent link (egress-client.ts);
    // grpc-js servers accept any ping rate, and these keep our own side's idle connections honest.
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 5_000,
    interceptors: options.interceptors ?? [],
  });
  const gate = createCallGate();
  const egress: UntypedServiceImplementation = {
    execute: gate.guard(
      unary<ExecuteRequest, ExecuteResponse>(
        (req, metadata) =>
          // The agent call's trace continues here (W3C traceparent from the control plane).
          telemetry().inCallerSpan(
            "latch.egress.v1.EgressProxy/Execute",
            traceparentOf(metadata),
            { "rpc.system": "grpc", "rpc.method": "Execute" },
            () => handlers.execute(req.ticket),
          ),
        logger,
      ),
    ),
    resolve: gate.guard(
      unary<ResolveRequest, ResolveResponse>((req) => handlers.resolve(req.ticket), logger),
    ),
    fetchDocument: gate.guard(
      unary<FetchDocumentRequest, FetchDocumentResponse>((req) => handlers.fetchDocument(req.ticket), logger),
    ),
    sendPush: gate.guard(
      unary<SendPushRequest, SendPushResponse>((req) => handlers.sendPush(req.ticket), logger),
    ),
    rewrap: gate.guard(unary<RewrapRequest, RewrapResponse>((req) => handlers.rewrap(req.ticket), logger)),
    getInfo: unary<GetInfoRequest, GetInfoResponse>(() => handlers.info(), logger),
    // Not behind the drain gate: a draining replica still answers whether it ran a ticket.
    fence: unary<FenceRequest, FenceResponse>(
      async (req) => ({ outcome: await handlers.fence(req.ticket) }),
      logger,
    ),
  };
  const health: UntypedServiceImplementation = {
    check: ((call, callback) => {
      // grpc.health.v1: an unknown service is NOT_FOUND, not a status.
      if (!HEALTH_SERVICES.has(call.request.service)) {
        return callback({ code: status.NOT_FOUND, details: "unknown service" });
      }
      callback(null, {
        status:
          handlers.isServing() && !gate.isDraining
            ? HealthCheckResponse_ServingStatus.SERVING
            : HealthCheckResponse_ServingStatus.NOT_SERVING,
      });
    }) satisfies handleUnaryCall<HealthCheckRequest, HealthCheckResponse>,
  };
  server.addService(EgressProxyService, egress);
  server.addService(HealthService, health);
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  const address = `${host}:${options.port}`;
  // A bind that fails is reported once, by the caller (a taken address is one sentence in
  // main.ts), not also by grpc-js's own error line.
  setLogVerbosity(logVerbosity.NONE);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, options.credentials, (error, bound) => {
      if (!error) return resolve(bound);
      if (!/EADDRINUSE/.test(error.message)) return reject(error);
      reject(
        Object.assign(new Error(`${address} is already in use by another program`), { code: "EADDRINUSE" }),
      );
    }),
  ).finally(() => setLogVerbosity(GRPC_LOG_VERBOSITY));
  return {
    port,
    get inFlight() {
      return gate.inFlight;
    },
    async drain(deadlineMs) {
      let timer: NodeJS.Timeout | undefined;
      const isDone = await Promise.race([
        gate.drain().then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), deadlineMs);
        }),
      ]);
      clearTimeout(timer);
      return isDone;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2_000).unref();
      }),
  };
}
