// The control plane's gRPC client for the egress proxy: promises, deadlines, and one error type.
// Calls are spread over every replica the proxy's name resolves to (egress-balancer.ts), and a call
// a replica refused before touching its ticket (it is draining) is sent once more to another one.
// Keepalive pings every two seconds notice a silent link; reconnecting backs off one second at
// most, so a replica that comes back takes calls at once (DECISIONS "Faults and isolation").
import { readFileSync } from "node:fs";
import {
  type ChannelCredentials,
  type ChannelOptions,
  credentials,
  experimental,
  getClientChannel,
  Metadata,
  type ServiceError,
  status,
} from "@grpc/grpc-js";
import {
  EgressProxyClient,
  type ExecuteResponse,
  type FenceOutcome,
  type FetchDocumentResponse,
  type GetInfoResponse,
  type RewrapResponse,
  type SendPushResponse,
  type SignedTicket,
} from "@latch/proto/egress";
import { HealthCheckResponse_ServingStatus, HealthClient } from "@latch/proto/health";
import { AppError, isErrorCode } from "@latch/shared/errors";
import type { Logger } from "pino";
import { currentRequestId } from "../http/request-context.ts";
import { telemetry } from "../telemetry.ts";
import {
  BALANCED_SERVICE_CONFIG,
  NOT_STARTED_TRAILER,
  PROBE_OPTION,
  type ReplicaProbe,
  type ReplicaState,
  type ReplicaSupervision,
  registerHealthRoundRobin,
} from "./egress-balancer.ts";

export interface EgressClientOptions {
  /**
   * host:port of the proxy's gRPC service (a name resolving to every replica, such as a headless
   * Kubernetes Service), or a grpc-js target (`dns://resolver:53/name:port` in tests).
   */
  address: string;
  /**
   * mTLS material for deployments; plaintext is only accepted for a loopback address. The files
   * are read again every `refreshMs` (cert-manager renews them in place; new connections use them).
   */
  tls?: { caPath: string; certPath: string; keyPath: string; refreshMs?: number | undefined };
  /** Where a replica leaving or joining the rotation is said, one line each. */
  logger?: Pick<Logger, "info" | "warn">;
}

/** What travels with a call for the logs of both tiers. */
export interface CallContext {
  requestId?: string | undefined;
}

export interface EgressClient {
  execute(ticket: SignedTicket, deadlineMs: number, context?: CallContext): Promise<ExecuteResponse>;
  resolve(ticket: SignedTicket, context?: CallContext): Promise<string>;
  /** A credential-less GET of a public document (FetchDocument). */
  fetchDocument(ticket: SignedTicket, deadlineMs: number): Promise<FetchDocumentResponse>;
  /** One Web Push message to a push service (SendPush). */
  sendPush(ticket: SignedTicket, deadlineMs: number): Promise<SendPushResponse>;
  getInfo(): Promise<GetInfoResponse>;
  /**
   * GetInfo of one replica by its address (one of `replicas()`), not of whichever replica the
   * rotation picks: the fence asks each replica which store it spends ids in. Absent where there is
   * no rotation to ask (the local vault's one spawned proxy).
   */
  getInfoOf?(address: string): Promise<GetInfoResponse>;
  /** Asks a proxy to fence a ticket whose Execute did not answer (DECISIONS "Faults and isolation"). */
  fence(ticket: SignedTicket): Promise<FenceOutcome>;
  /** Stored values sealed again under the proxy's current key (vault seal-rewrap). */
  rewrap(ticket: SignedTicket): Promise<RewrapResponse>;
  isHealthy(): Promise<boolean>;
  /** Every replica the service name resolved to, as the rotation sees it now. */
  replicaStates(): ReplicaState[];
  /** The same replicas with their addresses (absent with getInfoOf). */
  replicas?(): { address: string; state: ReplicaState }[];
  close(): void;
}

/**
 * Time on top of the origin deadline for the proxy's own work (ticket checks, redaction: DNS is
 * inside the call's own budget) and the link. A call whose proxy stalls ends within its
 * timeout_ms plus this plus the fence (one insert), under the 2 s of DECISIONS.
 */
