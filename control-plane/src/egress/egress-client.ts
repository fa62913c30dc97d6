// The control plane's gRPC client for the egress proxy: promises, deadlines, and one error type.
import { readFileSync } from "node:fs";
import { type ChannelCredentials, credentials, Metadata, type ServiceError, status } from "@grpc/grpc-js";
import {
  EgressProxyClient,
  type ExecuteResponse,
  type FetchDocumentResponse,
  type GetInfoResponse,
  type SignedTicket,
} from "@latch/proto/egress";
import { HealthCheckResponse_ServingStatus, HealthClient } from "@latch/proto/health";
import { AppError, isErrorCode } from "@latch/shared/errors";

export interface EgressClientOptions {
  /** host:port of the proxy's gRPC listener. */
  address: string;
  /** mTLS material for deployments; plaintext is only accepted for a loopback address. */
  tls?: { caPath: string; certPath: string; keyPath: string };
}

export interface EgressClient {
  execute(ticket: SignedTicket, deadlineMs: number): Promise<ExecuteResponse>;
  resolve(ticket: SignedTicket): Promise<string>;
  /** A credential-less GET of a public document (FetchDocument). */
  fetchDocument(ticket: SignedTicket, deadlineMs: number): Promise<FetchDocumentResponse>;
  getInfo(): Promise<GetInfoResponse>;
  isHealthy(): Promise<boolean>;
  close(): void;
}

/** Time on top of the origin deadline for the proxy's own work (DNS, ticket checks, redaction). */
const LINK_OVERHEAD_MS = 5_000;
const SHORT_DEADLINE_MS = 5_000;

export function isLoopbackAddress(address: string): boolean {
  const host = address.replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

function channelCredentials(options: EgressClientOptions): ChannelCredentials {
  if (options.tls) {
    return credentials.createSsl(
      readFileSync(options.tls.caPath),
      readFileSync(options.tls.keyPath),
      readFileSync(options.tls.certPath),
    );
  }
  if (!isLoopbackAddress(options.address)) {
    // A ticket carries sealed credentials and the approved request: never over a plaintext network.
    throw new AppError(
      "invalid_request",
      `EGRESS_URL ${options.address} is not loopback; configure mTLS for it`,
    );
  }
  return credentials.createInsecure();
}

/** Maps a gRPC failure to an AppError: the proxy puts its code in the `latch-error-code` trailer. */
function toAppError(error: ServiceError): AppError {
  const code = readErrorCode(error.metadata);
  if (code && isErrorCode(code)) return new AppError(code, error.details || code, { cause: error });
  if (error.code === status.UNAVAILABLE || error.code === status.DEADLINE_EXCEEDED) {
    return new AppError("egress_unavailable", "the egress proxy is not reachable", { cause: error });
  }
  return new AppError("internal", "the egress proxy failed", { cause: error });
}

function readErrorCode(metadata: Metadata | undefined): string | undefined {
  const value = metadata?.get("latch-error-code")[0];
  return typeof value === "string" ? value : undefined;
}

export function createEgressClient(options: EgressClientOptions): EgressClient {
  const creds = channelCredentials(options);
  const channelOptions = {
    "grpc.keepalive_time_ms": 30_000,
    "grpc.max_receive_message_length": 4 * 1024 * 1024,
  };
  const client = new EgressProxyClient(options.address, creds, channelOptions);
  const health = new HealthClient(options.address, creds, channelOptions);
  const deadline = (ms: number) => ({ deadline: new Date(Date.now() + ms) });

  return {
    execute: (ticket, deadlineMs) =>
      new Promise((resolve, reject) => {
        client.execute(
          { ticket },
          new Metadata(),
          deadline(deadlineMs + LINK_OVERHEAD_MS),
          (error, response) => (error ? reject(toAppError(error)) : resolve(response)),
        );
      }),
    resolve: (ticket) =>
      new Promise((resolve, reject) => {
        client.resolve({ ticket }, new Metadata(), deadline(SHORT_DEADLINE_MS), (error, response) =>
          error ? reject(toAppError(error)) : resolve(response.value),
        );
      }),
    fetchDocument: (ticket, deadlineMs) =>
      new Promise((resolve, reject) => {
        client.fetchDocument(
          { ticket },
          new Metadata(),
          deadline(deadlineMs + LINK_OVERHEAD_MS),
          (error, response) => (error ? reject(toAppError(error)) : resolve(response)),
        );
      }),
    getInfo: () =>
      new Promise((resolve, reject) => {
        client.getInfo({}, new Metadata(), deadline(SHORT_DEADLINE_MS), (error, response) =>
          error ? reject(toAppError(error)) : resolve(response),
        );
      }),
    isHealthy: () =>
      new Promise((resolve) => {
        health.check({ service: "" }, new Metadata(), deadline(2_000), (error, response) =>
          resolve(!error && response.status === HealthCheckResponse_ServingStatus.SERVING),
        );
      }),
    close: () => {
      client.close();
      health.close();
    },
  };
}
