// Assembles the proxy from its parts: keys, ticket checks, destination policy, upstream, gRPC.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type Server as HttpServer } from "node:http";
import { ServerCredentials } from "@grpc/grpc-js";
import { FenceOutcome, ReplayStore } from "@latch/proto/egress";
import { parseTrustedTicketKeys } from "@latch/shared/tickets/ticket-signature";
import type { Logger } from "pino";
import { createExecute } from "./calls/execute.ts";
import { createFetchDocument } from "./calls/fetch-document.ts";
import { createOrganisationCalls } from "./calls/organisation-calls.ts";
import { createResolve } from "./calls/resolve.ts";
import { createRewrap } from "./calls/rewrap.ts";
import { createSendPush } from "./calls/send-push.ts";
import type { EgressConfig } from "./config.ts";
import { readTrustedTicketKeysText } from "./config.ts";
import { parseCidrList } from "./destination/classify.ts";
import { parseConnectTo } from "./destination/connect-to.ts";
import { createDestinationResolver } from "./destination/resolve.ts";
import { startGrpcServer } from "./grpc/server.ts";
import { createDataKeyCache } from "./keys/data-key-cache.ts";
import { loadOrCreateSealingKeyring } from "./keys/sealing-keys.ts";
import { createMetrics, type Metrics } from "./metrics/metrics.ts";
import { startTelemetry } from "./telemetry.ts";
import { createTicketFencer } from "./tickets/fence.ts";
import { createMemoryReplayStore, createPostgresReplayStore } from "./tickets/replay-store.ts";
import { createTicketChecker, createTicketSpender } from "./tickets/verify.ts";
import {
  clientIdentityInterceptor,
  parseClientIdentity,
  watchedServerCredentials,
} from "./tls/server-tls.ts";
import { createUpstream } from "./upstream/call.ts";

export interface RunningEgressProxy {
  port: number;
  replicaId: string;
  /** The key new values are sealed to: the first of the key file, read again on a rotation. */
  readonly sealingKey: { keyId: string; publicKey: Uint8Array };
  metrics: Metrics;
  /** Calls being answered now. */
  readonly inFlight: number;
  /**
   * Stops taking calls (health NOT_SERVING, new calls refused before their ticket is read) and
   * waits up to `deadlineMs` for the calls in flight; true when they all answered in time.
   */
  drain(deadlineMs: number): Promise<boolean>;
  close(): Promise<void>;
}

/** What the process takes from no setting; tests set it. */
export interface EgressProxyOptions {
  /**
   * Calls in flight of one organisation across Execute, FetchDocument and SendPush in this
   * replica (calls/organisation-calls.ts); MAX_CALLS_PER_ORGANISATION unless a test sets it small.
   */
  maxCallsPerOrganisation?: number;
}

export const EGRESS_VERSION = "0.1.0";

const FENCE_LABELS: Partial<Record<FenceOutcome, string>> = {
  [FenceOutcome.FENCE_OUTCOME_FENCED]: "fenced",
  [FenceOutcome.FENCE_OUTCOME_TAKEN]: "taken",
  [FenceOutcome.FENCE_OUTCOME_UNKNOWN]: "unknown",
};

/** Counts a ticket refused (signature, expiry, replayed or fenced) by its code, and rethrows. */
async function countingTicketRefusals<T>(metrics: Metrics, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("ticket_")) metrics.countTicketRefusal(code);
    throw error;
  }
}

/** mTLS when configured (plaintext only on loopback: config.ts), with the files watched. */
function serverCredentials(config: EgressConfig): { credentials: ServerCredentials; loaded: Promise<void> } {
  if (config.EGRESS_TLS_CERT && config.EGRESS_TLS_KEY && config.EGRESS_TLS_CLIENT_CA) {
    return watchedServerCredentials({
      certPath: config.EGRESS_TLS_CERT,
      keyPath: config.EGRESS_TLS_KEY,
      clientCaPath: config.EGRESS_TLS_CLIENT_CA,
      refreshMs: config.EGRESS_TLS_REFRESH_MS,
    });
  }
  return { credentials: ServerCredentials.createInsecure(), loaded: Promise.resolve() };
}