export const LINK_OVERHEAD_MS = 1_500;
const SHORT_DEADLINE_MS = 5_000;
const PROBE_DEADLINE_MS = 900;
/**
 * A replica asked which store it spends ids in answers within this, or counts as not sharing the
 * control plane's (the fence then concludes nothing rather than wait on a stalled replica).
 */
const REPLICA_INFO_DEADLINE_MS = 1_500;
/** How often the mTLS files are read again unless the configuration says otherwise. */
const TLS_REFRESH_MS = 30_000;
/** A replica's probe channel unused this long (it left the DNS answer) is closed. */
const PROBE_IDLE_MS = 30_000;
/** The request id header both tiers log (gRPC metadata keys are lowercase). */
export const REQUEST_ID_METADATA = "x-request-id";

export function isLoopbackAddress(address: string): boolean {
  const host = address.replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

function channelCredentials(options: EgressClientOptions): ChannelCredentials {
  if (options.tls) {
    const { caPath, certPath, keyPath } = options.tls;
    // Read once now, so that a missing file refuses the start instead of failing every call.
    for (const path of [caPath, certPath, keyPath]) readFileSync(path);
    const files = new experimental.FileWatcherCertificateProvider({
      caCertificateFile: caPath,
      certificateFile: certPath,
      privateKeyFile: keyPath,
      refreshIntervalMs: options.tls.refreshMs ?? TLS_REFRESH_MS,
    });
    return experimental.createCertificateProviderChannelCredentials(files, files);
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

/**
 * The proxy refused the call before spending its ticket: UNAVAILABLE while it drains (the balancer
 * then takes it out of the rotation), RESOURCE_EXHAUSTED when the ticket's organisation has as
 * many calls in flight there as a replica takes from one, or when the replica keeps spent tickets
 * in memory and started after the ticket was issued (`ticket_predates_proxy`); it stays in the
 * rotation for the rest.
 */
function isNotStarted(error: ServiceError): boolean {
  return (
    (error.code === status.UNAVAILABLE || error.code === status.RESOURCE_EXHAUSTED) &&
    error.metadata?.get(NOT_STARTED_TRAILER)[0] === "1"
  );
}

/** `name:port` becomes a `dns:///` target so that every address of the name is used. */
export function toChannelTarget(address: string): string {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(address) || address.startsWith("dns:")
    ? address
    : `dns:///${address}`;
}

/** The name a replica's certificate carries: the host of the target, without resolver or port. */
function serviceHost(address: string): string {
  const hostPort = address.slice(address.lastIndexOf("/") + 1);
  return hostPort.replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
}

/**
 * Asks one replica by address (its health, and GetInfo), over a small channel of its own kept per
 * address; the certificate is checked against the service name, as on the call channel.
 */
function createReplicaProbe(
  creds: ChannelCredentials,
  options: ChannelOptions,
  name: string,
): { probe: ReplicaProbe; getInfo(address: string): Promise<GetInfoResponse>; close(): void } {
  const clients = new Map<string, { health: HealthClient; egress: EgressProxyClient; usedAt: number }>();
  const sweep = (now: number) => {
    for (const [address, entry] of clients) {
      if (now - entry.usedAt > PROBE_IDLE_MS) {
        entry.health.close();
        clients.delete(address);
      }
    }
  };
  /** The clients of one replica, made on first use. */
  const clientsOf = (address: string) => {
    const now = Date.now();
    sweep(now);
    let entry = clients.get(address);
    if (!entry) {
      const target = address.startsWith("[") ? `ipv6:${address}` : `ipv4:${address}`;
      const health = new HealthClient(target, creds, {
        ...options,
        "grpc.ssl_target_name_override": name,
        "grpc.default_authority": name,
      });
      // The same channel (closed with the health client): one connection per replica.
      const egress = new EgressProxyClient(target, creds, { channelOverride: getClientChannel(health) });
      entry = { health, egress, usedAt: now };
      clients.set(address, entry);
    }
    entry.usedAt = now;
    return entry;
  };
  const probe: ReplicaProbe = (address) => {
    const client = clientsOf(address).health;
    return new Promise((resolve) => {
      client.check(
        { service: "" },
        new Metadata(),
        { deadline: new Date(Date.now() + PROBE_DEADLINE_MS) },
        (error, response) => {
          if (error) return resolve(error.code === status.NOT_FOUND ? "not_serving" : "silent");
          resolve(response.status === HealthCheckResponse_ServingStatus.SERVING ? "serving" : "not_serving");
        },
      );
    });
  };
  const getInfo = (address: string) => {
    const client = clientsOf(address).egress;
    return new Promise<GetInfoResponse>((resolve, reject) => {
      client.getInfo(
        {},
        new Metadata(),
        { deadline: new Date(Date.now() + REPLICA_INFO_DEADLINE_MS) },
        (error, response) => (error ? reject(toAppError(error)) : resolve(response)),
      );
    });
  };
  return {
    probe,
    getInfo,
    close: () => {
      for (const entry of clients.values()) entry.health.close();
      clients.clear();
    },
  };
}

/** The request id goes to the proxy's log lines: the one given, else the HTTP request's own. */
function callMetadata(context: CallContext | undefined): Metadata {
  const metadata = new Metadata();
  const requestId = context?.requestId ?? currentRequestId();
  if (requestId) metadata.set(REQUEST_ID_METADATA, requestId);
  // W3C trace context, so the proxy's spans join the agent call's trace (only with telemetry on).
  const traceparent = telemetry().traceparent();
  if (traceparent) metadata.set("traceparent", traceparent);
  return metadata;
}

/**
 * Keeps each replica's state for the gauge and says, one line each, when a replica leaves the
 * rotation (and why) or joins it.
 */
function createReplicaLog(logger: EgressClientOptions["logger"]) {
  const states = new Map<string, ReplicaState>();
  return {
    states: () => [...states.values()],
    replicas: () => [...states].map(([address, state]) => ({ address, state })),
    watcher: {
      onState(address: string, state: ReplicaState, reason: string) {
        const was = states.get(address);
        states.set(address, state);
        if (state === "serving" && was !== "serving") {
          logger?.info({ replica: address, reason }, "egress replica joined the rotation");
        } else if (state !== "serving" && was === "serving") {
          logger?.warn({ replica: address, state, reason }, "egress replica left the rotation");
        }
      },
      onGone(address: string) {
        if (states.get(address) === "serving") {
          logger?.warn(
            { replica: address, reason: "gone from the service name" },
            "egress replica left the rotation",
          );
        }
        states.delete(address);
      },
    },
  };
}

export function createEgressClient(options: EgressClientOptions): EgressClient {
  registerHealthRoundRobin();
  const creds = channelCredentials(options);
  const target = toChannelTarget(options.address);
  const baseOptions: ChannelOptions = {
    // A link that goes silent (a stalled process, a cable pulled: no reset ever comes) is closed
    // after a ping unanswered for two seconds, idle connections included.
    "grpc.keepalive_time_ms": 2_000,
    "grpc.keepalive_timeout_ms": 2_000,
    "grpc.keepalive_permit_without_calls": 1,
    // A replica that was down for long is dialled again within a second of coming back (grpc-js
    // would otherwise wait up to two minutes between attempts).
    "grpc.initial_reconnect_backoff_ms": 250,
    "grpc.max_reconnect_backoff_ms": 1_000,
    "grpc.max_receive_message_length": 4 * 1024 * 1024,
    "grpc.dns_min_time_between_resolutions_ms": 2_000,
  };
  const replicas = createReplicaProbe(creds, baseOptions, serviceHost(target));
  const replicaLog = createReplicaLog(options.logger);
  const supervision: ReplicaSupervision = { probe: replicas.probe, watcher: replicaLog.watcher };
  const channelOptions: ChannelOptions = {
    ...baseOptions,
    "grpc.service_config": BALANCED_SERVICE_CONFIG,
    [PROBE_OPTION]: supervision,
  };
  const client = new EgressProxyClient(target, creds, channelOptions);
  // Connect now rather than on the first call: the replicas' state (the gauge, /ready's body, the
  // log) is known from the start, and a fence learns the proxies' store before anything fails.
  getClientChannel(client).getConnectivityState(true);
  // The same channel (and so the same balancer and probes) for the readiness check.
  const health = new HealthClient(target, creds, { channelOverride: getClientChannel(client) });

  /**
   * Runs a unary call, and once more when the replica refused it before spending the ticket (the
   * one case where nothing can have been spent or sent); both tries share one deadline.
   */
  function callOnce<T>(
    send: (metadata: Metadata, deadline: Date, done: (error: ServiceError | null, value?: T) => void) => void,
    deadlineMs: number,
    context: CallContext | undefined,
  ): Promise<T> {
    const deadline = new Date(Date.now() + deadlineMs);
    return new Promise((resolve, reject) => {
      const attempt = (isRetry: boolean) =>
        send(callMetadata(context), deadline, (error, value) => {
          if (!error) return resolve(value as T);
          // On the next turn: a draining replica is then out of the rotation, and round_robin's
          // next pick is another replica (when there is one) for a refusal of the organisation cap.
          if (!isRetry && isNotStarted(error)) return void setImmediate(() => attempt(true));
          reject(toAppError(error));
        });
      attempt(false);
    });
  }

  return {
    execute: (ticket, deadlineMs, context) =>
      telemetry().inSpan(
        "latch.egress.v1.EgressProxy/Execute",
        { "rpc.system": "grpc", "rpc.method": "Execute" },
        () =>
          callOnce<ExecuteResponse>(
            (metadata, deadline, done) =>
              client.execute({ ticket }, metadata, { deadline }, (error, response) => done(error, response)),
            deadlineMs + LINK_OVERHEAD_MS,
            context,
          ),
        { kind: "client" },
      ),
    resolve: (ticket, context) =>
      callOnce<string>(
        (metadata, deadline, done) =>
          client.resolve({ ticket }, metadata, { deadline }, (error, response) =>
            done(error, response?.value),
          ),
        SHORT_DEADLINE_MS,
        context,
      ),
    fetchDocument: (ticket, deadlineMs) =>
      callOnce<FetchDocumentResponse>(
        (metadata, deadline, done) =>
          client.fetchDocument({ ticket }, metadata, { deadline }, (error, response) =>
            done(error, response),
          ),
        deadlineMs + LINK_OVERHEAD_MS,
        undefined,
      ),
    sendPush: (ticket, deadlineMs) =>
      callOnce<SendPushResponse>(
        (metadata, deadline, done) =>
          client.sendPush({ ticket }, metadata, { deadline }, (error, response) => done(error, response)),
        deadlineMs + LINK_OVERHEAD_MS,
        undefined,
      ),
    getInfo: () =>
      callOnce<GetInfoResponse>(
        (metadata, deadline, done) =>
          client.getInfo({}, metadata, { deadline }, (error, response) => done(error, response)),
        SHORT_DEADLINE_MS,
        undefined,
      ),
    rewrap: (ticket) =>
      callOnce<RewrapResponse>(
        (metadata, deadline, done) =>
          client.rewrap({ ticket }, metadata, { deadline }, (error, response) => done(error, response)),
        SHORT_DEADLINE_MS,
        undefined,
      ),
    fence: (ticket) =>
      callOnce<FenceOutcome>(
        (metadata, deadline, done) =>
          client.fence({ ticket }, metadata, { deadline }, (error, response) =>
            done(error, response?.outcome),
          ),
        SHORT_DEADLINE_MS,
        undefined,
      ),
    getInfoOf: (address) => replicas.getInfo(address),
    replicaStates: () => replicaLog.states(),
    replicas: () => replicaLog.replicas(),
    isHealthy: () =>
      new Promise((resolve) => {
        const deadline = new Date(Date.now() + 2_000);
        health.check({ service: "" }, new Metadata(), { deadline }, (error, response) =>
          resolve(!error && response.status === HealthCheckResponse_ServingStatus.SERVING),
        );
      }),
    close: () => {
      client.close();
      health.close();
      replicas.close();
    },
  };
}
