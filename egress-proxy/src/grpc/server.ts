// The proxy's gRPC surface: EgressProxy (Execute, Resolve, FetchDocument, GetInfo) and grpc.health.v1.
import {
  type handleUnaryCall,
  Metadata,
  Server,
  type ServerCredentials,
  type ServiceError,
  status,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import {
  EgressProxyService,
  type ExecuteRequest,
  type ExecuteResponse,
  type FetchDocumentRequest,
  type FetchDocumentResponse,
  type GetInfoRequest,
  type GetInfoResponse,
  type ResolveRequest,
  type ResolveResponse,
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

export interface GrpcHandlers {
  execute(ticket: SignedTicket | undefined): Promise<ExecuteResponse>;
  resolve(ticket: SignedTicket | undefined): Promise<ResolveResponse>;
  fetchDocument(ticket: SignedTicket | undefined): Promise<FetchDocumentResponse>;
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

/** An AppError as a gRPC error; the machine code travels in the `latch-error-code` trailer. */
function toServiceError(error: unknown, logger: Logger): Partial<ServiceError> {
  const appError = error instanceof AppError ? error : new AppError("internal", "the egress proxy failed");
  if (!(error instanceof AppError)) logger.error({ err: error }, "unexpected failure in a gRPC handler");
  const metadata = new Metadata();
  metadata.set("latch-error-code", appError.code);
  return { code: GRPC_STATUS[appError.code] ?? status.INTERNAL, details: appError.message, metadata };
}

function unary<Req, Res>(run: (req: Req) => Promise<Res> | Res, logger: Logger): handleUnaryCall<Req, Res> {
  return (call, callback) => {
    Promise.resolve()
      .then(() => run(call.request))
      .then(
        (response) => callback(null, response),
        (error: unknown) => callback(toServiceError(error, logger)),
      );
  };
}

export async function startGrpcServer(options: {
  handlers: GrpcHandlers;
  host: string;
  port: number;
  credentials: ServerCredentials;
  logger: Logger;
}): Promise<{ port: number; close(): Promise<void> }> {
  const { handlers, logger } = options;
  const server = new Server({ "grpc.max_receive_message_length": 4 * 1024 * 1024 });
  const egress: UntypedServiceImplementation = {
    execute: unary<ExecuteRequest, ExecuteResponse>((req) => handlers.execute(req.ticket), logger),
    resolve: unary<ResolveRequest, ResolveResponse>((req) => handlers.resolve(req.ticket), logger),
    fetchDocument: unary<FetchDocumentRequest, FetchDocumentResponse>(
      (req) => handlers.fetchDocument(req.ticket),
      logger,
    ),
    getInfo: unary<GetInfoRequest, GetInfoResponse>(() => handlers.info(), logger),
  };
  const health: UntypedServiceImplementation = {
    check: unary<HealthCheckRequest, HealthCheckResponse>(
      () => ({
        status: handlers.isServing()
          ? HealthCheckResponse_ServingStatus.SERVING
          : HealthCheckResponse_ServingStatus.NOT_SERVING,
      }),
      logger,
    ),
  };
  server.addService(EgressProxyService, egress);
  server.addService(HealthService, health);
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${options.port}`, options.credentials, (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return {
    port,
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