export async function startEgressProxy(
  config: EgressConfig,
  logger: Logger,
  options: EgressProxyOptions = {},
): Promise<RunningEgressProxy> {
  for (const knob of config.devKnobs) {
    logger.warn(
      `${knob} is set: a development/test knob that bends the destination policy. Never use it in production.`,
    );
  }
  const replicaId = `egress-${randomBytes(6).toString("hex")}`;
  const tracing = await startTelemetry({ endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT });
  const keyring = await loadOrCreateSealingKeyring(config.DATA_DIR, config.EGRESS_SEALING_KEY_FILE, {
    dataKeys: createDataKeyCache({ capacity: config.EGRESS_DATA_KEY_CACHE_ENTRIES }),
  });
  // A rotation (a new key first in the file, or one retired) takes effect without a restart, and
  // no data key opened under the old keys outlives it.
  const keyRefresh = setInterval(() => {
    try {
      if (keyring.reload())
        logger.info({ sealingKeyId: keyring.current.keyId }, "sealing keys reloaded; data keys wiped");
    } catch (error) {
      logger.error(
        { err: (error as Error).message },
        "the sealing key file could not be read again; keys in use kept",
      );
    }
  }, config.EGRESS_SEALING_KEY_REFRESH_MS);
  keyRefresh.unref();
  const { credentials, loaded: tlsLoaded } = serverCredentials(config);
  const replayStore = config.EGRESS_REPLAY_DATABASE_URL
    ? await createPostgresReplayStore(config.EGRESS_REPLAY_DATABASE_URL, {
        isProduction: config.NODE_ENV === "production",
        warn: (sentence) => logger.warn(`${sentence}. Production refuses to start with such a role.`),
      })
    : createMemoryReplayStore();
  // Told of the store, the checks refuse on a memory store every ticket issued before this process
  // started: it may have run in the process before a restart. Not in a control plane's child: no
  // other proxy ever took its parent's tickets, and a parent that starts it on its first call has
  // minted that call's ticket first (control-plane/src/local/local-vault.ts, lazyEgress).
  const checkTicket = createTicketChecker({
    trustedKeys: parseTrustedTicketKeys(readTrustedTicketKeysText(config)),
    audience: config.EGRESS_AUDIENCE,
    replayStore: config.isSpawned ? undefined : replayStore,
  });
  const spendTicket = createTicketSpender({ replayStore });
  const fenceTicket = createTicketFencer({ checkTicket, replayStore });
  const resolver = createDestinationResolver({
    dnsServers: config.EGRESS_DNS_SERVERS?.split(",")
      .map((s) => s.trim())
      .filter(Boolean),
    connectTo: config.EGRESS_CONNECT_TO ? parseConnectTo(config.EGRESS_CONNECT_TO) : [],
    allowCidrs: config.EGRESS_ALLOW_CIDRS ? parseCidrList(config.EGRESS_ALLOW_CIDRS) : [],
  });
  const upstream = createUpstream({
    extraCa: config.EGRESS_EXTRA_CA ? readFileSync(config.EGRESS_EXTRA_CA, "utf8") : undefined,
  });
  const metrics = createMetrics();
  // One budget per organisation for every kind of ticket that dials.
  const organisationCalls = createOrganisationCalls({
    maxCalls: options.maxCallsPerOrganisation,
    onRefused: (organisationId) => {
      metrics.countDenial("organisation_calls_in_flight");
      logger.warn(
        { organisation: organisationId.slice(0, 64) },
        "call refused unspent: its organisation has as many calls in flight as a replica takes",
      );
    },
  });
  const execute = createExecute({
    checkTicket,
    spendTicket,
    keyring,
    resolver,
    upstream,
    metrics,
    logger,
    organisationCalls,
  });
  const resolve = createResolve({ checkTicket, spendTicket, keyring, logger });
  const rewrap = createRewrap({ checkTicket, spendTicket, keyring, logger });
  // The two credential-less kinds that dial: the same checks, destination rules and places.
  const dialing = { checkTicket, spendTicket, resolver, upstream, metrics, logger, organisationCalls };
  const fetchDocument = createFetchDocument(dialing);
  const sendPush = createSendPush(dialing);
  let isServing = true;

  // The same condition as the credentials' (config.ts refuses a start with only some of the files).
  const isTls = Boolean(config.EGRESS_TLS_CERT && config.EGRESS_TLS_KEY && config.EGRESS_TLS_CLIENT_CA);
  const grpc = await startGrpcServer({
    host: config.listenHost,
    port: config.listenPort,
    credentials,
    interceptors: isTls
      ? [clientIdentityInterceptor(parseClientIdentity(config.EGRESS_CLIENT_IDENTITY), logger)]
      : [],
    logger,
    handlers: {
      execute: (ticket) => countingTicketRefusals(metrics, () => execute(ticket)),
      resolve: (ticket) => countingTicketRefusals(metrics, () => resolve(ticket)),
      rewrap: (ticket) => countingTicketRefusals(metrics, () => rewrap(ticket)),
      fetchDocument: (ticket) => countingTicketRefusals(metrics, () => fetchDocument(ticket)),
      sendPush: (ticket) => countingTicketRefusals(metrics, () => sendPush(ticket)),
      fence: async (ticket) => {
        const outcome = await countingTicketRefusals(metrics, () => fenceTicket(ticket));
        const label = FENCE_LABELS[outcome] ?? "unknown";
        metrics.countFence(label);
        logger.info({ outcome: label }, "ticket fence asked by the control plane");
        return outcome;
      },
      info: () => ({
        sealingKeyId: keyring.current.keyId,
        sealingPublicKey: Buffer.from(keyring.current.publicKey),
        replicaId,
        version: EGRESS_VERSION,
        replayStore:
          replayStore.kind === "shared" ? ReplayStore.REPLAY_STORE_SHARED : ReplayStore.REPLAY_STORE_MEMORY,
        replayStoreId: replayStore.storeId,
      }),
      isServing: () => isServing,
    },
  });

  // The certificate is read asynchronously: no handshake succeeds before, so "ready" waits for it.
  try {
    await tlsLoaded;
  } catch (error) {
    await grpc.close();
    await replayStore.close();
    clearInterval(keyRefresh);
    keyring.close();
    throw error;
  }

  let metricsServer: HttpServer | undefined;
  if (config.EGRESS_METRICS_LISTEN) {
    const at = config.EGRESS_METRICS_LISTEN.lastIndexOf(":");
    // The admin listener: Prometheus /metrics, and /health and /ready for probes that cannot
    // speak the gRPC port's mTLS (a kubelet's gRPC probe has no client certificate). /ready says
    // what grpc.health.v1 says: 503 from the moment the replica drains.
    metricsServer = createServer((req, res) => {
      if (req.url === "/metrics") {
        return res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(metrics.render());
      }
      if (req.url === "/health") return res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
      if (req.url === "/ready") {
        return isServing
          ? res.writeHead(200, { "content-type": "text/plain" }).end("serving\n")
          : res.writeHead(503, { "content-type": "text/plain" }).end("not serving\n");
      }
      res.writeHead(404).end();
    });
    metricsServer.listen(
      Number(config.EGRESS_METRICS_LISTEN.slice(at + 1)),
      config.EGRESS_METRICS_LISTEN.slice(0, at),
    );
  }

  logger.info({ port: grpc.port, replicaId, sealingKeyId: keyring.current.keyId }, "egress proxy listening");
  return {
    port: grpc.port,
    replicaId,
    get sealingKey() {
      return keyring.current;
    },
    metrics,
    get inFlight() {
      return grpc.inFlight;
    },
    drain(deadlineMs) {
      isServing = false;
      return grpc.drain(deadlineMs);
    },
    async close() {
      isServing = false;
      await grpc.close();
      metricsServer?.close();
      await upstream.close();
      await replayStore.close();
      await tracing.shutdown();
      clearInterval(keyRefresh);
      keyring.close();
    },
  };
}
