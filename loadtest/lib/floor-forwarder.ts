// The floor for bench:egress: the cheapest forwarder this stack can build behind the same gRPC
// service, so that the proxy's CPU per call can be read against it instead of against direct calls.
//
// It does what any proxy on grpc-js + undici must do and nothing else: decode the request and the
// ticket payload (generated codec), call the origin over a keep-alive undici pool with the same TLS
// trust as the proxy, replace the secret with one plain string replace, and answer. It does NOT
// verify the signature, spend the ticket, open the sealed credential (the bearer is the bench's
// known secret), resolve and check the address, scan for other spellings or log. Never a real
// proxy: loopback and benchmarks only.

import { readFileSync } from "node:fs";
import { createSecureContext, getCACertificates } from "node:tls";
import { type handleUnaryCall, Server, ServerCredentials, status } from "@grpc/grpc-js";
import { EgressProxyService, type ExecuteRequest, type ExecuteResponse, Ticket } from "@latch/proto/egress";
import { buildConnector, type Dispatcher, Pool } from "undici";
import { ORIGIN_HOST, TEST_CA_PATH } from "./origin-process.ts";

/** The proxy's upstream pool allows this many connections per origin (egress-proxy upstream/pool.ts). */
const CONNECTIONS_PER_POOL = 16;
const KEEP_ALIVE_MS = 30_000;

export interface FloorForwarder {
  /** The plaintext gRPC listener's port on 127.0.0.1. */
  port: number;
  close(): Promise<void>;
}

/**
 * Starts the floor on 127.0.0.1:<free port>, forwarding every Execute to the bench origin
 * (api.latch.test, dialled at 127.0.0.1:originPort) with `Authorization: Bearer <secret>`.
 *
 * @example
 * const floor = await startFloorForwarder({ originPort: origin.port, secret });
 * // k6 calls latch.egress.v1.EgressProxy/Execute on 127.0.0.1:<floor.port>
 */
export async function startFloorForwarder(options: {
  originPort: number;
  secret: string;
}): Promise<FloorForwarder> {
  const { secret } = options;
  const pool = createOriginPool(options.originPort);
  const authorization = `Bearer ${secret}`;

  const execute: handleUnaryCall<ExecuteRequest, ExecuteResponse> = (call, callback) => {
    const started = performance.now();
    const payload = call.request.ticket?.payload;
    const spec = payload === undefined ? undefined : Ticket.decode(payload).call;
    if (spec === undefined) {
      callback({ code: status.INVALID_ARGUMENT, details: "the ticket carries no call" });
      return;
    }
    pool
      .request({ method: spec.method as Dispatcher.HttpMethod, path: spec.path, headers: { authorization } })
      .then(async (response) => {
        const text = await response.body.text();
        callback(null, {
          reachedOrigin: true,
          originStatus: response.statusCode,
          body: Buffer.from(text.split(secret).join("[redacted]")),
          bodyTruncated: false,
          idToken: "",
          headers: [],
          error: undefined,
          durationMs: Math.round(performance.now() - started),
          rotatedCredentials: [],
        });
      })
      .catch((error: unknown) => {
        callback({ code: status.UNAVAILABLE, details: `floor: ${(error as Error).message}` });
      });
  };

  // Same receive limit as the proxy's server; Resolve and GetInfo answer UNIMPLEMENTED.
  const server = new Server({ "grpc.max_receive_message_length": 4 * 1024 * 1024 });
  server.addService(EgressProxyService, { execute });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return {
    port,
    async close() {
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      await pool.close();
    },
  };
}

/**
 * One keep-alive HTTP/1.1 pool to the origin, shaped like the proxy's: the origin URL sets Host,
 * the socket dials 127.0.0.1:originPort, SNI and the certificate check stay on api.latch.test, and
 * the trust store is Node's defaults plus the test CA, parsed once (as the proxy's EXTRA_CA is).
 */
function createOriginPool(originPort: number): Pool {
  const secureContext = createSecureContext({
    ca: [...getCACertificates("default"), readFileSync(TEST_CA_PATH, "utf8")],
  });
  const connect = buildConnector({ secureContext, allowH2: false });
  return new Pool(`https://${ORIGIN_HOST}`, {
    connect: (opts, callback) =>
      connect(
        {
          ...opts,
          protocol: "https:",
          hostname: "127.0.0.1",
          host: ORIGIN_HOST,
          port: String(originPort),
          servername: ORIGIN_HOST,
        },
        callback,
      ),
    connections: CONNECTIONS_PER_POOL,
    pipelining: 1,
    allowH2: false,
    keepAliveTimeout: KEEP_ALIVE_MS,
    keepAliveMaxTimeout: KEEP_ALIVE_MS,
  });
}
