// Test fixture: a real HTTPS origin on loopback with the test PKI, recording every request and
// counting TLS connections, plus the hostile behaviours the upstream path must survive.
import { readFileSync } from "node:fs";
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { createSecureContext, createServer as createTlsServer, type TLSSocket } from "node:tls";
import { brotliCompressSync, gzipSync, constants as zlibConstants } from "node:zlib";

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  /** Filled once the request body has arrived in full. */
  body: Buffer;
}

export type OriginHandler = (req: IncomingMessage, res: ServerResponse, recorded: RecordedRequest) => void;

export interface RunningOrigin {
  port: number;
  url: string;
  requests: RecordedRequest[];
  /** TLS connections accepted so far (keep-alive reuse shows as 1 for many requests). */
  readonly connections: number;
  close(): Promise<void>;
}

const PKI = new URL("./pki/", import.meta.url);

function readPki(file: string): string {
  return readFileSync(new URL(file, PKI), "utf8");
}

/** The CA the tests trust through `extraCa`. */
export function readTestCa(): string {
  return readPki("trusted-ca.pem");
}

/** The trusted CA and the fake providers' CA (pki/README.md), for EGRESS_EXTRA_CA. */
export function readTestCas(): string {
  return `${readPki("trusted-ca.pem")}\n${readPki("providers-ca.pem")}`;
}

/**
 * With the trusted certificate, a client asking for a fake provider's real host name (SNI
 * `api.github.com`, `sqs.eu-west-1.amazonaws.com`, ...) gets the providers leaf instead, so one
 * loopback origin stands in for every host a test routes to it.
 */
function providersSni(which: "trusted" | "untrusted") {
  if (which !== "trusted") return undefined;
  const providers = createSecureContext({
    cert: readPki("providers-leaf.pem"),
    key: readPki("providers-leaf-key.pem"),
  });
  return (
    servername: string,
    done: (error: Error | null, context?: ReturnType<typeof createSecureContext>) => void,
  ) => {
    const isLatchTest = servername === "latch.test" || servername.endsWith(".latch.test");
    done(null, isLatchTest ? undefined : providers);
  };
}

/**
 * Starts an HTTPS server on 127.0.0.1:0 serving a `*.latch.test` certificate, signed by the test CA
 * (`trusted`, default) or by a CA nobody trusts (`untrusted`). The handler runs once the request
 * body is in; the request is recorded on arrival, so "the origin received nothing" is checkable.
 */
export async function startOrigin(
  handler: OriginHandler,
  opts: { cert?: "trusted" | "untrusted"; host?: string } = {},
): Promise<RunningOrigin> {
  const which = opts.cert ?? "trusted";
  const requests: RecordedRequest[] = [];
  let connections = 0;
  const server = createServer(
    {
      cert: readPki(`${which}-leaf.pem`),
      key: readPki(`${which}-leaf-key.pem`),
      SNICallback: providersSni(which),
    },
    (req, res) => {
      const recorded: RecordedRequest = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.alloc(0),
      };
      requests.push(recorded);
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        recorded.body = Buffer.concat(chunks);
        handler(req, res, recorded);
      });
    },
  );
  server.on("secureConnection", () => {
    connections++;
  });
  // A client refusing the certificate (the TLS-failure tests) is expected here, not a fault.
  server.on("tlsClientError", () => {});
  const host = opts.host ?? "127.0.0.1";
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    url: `https://${host}:${port}`,
    requests,
    get connections() {
      return connections;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A TLS origin that speaks whatever `respond` writes (broken HTTP, for the parser paths). It waits
 * for the end of the request head before calling `respond`.
 */
export async function startRawTlsOrigin(respond: (socket: TLSSocket) => void): Promise<RunningOrigin> {
  const requests: RecordedRequest[] = [];
  let connections = 0;
  const sockets = new Set<TLSSocket>();
  const server = createTlsServer(
    { cert: readPki("trusted-leaf.pem"), key: readPki("trusted-leaf-key.pem") },
    (socket) => {
      connections++;
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {});
      let head = "";
      socket.on("data", (chunk: Buffer) => {
        const isFirst = !head.includes("\r\n\r\n");
        head += chunk.toString("latin1");
        if (isFirst && head.includes("\r\n\r\n")) {
          const [method = "", url = ""] = head.split(" ");
          requests.push({ method, url, headers: {}, body: Buffer.alloc(0) });
          respond(socket);
        }
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    url: `https://127.0.0.1:${port}`,
    requests,
    get connections() {
      return connections;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Answers 200 with headers, then sends one byte every `intervalMs` for `totalMs`. */
export function slowDrip(intervalMs: number, totalMs: number): OriginHandler {
  return (_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.flushHeaders();
    const started = Date.now();
    const timer = setInterval(() => {
      if (res.destroyed || Date.now() - started > totalMs) {
        clearInterval(timer);
        if (!res.destroyed) res.end();
        return;
      }
      res.write("x");
    }, intervalMs);
    res.on("close", () => clearInterval(timer));
  };
}

/** Never answers (the socket stays open until the client or the test closes it). */
export function neverAnswer(): OriginHandler {
  return () => {};
}

/** `size` zero bytes, gzip-compressed: a few KiB on the wire, `size` once inflated. */
export function gzipBomb(size: number): OriginHandler {
  const body = gzipSync(Buffer.alloc(size), { level: 9 });
  return (_req, res) => {
    res.writeHead(200, {
      "content-type": "application/json",
      "content-encoding": "gzip",
      "content-length": body.length,
    });
    res.end(body);
  };
}

/** `size` zero bytes, brotli-compressed. */
export function brotliBomb(size: number): OriginHandler {
  const body = brotliCompressSync(Buffer.alloc(size), {
    params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 11 },
  });
  return (_req, res) => {
    res.writeHead(200, {
      "content-type": "application/json",
      "content-encoding": "br",
      "content-length": body.length,
    });
    res.end(body);
  };
}
